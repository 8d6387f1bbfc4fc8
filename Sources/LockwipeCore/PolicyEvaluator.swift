/// An action and how long until it is due, counted in offline seconds from now.
public struct ScheduledAction: Sendable, Equatable {
    public var action: Action
    public var inSeconds: Int64

    public init(action: Action, inSeconds: Int64) {
        self.action = action
        self.inSeconds = inSeconds
    }
}

/// What the policy says about one registration at one moment.
public struct Evaluation: Sendable, Equatable {
    /// The action to carry out now, if any. A due wipe wins over a due lock.
    public var due: Action?
    /// The next threshold still ahead, if any.
    public var next: ScheduledAction?

    public init(due: Action?, next: ScheduledAction?) {
        self.due = due
        self.next = next
    }
}

/// The policy arithmetic, and nothing else: no I/O, no clock reads.
public enum PolicyEvaluator {
    /// Evaluates `policy` for a registration in `state` that has been offline `offlineSeconds`.
    ///
    /// Thresholds are inclusive: offline for exactly `offline_days_before_lock` days locks.
    /// A registration whose wipe is committed (pending, running or done) has nothing due
    /// here: a pending wipe is resumed by the daemon, not re-decided by the policy.
    public static func evaluate(policy: Policy, state: RegistrationState, offlineSeconds: Int64) -> Evaluation {
        if state.isWipeCommitted { return Evaluation(due: nil, next: nil) }
        let lockAt = state == .active ? policy.lockAfterSeconds : nil
        let wipeAt = policy.wipeAfterSeconds

        var due: Action?
        if let wipeAt, offlineSeconds >= wipeAt {
            due = .wipe
        } else if let lockAt, offlineSeconds >= lockAt {
            due = .lock
        }

        var next: ScheduledAction?
        if due != .wipe {
            let ahead: [ScheduledAction] = [
                lockAt.flatMap { offlineSeconds < $0 ? ScheduledAction(action: .lock, inSeconds: $0 - offlineSeconds) : nil },
                wipeAt.flatMap { offlineSeconds < $0 ? ScheduledAction(action: .wipe, inSeconds: $0 - offlineSeconds) : nil },
            ].compactMap { $0 }
            next = ahead.min { $0.inSeconds < $1.inSeconds }
        }
        return Evaluation(due: due, next: next)
    }
}
