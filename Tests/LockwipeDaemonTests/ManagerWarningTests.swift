import Foundation
import LockwipeCore
import LockwipeProtocol
import LockwipeTestSupport
import Synchronization
import Testing

@testable import LockwipeDaemon

/// Records the warnings observers are given.
final class WarningRecorder: LockAndWipeEventObserving, Sendable {
    let seen = Mutex<[(String, Action, Int64?)]>([])
    func willLock(_ event: LockWipeEvent) async {}
    func didLock(_ event: LockWipeEvent) async {}
    func willWipe(_ event: LockWipeEvent) async {}
    func didWipe(_ event: LockWipeEvent) async {}
    func warnLock(_ event: LockWipeEvent) async { seen.withLock { $0.append(("warnLock", event.action, event.dueAt)) } }
    func warnWipe(_ event: LockWipeEvent) async { seen.withLock { $0.append(("warnWipe", event.action, event.dueAt)) } }
    var count: Int { seen.withLock { $0.count } }
}

@Suite struct ManagerWarningTests {
    let day: Int64 = 86_400
    var root: Caller { ManagerFixture.root }

    /// Observers run in their own task: wait until they reported `n` warnings, or a while.
    func settle(_ recorder: WarningRecorder, count n: Int) async throws {
        for _ in 0..<200 where recorder.count < n { try await Task.sleep(for: .milliseconds(10)) }
        try await Task.sleep(for: .milliseconds(50))  // room for a wrong extra one
    }

    @Test func aThresholdIsWarnedAboutOnceAndAgainAfterItMoved() async throws {
        var config = Configuration()
        config.policy = Policy(offlineDaysBeforeLock: 7, offlineDaysBeforeWipe: 30)
        config.warnBeforeSeconds = Int(2 * day)
        let recorder = WarningRecorder()
        try await ManagerFixture.run(config, observers: [recorder]) { f in
            _ = try await f.manager.register(user: "root", directories: [f.directory + "/data/vault"], by: root)
            let registered = f.clock.now().wall
            await f.manager.evaluate()
            #expect(recorder.count == 0)
            #expect(try await f.manager.status(for: root, user: "root").registrations.first?.warning == nil)

            f.clock.advance(seconds: 5 * day + 60)
            await f.manager.evaluate()
            try await settle(recorder, count: 1)
            #expect(recorder.seen.withLock { $0.map { $0.0 } } == ["warnLock"])
            #expect(recorder.seen.withLock { $0.first?.2 } == registered + 7 * day)
            let info = try await f.manager.status(for: root, user: "root").registrations.first?.warning
            #expect(info == WarningInfo(action: .lock, at: Timestamp.iso(registered + 7 * day), inSeconds: 2 * day - 60))

            // Further inside the window: the same threshold, no second warning.
            f.clock.advance(seconds: day)
            await f.manager.evaluate()
            try await settle(recorder, count: 2)
            #expect(recorder.count == 1)
            #expect(try await f.manager.history(user: "root", owner: nil, limit: 100).events.filter { $0.kind == "warn-lock" }.count == 1)

            // An unlock by an administrator restarts the clock: the next window warns again.
            _ = try await f.manager.lock(user: "root", trigger: .admin, reason: "test")
            _ = try await f.manager.unlock(user: "root", by: root)
            f.clock.advance(seconds: 5 * day + 1)
            await f.manager.evaluate()
            try await settle(recorder, count: 2)
            #expect(recorder.seen.withLock { $0.map { $0.0 } } == ["warnLock", "warnLock"])
        }
    }

    @Test func warnBeforeZeroNeverWarns() async throws {
        var config = Configuration()
        config.policy = Policy(offlineDaysBeforeLock: 0, offlineDaysBeforeWipe: 3)
        config.warnBeforeSeconds = 0
        let recorder = WarningRecorder()
        try await ManagerFixture.run(config, observers: [recorder]) { f in
            _ = try await f.manager.register(user: "root", directories: [f.directory + "/data/vault"], by: root)
            f.clock.advance(seconds: 3 * day - 1)
            await f.manager.evaluate()
            try await settle(recorder, count: 1)
            #expect(recorder.count == 0)
            #expect(try await f.manager.status(for: root, user: "root").registrations.first?.warning == nil)
        }
    }
}
