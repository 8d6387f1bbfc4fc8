/// When to try the next check-in: the interval after a success; after failures a capped
/// exponential backoff with jitter, so that a fleet whose server was down does not come
/// back all at once, and a machine with a dead network does not hammer it.
///
/// After the n-th failure in a row the delay is drawn from `[b/2, b]` with
/// `b = min(cap, initial * 2^(n-1))` ("equal jitter"): 30 s, 60 s, 120 s, ... with the
/// defaults, never more than the interval. Pure: the random draw is a parameter.
public struct CheckInBackoff: Sendable, Equatable {
    public var initialSeconds: Double
    public var capSeconds: Double

    public static let defaultInitialSeconds: Double = 30

    public init(initialSeconds: Double = defaultInitialSeconds, capSeconds: Double) {
        self.initialSeconds = initialSeconds
        self.capSeconds = capSeconds
    }

    /// The delay before the next attempt after `failures` failures in a row (0 = the last
    /// attempt succeeded: the interval). `random` is uniform in [0, 1).
    public func delay(afterFailures failures: Int, random: Double) -> Double {
        guard failures > 0 else { return capSeconds }
        let exponent = min(failures - 1, 30)  // 2^30 * 30 s is far past any cap
        let ceiling = min(capSeconds, initialSeconds * Double(1 << exponent))
        let r = min(max(random, 0), 1)
        return max(1, ceiling / 2 + ceiling / 2 * r)
    }
}
