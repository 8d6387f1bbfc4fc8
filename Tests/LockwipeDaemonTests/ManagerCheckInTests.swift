import Foundation
import LockwipeCore
import LockwipeProtocol
@testable import LockwipeDaemon
import LockwipeSystemd
import Logging
import NIOCore
import Synchronization
import Testing

/// A policy server that answers what the test says, and counts what it was asked.
final class ScriptedFetcher: SettingsFetching {
    private let state = Mutex<(answer: CheckInOutcome, calls: [String], tokens: [String?])>((.failure("unset"), [], []))
    func answer(_ outcome: CheckInOutcome) { state.withLock { $0.answer = outcome } }
    var calls: [String] { state.withLock { $0.calls } }
    var tokens: [String?] { state.withLock { $0.tokens } }
    func fetch(user: String, credentials: ServerCredentials?, server: ServerConfiguration, deadline: NIODeadline?) async -> CheckInOutcome {
        state.withLock {
            $0.calls.append(user)
            $0.tokens.append(credentials?.token)
            return $0.answer
        }
    }
    func shutdown() async {}
}

@Suite struct ManagerCheckInTests {
    let day: Int64 = 86_400
    var root: Caller { Caller(credentials: PeerCredentials(pid: 1, uid: 0, gid: 0), userName: "root", isAdmin: true) }

    func settings(lock: Int, wipe: Int, locked: Bool? = nil) -> ServerSettings {
        ServerSettings(lockWipe: LockWipeSettings(enabled: true, blockDisconnectedPeriod: lock, wipeDisconnectedPeriod: wipe), registrationLocked: locked)
    }

