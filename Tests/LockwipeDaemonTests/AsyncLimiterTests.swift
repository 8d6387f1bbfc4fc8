import Foundation
import LockwipeCore
import NIOCore
import Testing

@testable import LockwipeCheckIn
@testable import LockwipeDaemon

/// The check-in client's request slots and its one deadline (issue 12, finding 4): a wait
/// for a slot ends at its deadline or when its task is cancelled, and leaves no slot taken;
/// an attempt that outlives its deadline is cancelled and reported as a timeout.
@Suite struct AsyncLimiterTests {
    @Test func aWaiterGivesUpAtItsDeadlineAndTakesNoSlot() async {
        let limiter = AsyncLimiter(limit: 1)
        #expect(await limiter.acquire())
        let started = ContinuousClock.now
        #expect(await limiter.acquire(until: .now() + .milliseconds(200)) == false)
        let waited = ContinuousClock.now - started
        // Without the deadline it would wait for ever: the upper bound only has to tell the
        // two apart, with room for a loaded machine.
        #expect(waited >= .milliseconds(150) && waited < .seconds(60))
        await limiter.release()
        // The slot is free again: nobody who gave up holds it.
        #expect(await limiter.acquire(until: .now() + .milliseconds(50)))
    }

    @Test func aCancelledWaiterGivesUpAndTakesNoSlot() async {
        let limiter = AsyncLimiter(limit: 1)
        #expect(await limiter.acquire())
        let waiter = Task { await limiter.acquire() }
        try? await Task.sleep(for: .milliseconds(50))
        waiter.cancel()
        #expect(await waiter.value == false)
        await limiter.release()
        #expect(await limiter.acquire(until: .now() + .milliseconds(50)))
    }

    @Test func aReleasedSlotGoesToTheFirstWaiter() async {
        let limiter = AsyncLimiter(limit: 1)
        #expect(await limiter.acquire())
        let waiter = Task { await limiter.acquire(until: .now() + .seconds(30)) }
        try? await Task.sleep(for: .milliseconds(50))
        await limiter.release()
        #expect(await waiter.value)
        // Handed over, not freed: the next one waits.
        #expect(await limiter.acquire(until: .now() + .milliseconds(50)) == false)
    }

    @Test func anAttemptPastItsDeadlineIsCancelledAndTimesOut() async {
        let started = ContinuousClock.now
        let outcome = await CheckInClient.bounded(by: .now() + .milliseconds(200), timeoutSeconds: 7, failure: { CheckInOutcome.failure($0) }) {
            // Like a body that never ends: only cancellation stops it.
            try? await Task.sleep(for: .seconds(3600))
            return Task.isCancelled ? .failure("cancelled") : .failure("finished")
        }
        #expect(outcome == .failure("timed out after 7 s"))
        // Not cancelled, the body would run for an hour.
        #expect(ContinuousClock.now - started < .seconds(60))
    }

    @Test func anAttemptWithinItsDeadlineKeepsItsOutcome() async {
        let outcome = await CheckInClient.bounded(by: .now() + .seconds(30), timeoutSeconds: 30, failure: { CheckInOutcome.failure($0) }) { .failure("HTTP 500") }
        #expect(outcome == .failure("HTTP 500"))
    }
}
