/// The one way every message words an offline policy: the journal, the history, the
/// check-in report, `lockwiped --check-config` and `lockwipectl status`.
extension Policy {
    /// One threshold: "lock after 7d", or "never lock" when `days` is 0.
    public static func threshold(_ action: Action, days: Int) -> String {
        days > 0 ? "\(action.rawValue) after \(days)d" : "never \(action.rawValue)"
    }

    /// Both thresholds: "lock after 7d, wipe after 30d", "never lock, never wipe".
    public var text: String {
        "\(Self.threshold(.lock, days: offlineDaysBeforeLock)), \(Self.threshold(.wipe, days: offlineDaysBeforeWipe))"
    }
}
