import LockwipeCore
import NIOCore
import Synchronization
import Testing

@testable import LockwipeDaemon

/// A monotonic clock that moves only when the test says, and the timer on it: a sleeper
/// waits until `advance` passes its deadline, or until its task is cancelled.
final class FakeTimer: Sendable {
    private struct Sleeper {
        var deadline: NIODeadline
        var wake: CheckedContinuation<Void, any Error>
    }
    private let state = Mutex<(now: NIODeadline, sleepers: [UInt64: Sleeper], next: UInt64)>((.uptimeNanoseconds(1_000_000_000), [:], 0))

    func now() -> NIODeadline { state.withLock { $0.now } }
    /// The deadlines of the sleepers waiting now.
    var waiting: [NIODeadline] { state.withLock { $0.sleepers.values.map(\.deadline) } }

    func sleep(until deadline: NIODeadline) async throws {
        let id = state.withLock { s -> UInt64 in
            s.next += 1
            return s.next
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
                let wake: Result<Void, any Error>? = state.withLock { s in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if deadline <= s.now { return .success(()) }
                    s.sleepers[id] = Sleeper(deadline: deadline, wake: c)
                    return nil
                }
                if let wake { c.resume(with: wake) }
            }
        } onCancel: {
            state.withLock { $0.sleepers.removeValue(forKey: id) }?.wake.resume(throwing: CancellationError())
        }
    }

    func advance(seconds: Int64) {
        let due = state.withLock { s -> [Sleeper] in
            s.now = s.now + .seconds(seconds)
            let due = s.sleepers.filter { $0.value.deadline <= s.now }
            for id in due.keys { s.sleepers[id] = nil }
            return Array(due.values)
        }
        for sleeper in due { sleeper.wake.resume() }
    }
}

@Suite struct CheckInSchedulerTests {
    let timer = FakeTimer()
    let dues = AsyncStream<Void>.makeStream()

    func scheduler() -> CheckInScheduler {
        let timer = self.timer
        let s = CheckInScheduler(now: { timer.now() }, sleep: { try await timer.sleep(until: $0) })
        let continuation = dues.continuation
        s.onDue = { continuation.yield() }
        return s
    }

    /// Waits until the timer has a sleeper (its task started) for `deadline`.
    func timerWaits(for deadline: NIODeadline) async {
        for _ in 0..<2_000 where !timer.waiting.contains(deadline) { await Task.yield() }
    }

    // The registrations the tests plan: one id each; `aliceAgain` is alice registered again.
    let alice = CheckInScheduler.Due(id: RegistrationID("r-alice"), user: "alice")
    let bob = CheckInScheduler.Due(id: RegistrationID("r-bob"), user: "bob")
    let carol = CheckInScheduler.Due(id: RegistrationID("r-carol"), user: "carol")
    let aliceAgain = CheckInScheduler.Due(id: RegistrationID("r-alice-2"), user: "alice")

    @Test func onePlanOneTimerWhichFiresAtTheSoonest() async {
        let s = scheduler()
        defer { s.stop() }
        s.plan(alice.id, of: "alice", in: 60)
        s.plan(bob.id, of: "bob", in: 30)
        await timerWaits(for: timer.now() + .seconds(30))
        #expect(timer.waiting == [timer.now() + .seconds(30)], "one timer, for the soonest plan")
        #expect(s.nextCheckIn(of: alice.id, wall: 1_000) == 1_060)
        #expect(s.nextCheckIn(of: carol.id, wall: 1_000) == nil)

        timer.advance(seconds: 30)
        var it = dues.stream.makeAsyncIterator()
        await it.next()
        #expect(s.takeDue() == [bob])
        #expect(s.nextCheckIn(of: bob.id, wall: 1_000) == nil, "a plan that was taken is gone")
        #expect(s.nextCheckIn(of: alice.id, wall: 1_000) == 1_030)
        await timerWaits(for: timer.now() + .seconds(30))
        #expect(timer.waiting == [timer.now() + .seconds(30)], "the timer waits for the next plan")
    }

