import LockwipeBase
import LockwipeCore
import Logging

/// Warnings before offline-triggered locks and wipes (`[notify] warn_before`): once per
/// registration and threshold, the journal, the history and the observers (`warnLock`,
/// `warnWipe`, hooks) are told; `status` and the login gate show the warning while it lasts.
/// Which registration is warned when is the Manager's plan (`announceWarnings`).
extension Registration {
    /// Warns of `warning` for `r` (its record as the plan read it), once: recorded first
    /// (`StateStore.markWarned` records it only for the threshold it changes), then told.
    nonisolated(nonsending) func warn(_ r: RegistrationRecord, _ warning: OfflineWarning, offline: Int64, reading: ClockReading) async {
        let (p, source) = context.policy(for: r)
        let dueAt = reading.wall + warning.inSeconds
        let action = warning.action.rawValue
        let text =
            "\(action) due in \(RelativeTime.format(seconds: warning.inSeconds)) (at \(Timestamp.iso(dueAt))): "
            + context.reason(warning.action, offline: offline, policy: p, source: source) + context.leaseNote(r, warning.action, policy: p)
        let kind: EventKind = warning.action == .lock ? .warnLock : .warnWipe
        // Recorded first, and only by the one evaluation that changes the threshold: the
        // warning is given once, and a restart does not give it again.
        do {
            guard
                try await context.store.markWarned(
                    registration: r.id, threshold: warning.threshold, event: context.event(r.user, kind, .offline, text, at: reading.wall))
            else { return }
        } catch {
            context.logger.error(
                "cannot record the warning to \(r.user); it is not given now and is tried again at the next evaluation",
                metadata: ["user": .string(r.user), "error": .string(ErrorWords.of(error)), "message_id": MessageID.actionFailed.metadata])
            return
        }
        // LOCKWIPE_ACTION is warn-lock / warn-wipe (the history's kind): `journalctl
        // LOCKWIPE_ACTION=lock` lists locks that happened, not warnings of them.
        var meta = context.journalFields(r, action: kind.rawValue, trigger: .offline, reason: text, id: .warning)
        meta["due_action"] = .string(action)
        meta["offline_seconds"] = "\(offline)"
        meta["due"] = .string(Timestamp.iso(dueAt))
        meta["due_seconds"] = "\(warning.inSeconds)"
        context.logger.warning("\(r.user): \(text); a check-in with the policy server prevents it", metadata: meta)
        let event = LockWipeEvent(
            user: r.user, uid: r.uid, action: warning.action, reason: text, trigger: .offline, directories: r.directories, dueAt: dueAt)
        // Observers (hooks may take `[hooks] timeout_seconds`) never hold up enforcement;
        // shutdown waits for them (`drainObservers`).
        context.background.post(warning.action == .lock ? .warnLock : .warnWipe, event, to: context.observers)
    }
}
