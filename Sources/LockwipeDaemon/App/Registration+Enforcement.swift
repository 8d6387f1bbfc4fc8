import LockwipeCore

/// The offline policy carried out on one registration: what is due is decided again in its
/// turn (a check-in may have answered while the evaluation waited for it), then done.
extension Registration {
    /// The action due for the registration whose turn this is, right now, if any, with its reason.
    func dueNow(in turn: borrowing RegistrationTurn) -> (Action, String)? {
        let r = turn.record
        guard !r.state.isWipeCommitted else { return nil }
        let offline = context.offlineNow(r, context.clock.now())
        let (p, source) = context.policy(for: r)
        guard let action = PolicyEvaluator.evaluate(policy: p, state: r.state, offlineSeconds: offline, leaseEndsAt: context.leaseEndsAt(r)).due else { return nil }
        return (action, context.reason(action, offline: offline, policy: p, source: source) + context.leaseNote(r, action, policy: p))
    }

    /// Carries out `action` (the evaluation found it due) when it is still due now; a
    /// failure is in the journal (and in status, lock-failed or wipe-pending), and what is
    /// still due is retried at the next evaluation.
    nonisolated(nonsending) func enforceOffline(_ action: Action, in turn: borrowing RegistrationTurn) async {
        guard let (current, reason) = dueNow(in: turn), current == action else { return }
        do {
            switch action {
            case .lock: _ = try await lock(in: turn, trigger: .offline, reason: reason)
            case .wipe: _ = try await wipe(in: turn, trigger: .offline, reason: reason, requester: context.offlineRequester(turn.record))
            }
        } catch {
            _ = context.failure(user, "offline \(action.rawValue) (retried at the next evaluation)", error)
        }
    }
}
