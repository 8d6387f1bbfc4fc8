/// How long wrong passcodes make a user wait before the next attempt on their vault key.
///
/// Each attempt costs the daemon a scrypt run (about 0.1 s and 32 MiB); without a wait a
/// user, or anyone who can reach the socket as them, could guess as fast as the machine
/// allows. The first `freeFailures` wrong passcodes in a row cost nothing; after that
/// every one doubles the wait, from `firstDelay` up to `maxDelay`: with the defaults
/// 0, 0, 0, then 1 s, 2 s, 4 s, ... 512 s, then 15 min. The wait counts from the last
/// failure and survives a restart (the daemon stores the count and its time). A right
/// passcode resets both. An attempt inside the wait is refused at once, is not tried and
/// is not counted: the wait never brings `retry_limit` (which wipes) any closer.
///
/// Pure: times are wall-clock seconds passed in by the caller.
public struct PasscodeBackoff: Sendable, Equatable {
    public var freeFailures: Int
    public var firstDelay: Int64
    public var maxDelay: Int64

    public init(freeFailures: Int = 3, firstDelay: Int64 = 1, maxDelay: Int64 = 15 * 60) {
        self.freeFailures = freeFailures
        self.firstDelay = firstDelay
        self.maxDelay = maxDelay
    }

    public static let standard = PasscodeBackoff()

    /// The wait after `failures` wrong passcodes in a row, in seconds.
    public func delay(afterFailures failures: Int) -> Int64 {
        let over = failures - freeFailures
        guard over > 0, firstDelay > 0 else { return 0 }
        // 2^(over-1) × firstDelay without overflowing: past 62 doublings it is capped anyway.
        guard over - 1 < 62, firstDelay <= maxDelay >> Int64(over - 1) else { return maxDelay }
        return min(maxDelay, firstDelay << Int64(over - 1))
    }

    /// When the next attempt is allowed, or nil when it is allowed now. Times are whole
    /// seconds: a failure during second t counts from the end of it (t + 1), so the wait is
    /// never shorter than the delay (and at most a second longer). A clock that went back
    /// since the last failure (`now` < `lastFailure`) does not shorten the wait, nor make
    /// it longer than one full delay from now.
    public func retryAt(failures: Int, lastFailure: Int64?, now: Int64) -> Int64? {
        let wait = delay(afterFailures: failures)
        guard wait > 0, let lastFailure else { return nil }
        let from = min(lastFailure, now) + 1
        let at = from + wait
        return at > now ? at : nil
    }
}
