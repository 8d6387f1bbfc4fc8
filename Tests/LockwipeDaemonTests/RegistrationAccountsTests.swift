import Foundation
import LockwipeCore
import LockwipeProtocol
@testable import LockwipeDaemon
import LockwipeSystemd
import Logging
import Testing

/// Accounts as the test says: registration needs no real system user.
struct TableAccounts: AccountLookup {
    var accounts: [String: Account]
    func account(named name: String) -> Account? { accounts[name] }
}

@Suite struct RegistrationAccountsTests {
    var root: Caller { Caller(credentials: PeerCredentials(pid: 1, uid: 0, gid: 0), userName: "root", isAdmin: true) }

    func withManager(_ accounts: TableAccounts, _ body: (Manager, String) async throws -> Void) async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lwacct-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir + "/data", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let manager = Manager(
            configuration: Configuration(), store: try StateStore(directory: dir + "/state"),
            clock: ManualClock(ClockReading(wall: 1_800_000_000, boot: 100, bootID: "b")), protection: PermissionLock(),
            eraser: SecureEraser(), observers: ObserverHub([]), logger: Logger(label: "test"), notifier: SystemdNotifier(),
            paths: .init(stateDirectory: dir + "/state", socketPath: dir + "/sock", hooksDirectory: dir + "/hooks", configPath: dir + "/c.toml"),
            encryption: PermissionLock(), accounts: accounts)
        try await body(manager, dir)
        await manager.stop()
    }

    @Test func registrationTakesTheUIDFromTheAccountLookupAndGivesTheNewVaultToIt() async throws {
        let table = TableAccounts(accounts: ["fieldworker": Account(name: "fieldworker", uid: 48_213, gid: 48_214)])
        try await withManager(table) { m, dir in
            _ = try await m.register(user: "fieldworker", directories: [dir + "/data/vault"], by: root)
            let r = try #require(try await m.registration("fieldworker"))
            #expect(r.uid == 48_213)
            var st = stat()
            #expect(stat(dir + "/data/vault", &st) == 0)
            #expect(st.st_uid == 48_213 && st.st_gid == 48_214)
        }
    }

    @Test func aNameTheLookupDoesNotKnowIsRefusedAndNothingIsCreated() async throws {
        try await withManager(TableAccounts(accounts: [:])) { m, dir in
            await #expect(throws: ManagerError.registrationRefused("no Unix user named 'root'")) {
                _ = try await m.register(user: "root", directories: [dir + "/data/vault"], by: root)
            }
            #expect(!FileManager.default.fileExists(atPath: dir + "/data/vault"))
            let none = try await m.registration("root")
            #expect(none == nil)
        }
    }
}
