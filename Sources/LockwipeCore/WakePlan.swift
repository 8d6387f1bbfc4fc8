/// When the daemon's one timer wakes for the next threshold: the exact CLOCK_BOOTTIME
/// instant at which the offline count reaches it.
///
/// A reading (`ClockReading.aligned`) cuts both clocks at BOOTTIME's own second boundary:
/// the wall time is BOOTTIME's whole seconds plus the whole seconds of the wall/boot
/// offset, so every term of the offline count (`OfflineClock.advanced`) grows by one at
/// each whole BOOTTIME second, and only then, whatever the offset's sub-second part (the
/// wall time read this way is that much behind the usual whole-second reading). A count
/// that is `inSeconds` short at a reading therefore reaches the threshold at BOOTTIME
/// `reading.boot + inSeconds` seconds exactly, not `inSeconds` after the reading was taken
/// (up to a second later) or after the timer was armed.
public enum WakePlan {
    public static let second: Int64 = 1_000_000_000

    /// The BOOTTIME instant, in nanoseconds, at which a count that is `inSeconds` short at
    /// `reading` reaches the threshold: the start of BOOTTIME second `reading.boot +
    /// inSeconds`. At least the next second boundary after the reading, so a plan made
    /// from a reading that already says "due" (0 or less) never wakes twice within one
    /// reading's second.
    public static func instant(inSeconds: Int64, after reading: ClockReading) -> Int64 {
        let ahead = max(1, inSeconds)
        guard reading.boot < Int64.max / second - ahead else { return Int64.max }
        return (reading.boot + ahead) * second
    }

    /// Nanoseconds a relative timer sleeps from `nowBootNanos` (BOOTTIME, read just before
    /// arming it) to `instant`: at least 1, since a timerfd armed with 0 is disarmed. An
    /// instant already past (the plan took longer than the rest of its second) wakes at
    /// once. The timer starts counting after the clock was read, so it never fires before
    /// the instant, and a reading taken when it fires is at or past the boundary.
    public static func delay(until instant: Int64, nowBootNanos: Int64) -> Int64 {
        max(1, instant - nowBootNanos)
    }
}
