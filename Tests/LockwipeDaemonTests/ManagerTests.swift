import Foundation
import LockwipeCore
import LockwipeProtocol
@testable import LockwipeDaemon
import LockwipeSystemd
import Logging
import Synchronization
import Testing

/// A clock the test moves by hand.
final class ManualClock: ClockSource, Sendable {
    private let reading: Mutex<ClockReading>
    init(_ start: ClockReading) { reading = Mutex(start) }
    func now() -> ClockReading { reading.withLock { $0 } }
    func advance(seconds: Int64) { reading.withLock { $0.wall += seconds; $0.boot += seconds } }
}

@Suite struct ManagerTests {
    let day: Int64 = 86_400

    func withManager(lockDays: Int, _ body: (Manager, ManualClock, String) async throws -> Void) async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lwmgr-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir + "/data", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var config = Configuration()
        config.policy = Policy(offlineDaysBeforeLock: lockDays, offlineDaysBeforeWipe: 0)
        let clock = ManualClock(ClockReading(wall: 1_800_000_000, boot: 100, bootID: "b"))
        let manager = Manager(
            configuration: config, store: try StateStore(directory: dir + "/state"), clock: clock, protection: PermissionLock(),
            eraser: SecureEraser(), observers: ObserverHub([]), logger: Logger(label: "test"), notifier: SystemdNotifier(),
            paths: .init(stateDirectory: dir + "/state", socketPath: dir + "/sock", hooksDirectory: dir + "/hooks", configPath: dir + "/c.toml"))
        try await body(manager, clock, dir)
        await manager.stop()
    }

    var root: Caller { Caller(credentials: PeerCredentials(pid: 1, uid: 0, gid: 0), userName: "root", isAdmin: true) }

    /// The schedule after any change counts the time that passed since the last
    /// checkpoint; a stale checkpoint would push the lock days into the future.
    @Test func theNextActionCountsTimeSinceTheLastCheckpoint() async throws {
        try await withManager(lockDays: 7) { manager, clock, dir in
            _ = try await manager.register(user: "root", directories: [dir + "/data/vault"], by: root)
            #expect(await manager.statusLine == "1 user; next: lock root in 7d")
            clock.advance(seconds: 3 * day)
            #expect(await manager.statusLine == "1 user; next: lock root in 4d")
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
