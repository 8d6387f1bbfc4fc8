/// An action and how long until it is due, counted in offline seconds from now.
public struct ScheduledAction: Sendable, Equatable {
    public var action: Action
    public var inSeconds: Int64
    /// An offline lease moved this threshold: the action is due at the lease's end (a lock,
    /// or a wipe under a policy without a lock), or the policy's lock-to-wipe gap after it.
    public var afterLease: Bool

    public init(action: Action, inSeconds: Int64, afterLease: Bool = false) {
        self.action = action
        self.inSeconds = inSeconds
        self.afterLease = afterLease
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
    ///
    /// `leaseEndsAt`: the offline time at which an offline lease ends
    /// (`OfflineLease.endsAtOffline`), when there is one. Before it nothing is due; the
    /// offline time still counts from the last contact, and the lease moves the thresholds
    /// it covers (`thresholds(policy:leaseEndsAt:)`): the lock comes at the lease's end, and
    /// the wipe no earlier than the policy's lock-to-wipe gap after it, so a vault is never
    /// wiped at a lease's end without having been locked first.
    public static func evaluate(policy: Policy, state: RegistrationState, offlineSeconds: Int64, leaseEndsAt: Int64? = nil) -> Evaluation {
        if state.isWipeCommitted { return Evaluation(due: nil, next: nil) }
        let moved = thresholds(policy: policy, leaseEndsAt: leaseEndsAt)
        let lockAt = state == .active ? moved.lock : nil
        let wipeAt = moved.wipe

        var due: Action?
        if let wipeAt, offlineSeconds >= wipeAt {
            due = .wipe
        } else if let lockAt, offlineSeconds >= lockAt {
            due = .lock
        }

        var next: ScheduledAction?
        if due != .wipe {
            let ahead: [ScheduledAction] = [
                lockAt.flatMap {
                    offlineSeconds < $0 ? ScheduledAction(action: .lock, inSeconds: $0 - offlineSeconds, afterLease: $0 != policy.lockAfterSeconds) : nil
                },
                wipeAt.flatMap {
                    offlineSeconds < $0 ? ScheduledAction(action: .wipe, inSeconds: $0 - offlineSeconds, afterLease: $0 != policy.wipeAfterSeconds) : nil
                },
            ].compactMap { $0 }
            next = ahead.min { $0.inSeconds < $1.inSeconds }
        }
        return Evaluation(due: due, next: next)
    }

    /// The offline times at which `policy` locks and wipes once a lease that ends at offline
    /// time `leaseEndsAt` is counted (nil: never). A lease that ends before a threshold
    /// leaves it alone (it ended before it mattered); one that ends after it moves it:
    /// - the lock to the lease's end;
    /// - the wipe by as much as the lock moved (the policy's lock-to-wipe gap after the
    ///   lease's end), so the vault is locked first and its user has the gap the policy
    ///   promises between the two; under a policy that never locks, to the lease's end.
    public static func thresholds(policy: Policy, leaseEndsAt: Int64?) -> (lock: Int64?, wipe: Int64?) {
        let lock = policy.lockAfterSeconds
        let wipe = policy.wipeAfterSeconds
        guard let end = leaseEndsAt, end > 0 else { return (lock, wipe) }
        guard let lock else { return (nil, wipe.map { max($0, end) }) }
        let shift = max(0, end - lock)
        return (lock + shift, wipe.map { $0 + shift })
    }
}
