/// A warning that an offline-triggered action is near: which action, how long until it is
/// due, and which threshold it is for.
public struct OfflineWarning: Sendable, Equatable {
    public var action: Action
    /// Seconds until the action is due (offline seconds: at least this much real time).
    public var inSeconds: Int64
    /// Identifies the threshold warned about: the action, the last contact the offline time
    /// counts from, and the offline time at which the action is due. A new contact (or a
    /// new policy) moves it, and a moved threshold is warned about again.
    public var threshold: String

    public init(action: Action, inSeconds: Int64, threshold: String) {
        self.action = action
        self.inSeconds = inSeconds
        self.threshold = threshold
    }
}

/// The warning window before offline-triggered locks and wipes (`[notify] warn_before`).
/// Pure: the daemon reads the clocks, persists which threshold it warned about, and wakes.
public enum WarningWindow {
    /// What the window says about one registration now.
    public enum Decision: Sendable, Equatable {
        /// No offline-triggered action ahead, or warnings are off (`warn_before` = 0).
        case none
        /// The next action is further away than `warn_before`: the window opens in this
        /// many seconds (a lower bound of real time, as offline time grows at least as
        /// fast as real time).
        case opensIn(Int64)
        /// The next action is due within `warn_before`.
        case warn(OfflineWarning)
    }

    /// Decides for a registration whose offline time counts from `lastContact`, is
    /// `offlineSeconds` now, and whose next offline-triggered action is `next`
    /// (`PolicyEvaluator.evaluate(...).next`). Only offline thresholds are warned about:
    /// a lock or wipe the server orders happens at once and has no window. The window is
    /// inclusive: due in exactly `warnBefore` seconds warns.
    public static func decide(next: ScheduledAction?, lastContact: Int64, offlineSeconds: Int64, warnBefore: Int64) -> Decision {
        guard warnBefore > 0, let next, next.inSeconds > 0 else { return .none }
        if next.inSeconds > warnBefore { return .opensIn(next.inSeconds - warnBefore) }
        let dueAtOffline = offlineSeconds + next.inSeconds
        return .warn(
            OfflineWarning(
                action: next.action, inSeconds: next.inSeconds,
                threshold: "\(next.action.rawValue)@\(lastContact)+\(dueAtOffline)"))
    }

    /// The notice for someone logging in (`lockwipectl pam-account`): what will happen,
    /// when (`at`, already formatted, and `inSeconds` from now), and what to do.
    public static func notice(user: String, action: Action, at: String, inSeconds: Int64) -> String {
        let what =
            action == .lock
            ? "the data of \(user) on this machine will be LOCKED"
            : "the data of \(user) on this machine will be WIPED for good"
        return """
            lockwipe: warning: \(what) in \(RelativeTime.format(seconds: inSeconds)) (at \(at)) \
            because this machine has not reached the policy server for too long. \
            Connect this machine to the network; `lockwipectl check-in --user \(user)` checks in now.
            """
    }
}
