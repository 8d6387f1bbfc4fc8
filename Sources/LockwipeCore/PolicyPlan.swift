/// What the offline policy will do to one registration, step by step, as the daemon plans
/// it (issue 42: an evaluator could only see it by faking the clock): the thresholds of
/// `PolicyEvaluator.thresholds` (a lease moving them), the lease's end, and the warnings of
/// `[notify] warn_before` (`WarningWindow`: only the next action is warned about, so a
/// wipe's warning comes no earlier than the lock), all at offline times. Pure:
/// `lockwipectl policy --plan` reads the offline time from `status` and says when, and
/// "what if offline N more days" is `state(after:)`.
public enum PolicyPlan {
    public enum Step: String, Sendable, Equatable, CaseIterable {
        case leaseEnds = "lease-ends"
        case warnLock = "warn-lock"
        case lock
        case warnWipe = "warn-wipe"
        case wipe
    }

    public struct Planned: Sendable, Equatable {
        public var step: Step
        /// The offline time (seconds since the last contact) it comes at.
        public var atOffline: Int64

        public init(_ step: Step, at atOffline: Int64) {
            self.step = step
            self.atOffline = atOffline
        }
    }

    /// Every step ahead of a registration in `state`, in the order they come, whether or
    /// not they are past at its offline time now (the caller says which are). A wipe
    /// committed has none; a registration locked already has no lock nor its warning.
    public static func steps(policy: Policy, state: RegistrationState, leaseEndsAt: Int64?, warnBefore: Int64) -> [Planned] {
        if state.isWipeCommitted { return [] }
        let moved = PolicyEvaluator.thresholds(policy: policy, leaseEndsAt: leaseEndsAt)
        var steps: [Planned] = []
        if let end = leaseEndsAt, end > 0 { steps.append(Planned(.leaseEnds, at: end)) }
        let lock = state == .active ? moved.lock : nil
        if let lock {
            if warnBefore > 0 { steps.append(Planned(.warnLock, at: max(0, lock - warnBefore))) }
            steps.append(Planned(.lock, at: lock))
        }
        if let wipe = moved.wipe {
            if warnBefore > 0 { steps.append(Planned(.warnWipe, at: max(lock ?? 0, wipe - warnBefore))) }
            steps.append(Planned(.wipe, at: wipe))
        }
        let order = Dictionary(uniqueKeysWithValues: Step.allCases.enumerated().map { ($1, $0) })
        return steps.sorted { ($0.atOffline, order[$0.step] ?? 0) < ($1.atOffline, order[$1.step] ?? 0) }
    }

    /// The state a registration in `state` would be in at offline time `offline` if it
    /// stays offline and nothing else happens: the daemon's own evaluation then.
    public static func state(after offline: Int64, policy: Policy, state: RegistrationState, leaseEndsAt: Int64?) -> RegistrationState {
        switch PolicyEvaluator.evaluate(policy: policy, state: state, offlineSeconds: offline, leaseEndsAt: leaseEndsAt).due {
        case .wipe?: return .wiped
        case .lock?: return .locked
        case nil: return state
        }
    }
}