    func withManager(lockDays: Int = 2, _ body: (Manager, ManualClock, ScriptedFetcher, String) async throws -> Void) async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lwci-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir + "/data", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var config = Configuration()
        config.policy = Policy(offlineDaysBeforeLock: lockDays, offlineDaysBeforeWipe: 0)
        // A long interval: nothing is scheduled by itself during a test.
        config.server = ServerConfiguration(url: "http://127.0.0.1:9", intervalSeconds: 100_000, timeoutSeconds: 1)
        let clock = ManualClock(ClockReading(wall: 1_800_000_000, boot: 100, bootID: "b"))
        let fetcher = ScriptedFetcher()
        let manager = Manager(
            configuration: config, store: try StateStore(directory: dir + "/state"), clock: clock, protection: PermissionLock(),
            eraser: SecureEraser(), observers: ObserverHub([]), logger: Logger(label: "test"), notifier: SystemdNotifier(),
            paths: .init(stateDirectory: dir + "/state", socketPath: dir + "/sock", hooksDirectory: dir + "/hooks", configPath: dir + "/c.toml"),
            fetcher: fetcher, random: { 0.5 })
        try await body(manager, clock, fetcher, dir)
        await manager.stop()
    }

    func reg(_ m: Manager) async throws -> RegistrationInfo {
        try #require(try await m.status(for: root, user: "root").registrations.first)
    }

    @Test func aContactRestartsTheClockAndTheServerPolicyWins() async throws {
        try await withManager { m, clock, fetcher, dir in
            _ = try await m.register(user: "root", directories: [dir + "/data/v"], credentials: ServerCredentials(token: "s3cret"), by: root)
            clock.advance(seconds: day)
            fetcher.answer(.contact(settings(lock: 5, wipe: 9)))
            let r = try await m.checkIn(users: ["root"])
            #expect(r.first?.failed == nil)
            let info = try await reg(m)
            #expect(info.offlineSeconds == 0)
            #expect(info.policySource == "server")
            #expect(info.policy?.policy == Policy(offlineDaysBeforeLock: 5, offlineDaysBeforeWipe: 9))
            #expect(info.lastError == nil)
            #expect(info.credentials == "token")
            #expect(fetcher.tokens.last == "s3cret")
            #expect(await m.policyInfo().source == "server")
        }
    }

    @Test func failuresChangeNothingButTheAttempt() async throws {
        try await withManager { m, clock, fetcher, dir in
            _ = try await m.register(user: "root", directories: [dir + "/data/v"], by: root)
            clock.advance(seconds: day)
            fetcher.answer(.failure("HTTP 500"))
            let r = try await m.checkIn(users: ["root"])
            #expect(r.first?.failed == true)
            let info = try await reg(m)
            #expect(info.offlineSeconds == day)
            #expect(info.policySource == "local")
            #expect(info.lastError == "HTTP 500")
            #expect(info.lastAttempt != nil)
        }
    }

    @Test func anInvalidServerPolicyIsRejectedAndTheLastValidKept() async throws {
        try await withManager { m, _, fetcher, dir in
            _ = try await m.register(user: "root", directories: [dir + "/data/v"], by: root)
            fetcher.answer(.contact(settings(lock: 5, wipe: 9)))
            _ = try await m.checkIn(users: ["root"])
            fetcher.answer(.contact(settings(lock: 9, wipe: 5)))
            _ = try await m.checkIn(users: ["root"])
            let info = try await reg(m)
            #expect(info.policy?.policy == Policy(offlineDaysBeforeLock: 5, offlineDaysBeforeWipe: 9))
            #expect(info.lastError?.contains("rejected") == true)
        }
    }

    /// README.md ("Policy server"): one bounded check-in before an offline-triggered
    /// action; if it is a contact, nothing happens.
    @Test func anOfflineLockChecksInFirst() async throws {
        try await withManager(lockDays: 2) { m, clock, fetcher, dir in
            _ = try await m.register(user: "root", directories: [dir + "/data/v"], by: root)
            clock.advance(seconds: 3 * day)
            fetcher.answer(.contact(ServerSettings()))
            await m.evaluate()
            #expect(try await reg(m).state == .active)
            #expect(fetcher.calls.count == 1)

            clock.advance(seconds: 3 * day)
            fetcher.answer(.failure("cannot connect"))
            await m.evaluate()
            let info = try await reg(m)
            #expect(info.state == .locked)
            #expect(info.lockTrigger == .offline)
            #expect(fetcher.calls.count == 2)
        }
    }

    @Test func aContactLiftsServerAndOfflineLocksButNeverAnAdminLock() async throws {
        try await withManager { m, _, fetcher, dir in
            _ = try await m.register(user: "root", directories: [dir + "/data/v"], by: root)
            fetcher.answer(.lock)
            _ = try await m.checkIn(users: ["root"])
            #expect(try await reg(m).state == .locked)
            #expect(try await reg(m).lockTrigger == .server)
            fetcher.answer(.contact(settings(lock: 5, wipe: 9, locked: false)))
            _ = try await m.checkIn(users: ["root"])
            #expect(try await reg(m).state == .active)

            _ = try await m.lock(user: "root", trigger: .admin, reason: "test")
            _ = try await m.checkIn(users: ["root"])
            #expect(try await reg(m).state == .locked)
            #expect(try await reg(m).lockTrigger == .admin)
        }
    }

    @Test func blockedIsShownAndClearedByAContact() async throws {
        try await withManager { m, clock, fetcher, dir in
            _ = try await m.register(user: "root", directories: [dir + "/data/v"], by: root)
            clock.advance(seconds: day)
            fetcher.answer(.blocked("REG_BLOCKED"))
            _ = try await m.checkIn(users: ["root"])
            var info = try await reg(m)
            #expect(info.blocked && info.blockedCode == "REG_BLOCKED" && info.state == .active && info.offlineSeconds == day)
            fetcher.answer(.contact(ServerSettings()))
            _ = try await m.checkIn(users: ["root"])
            info = try await reg(m)
            #expect(!info.blocked && info.blockedCode == nil)
        }
    }

    @Test func badCredentialsAreRefusedBeforeAnythingIsStored() async throws {
        try await withManager { m, _, _, dir in
            await #expect(throws: ManagerError.self) {
                _ = try await m.register(user: "root", directories: [dir + "/data/v"], credentials: ServerCredentials(token: "a b\r\nX: y"), by: root)
            }
            let status = try await m.status(for: root, user: nil)
            #expect(status.registrations.isEmpty)
        }
    }
}