    @Test func aCheckInInFlightIsNotStartedTwice() async {
        let s = scheduler()
        defer { s.stop() }
        let request = Task<CheckInOutcome, Never> { .failure("test") }
        let ticket = s.begin(registration: alice.id, request)
        #expect(s.nextCheckIn(of: alice.id, wall: 1_000) == 1_000, "in flight: now")
        s.planNow([alice, bob], all: false)
        #expect(s.takeDue() == [bob], "alice has one in flight; it plans its next one when it ends")
        s.plan(alice.id, of: "alice", in: 0)
        #expect(s.takeDue() == [], "still in flight")
        s.end(ticket)
        #expect(s.nextCheckIn(of: alice.id, wall: 1_000) == nil)
        #expect(s.requestsInFlight == 0)
    }

    @Test func planNowKeepsPlansUnlessAll() {
        let s = scheduler()
        defer { s.stop() }
        s.plan(alice.id, of: "alice", in: 600)
        s.planNow([alice, bob], all: false)
        #expect(s.nextCheckIn(of: alice.id, wall: 0) == 600)
        #expect(s.nextCheckIn(of: bob.id, wall: 0) == 0)
        s.planNow([alice], all: true)
        #expect(s.nextCheckIn(of: alice.id, wall: 0) == 0)
    }

    @Test func plansAreKeptByRegistrationNotByName() {
        let s = scheduler()
        defer { s.stop() }
        s.plan(alice.id, of: "alice", in: 600)
        // alice unregistered (her plan forgotten) and registered again: another registration.
        s.forget(alice.id)
        s.plan(aliceAgain.id, of: "alice", in: 0)
        #expect(s.nextCheckIn(of: alice.id, wall: 0) == nil, "the old registration has no plan")
        #expect(s.nextCheckIn(of: aliceAgain.id, wall: 0) == 0)
        s.plan(carol.id, of: "carol", in: 0)
        s.planNow([bob], all: true)
        #expect(s.takeDue() == [aliceAgain, bob, carol], "in user name order")
    }

    @Test func unregisterCancelsTheRequestsOfThatRegistrationOnly() async {
        let s = scheduler()
        defer { s.stop() }
        let gone = Task<CheckInOutcome, Never> {
            try? await Task.sleep(for: .seconds(600))
            return Task.isCancelled ? .failure("cancelled") : .failure("answered")
        }
        let other = Task<CheckInOutcome, Never> { .failure("answered") }
        _ = s.begin(registration: alice.id, gone)
        _ = s.begin(registration: aliceAgain.id, other)
        s.cancelRequests(of: alice.id)
        #expect(await gone.value == .failure("cancelled"))
        #expect(await other.value == .failure("answered"))
        #expect(s.requestsInFlight == 1)
    }

    @Test func stopCancelsTheTimerAndPlansNothingMore() async {
        let s = scheduler()
        defer { s.stop() }
        #expect(!s.isPlanning)
        s.startPlanning()
        #expect(s.isPlanning)
        s.plan(alice.id, of: "alice", in: 30)
        await timerWaits(for: timer.now() + .seconds(30))
        s.stop()
        #expect(!s.isPlanning)
        s.startPlanning()
        #expect(!s.isPlanning, "a stopped scheduler never plans again")
        for _ in 0..<2_000 where !timer.waiting.isEmpty { await Task.yield() }
        #expect(timer.waiting.isEmpty, "the timer's task was cancelled")
        s.plan(alice.id, of: "alice", in: 0)
        s.planNow([bob], all: true)
        #expect(s.takeDue() == [])
        #expect(timer.waiting.isEmpty)
    }

    @Test func scheduledCheckInsAreTrackedUntilTheyEnd() async {
        let s = scheduler()
        defer { s.stop() }
        let (ended, signal) = AsyncStream<UInt64>.makeStream()
        s.run { token in signal.yield(token) }
        #expect(s.running.count == 1)
        var it = ended.makeAsyncIterator()
        let token = await it.next()!
        s.ended(token)
        #expect(s.running.isEmpty)
    }
}
