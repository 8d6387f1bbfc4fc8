import Foundation
import LockwipeCore
import LockwipeProtocol
import LockwipeSystemd
import LockwipeTestSupport
import LockwipeVaultIO
import Logging
import Testing

@testable import LockwipeDaemon

@Suite struct RegistrationAccountsTests {
    var root: Caller { ManagerFixture.root }

    func withManager(_ accounts: TableAccounts, _ body: (Manager, String) async throws -> Void) async throws {
        try await ManagerFixture.run(accounts: accounts, encryption: PermissionLock()) { f in try await body(f.manager, f.directory) }
    }

    @Test func registrationTakesTheUIDFromTheAccountLookupAndGivesTheNewVaultToIt() async throws {
        let table = TableAccounts([Account(name: "fieldworker", uid: 48_213, gid: 48_214)])
        try await withManager(table) { m, dir in
            _ = try await m.register(user: "fieldworker", directories: [dir + "/data/vault"], by: root)
            let r = try #require(try await m.context.store.registration("fieldworker"))
            #expect(r.uid == 48_213)
            var st = stat()
            #expect(stat(dir + "/data/vault", &st) == 0)
            #expect(st.st_uid == 48_213 && st.st_gid == 48_214)
        }
    }

    @Test func aNameTheLookupDoesNotKnowIsRefusedAndNothingIsCreated() async throws {
        try await withManager(TableAccounts([])) { m, dir in
            await #expect(throws: ManagerError.registrationRefused("no Unix user named 'root'")) {
                _ = try await m.register(user: "root", directories: [dir + "/data/vault"], by: root)
            }
            #expect(!FileManager.default.fileExists(atPath: dir + "/data/vault"))
            let none = try await m.context.store.registration("root")
            #expect(none == nil)
        }
    }
}
