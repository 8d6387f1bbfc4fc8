import Foundation
import LockwipeCore
import LockwipeProtocol
import LockwipeSystemd
import LockwipeTestSupport
import Logging
import Synchronization
import Testing

@testable import LockwipeDaemon

@Suite struct ManagerTests {
    let day: Int64 = 86_400

    func withManager(lockDays: Int, _ body: (Manager, ManualClock, String) async throws -> Void) async throws {
        var config = Configuration()
        config.policy = Policy(offlineDaysBeforeLock: lockDays, offlineDaysBeforeWipe: 0)
        try await ManagerFixture.run(config) { f in try await body(f.manager, f.clock, f.directory) }
    }

    var root: Caller { ManagerFixture.root }

    /// The schedule after any change counts the time that passed since the last
    /// checkpoint; a stale checkpoint would push the lock days into the future.
    @Test func theNextActionCountsTimeSinceTheLastCheckpoint() async throws {
        try await withManager(lockDays: 7) { manager, clock, dir in
            _ = try await manager.register(user: "root", directories: [dir + "/data/vault"], by: root)
            #expect(await manager.statusLine() == "1 user; next: lock root in 7d")
            clock.advance(seconds: 3 * day)
            #expect(await manager.statusLine() == "1 user; next: lock root in 4d")
            let status = try await manager.status(for: root, user: "root")
            #expect(status.registrations.first?.offlineSeconds == 3 * day)
        }
    }

    @Test func adminUnlockRestartsTheOfflineClockAndRestoresTheDirectory() async throws {
        try await withManager(lockDays: 7) { manager, clock, dir in
            let vault = dir + "/data/vault"
            _ = try await manager.register(user: "root", directories: [vault], by: root)
            #expect(chmod(vault, 0o750) == 0)
            clock.advance(seconds: 8 * day)
            await manager.evaluate()
            #expect(try await manager.status(for: root, user: nil).registrations.first?.state == .locked)
            var st = stat()
            #expect(stat(vault, &st) == 0 && st.st_mode & 0o7777 == 0)
            _ = try await manager.unlock(user: "root", by: root)
            #expect(stat(vault, &st) == 0 && st.st_mode & 0o7777 == 0o750)
            let after = try await manager.status(for: root, user: nil).registrations.first
            #expect(after?.state == .active)
            #expect(after?.offlineSeconds == 0)
        }
    }
}
