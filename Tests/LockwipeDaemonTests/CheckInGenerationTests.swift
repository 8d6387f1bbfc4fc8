import Foundation
import LockwipeCore
import LockwipeProtocol
@testable import LockwipeDaemon
import LockwipeSystemd
import Logging
import NIOCore
import Synchronization
import Testing

/// A server whose answer is already on its way: it answers only when released, and
/// cancelling the request does not stop the answer (what a race with unregister can give).
final class HeldFetcher: SettingsFetching {
    private let state = Mutex<(answer: CheckInOutcome, calls: Int, released: Bool, waiting: [CheckedContinuation<Void, Never>])>(
        (.failure("unset"), 0, false, []))
    init(answer: CheckInOutcome) { state.withLock { $0.answer = answer } }
    var calls: Int { state.withLock { $0.calls } }
    func fetch(user: String, credentials: ServerCredentials?, server: ServerConfiguration, deadline: NIODeadline?) async -> CheckInOutcome {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let go = state.withLock { s -> Bool in
                s.calls += 1
                if s.released { return true }
                s.waiting.append(c)
                return false
            }
            if go { c.resume() }
        }
        return state.withLock { $0.answer }
    }
    func release() {
        let waiting = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.released = true
            defer { s.waiting = [] }
            return s.waiting
        }
        for c in waiting { c.resume() }
    }
    func shutdown() async {}
}

/// Issue 12, finding 5: an answer is applied only to the registration (by id) that asked.
@Suite struct CheckInGenerationTests {
    var root: Caller { Caller(credentials: PeerCredentials(pid: 1, uid: 0, gid: 0), userName: "root", isAdmin: true) }

    @Test func aStaleWipeOrderReachesNoNewRegistrationOfTheSameUser() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lwgen-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir + "/data/new", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try "new registration's data\n".write(toFile: dir + "/data/new/canary.txt", atomically: true, encoding: .utf8)
        var config = Configuration()
        config.server = ServerConfiguration(url: "https://127.0.0.1:9", intervalSeconds: 100_000, timeoutSeconds: 1)
        let fetcher = HeldFetcher(answer: .wipe)
        let m = Manager(
            configuration: config, store: try StateStore(directory: dir + "/state"),
            clock: ManualClock(ClockReading(wall: 1_800_000_000, boot: 100, bootID: "b")), protection: PermissionLock(),
            eraser: SecureEraser(), observers: ObserverHub([]), logger: Logger(label: "test"), notifier: SystemdNotifier(),
            paths: .init(stateDirectory: dir + "/state", socketPath: dir + "/sock", hooksDirectory: dir + "/hooks", configPath: dir + "/c.toml"),
            fetcher: fetcher, random: { 0.5 })
        _ = try await m.register(user: "root", directories: [dir + "/data/old"], by: root)
        _ = try #require(try await m.status(for: root, user: "root").registrations.first)

        let pending = Task { try await m.checkIn(users: ["root"]) }
        while fetcher.calls == 0 { try await Task.sleep(for: .milliseconds(10)) }
        _ = try await m.unregister(user: "root", by: root)
        _ = try await m.register(user: "root", directories: [dir + "/data/new"], by: root)
        fetcher.release()  // the old registration's TRAFFIC_REG_WIPED arrives now
        let result = try #require(try await pending.value.first)

        #expect(result.failed == true)
        #expect(result.detail.contains("dropped"))
        let now = try #require(try await m.status(for: root, user: "root").registrations.first)
        #expect(now.state == .active)
        #expect(FileManager.default.fileExists(atPath: dir + "/data/new/canary.txt"))
        let events = try await m.history(for: root, user: "root", limit: 100).events
        #expect(events.contains { $0.kind == "check-in-dropped" && $0.detail.contains("TRAFFIC_REG_WIPED") })
        #expect(!events.contains { $0.kind == "wipe" })
        await m.stop()
    }
}
