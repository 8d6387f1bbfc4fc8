import LockwipeCore
import Testing

@Suite struct PasscodeBackoffTests {
    /// failures in a row → seconds to wait after the last one (the defaults).
    @Test(
        arguments: [
            (0, 0), (1, 0), (2, 0), (3, 0), (4, 1), (5, 2), (6, 4), (7, 8), (10, 64), (13, 512),
            (14, 900), (15, 900), (100, 900), (Int.max, 900),
        ] as [(Int, Int64)])
    func delayDoublesAfterThreeFreeFailuresUpToFifteenMinutes(_ failures: Int, _ seconds: Int64) {
        #expect(PasscodeBackoff.standard.delay(afterFailures: failures) == seconds)
    }

    /// (failures, last failure, now) → when the next attempt is allowed (nil: now). A
    /// failure during second t counts from t + 1: never less than the delay.
    @Test(
        arguments: [
            (3, 1000, 1000, nil),  // three free failures: no wait
            (4, 1000, 1000, 1002),  // fourth: one second from the end of the failure's second
            (4, 1000, 1001, 1002),
            (4, 1000, 1002, nil),  // ... which has passed
            (5, 1000, 1001, 1003),
            (6, 1000, 1004, 1005),
            (6, 1000, 1005, nil),
            (20, 1000, 1900, 1901),  // capped at 15 min
            (20, 1000, 1901, nil),
            (6, 1000, 500, 505),  // the clock went back: one full delay from now, no more
            (6, nil, 1000, nil),  // no failure time recorded (a database from before): no wait
        ] as [(Int, Int64?, Int64, Int64?)])
    func retryAtCountsFromTheLastFailureWithTheClockGiven(_ failures: Int, _ last: Int64?, _ now: Int64, _ expected: Int64?) {
        #expect(PasscodeBackoff.standard.retryAt(failures: failures, lastFailure: last, now: now) == expected)
    }

    @Test func otherParametersAndNoOverflow() {
        let b = PasscodeBackoff(freeFailures: 0, firstDelay: 10, maxDelay: 60)
        #expect((1...5).map(b.delay(afterFailures:)) == [10, 20, 40, 60, 60])
        #expect(PasscodeBackoff(freeFailures: 0, firstDelay: 0, maxDelay: 60).delay(afterFailures: 9) == 0)
        #expect(PasscodeBackoff(freeFailures: 0, firstDelay: 1, maxDelay: .max).delay(afterFailures: 70) == .max)
    }
}
