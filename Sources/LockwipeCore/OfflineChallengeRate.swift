/// How often one registration may ask for an offline-code challenge: `perWindow` in a
/// window of `windowSeconds` that starts at the first challenge after the last window
/// ended. Each challenge takes a counter of the machine's one key epoch; without a limit
/// one user used up the 2^20 counters in 48 minutes (issue 40, finding 1). With it, one
/// registration takes 12 years, and a hundred users in concert 44 days; a counter space
/// used up refuses challenges until provisioning moves to the next epoch, it never repeats
/// a challenge. A reading of the clock before the window's start (the clock set back)
/// starts a new window: only root can set the clock.
///
/// Pure: the caller reads the clock and stores the window with the challenge.
public enum OfflineChallengeRate {
    public static let perWindow = 10
    public static let windowSeconds: Int64 = 3_600

    public struct Window: Equatable, Sendable {
        public var start: Int64
        public var count: Int
        public init(start: Int64, count: Int) {
            self.start = start
            self.count = count
        }
    }

    public enum Decision: Equatable, Sendable {
        /// Issue it, and store this window with it.
        case allowed(Window)
        /// Refuse it: the next challenge may be asked at this time.
        case refused(until: Int64)
    }

    /// Whether a challenge asked at `now` is allowed after `window` (nil: none asked yet
    /// for this registration).
    public static func decide(after window: Window?, now: Int64) -> Decision {
        guard let window, now >= window.start, now < window.start + windowSeconds else {
            return .allowed(Window(start: now, count: 1))
        }
        guard window.count < perWindow else { return .refused(until: window.start + windowSeconds) }
        return .allowed(Window(start: window.start, count: window.count + 1))
    }
}
