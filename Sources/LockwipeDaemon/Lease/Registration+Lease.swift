import LockwipeBase
import LockwipeCore
import Logging

/// Offline leases (`OfflineLease`): granted by a helpdesk's offline code or by the policy
/// server, capped by `[offline_codes] max_lease_days`, each grant, refusal and end a history
/// event and a journal entry of its own (`lease-granted` / `leaseGranted`, `lease-refused` /
/// `leaseRefused`, `lease-ended` / `leaseEnded`).
extension Registration {
    /// Grants the registration whose turn this is an offline lease until `until` (wall-clock
    /// seconds), replacing any lease it had: until then the offline policy neither locks
    /// nor wipes it. `source` and `reference` say what granted it (`.offlineCode` and the
    /// challenge it answered, or `.server` and the server's URL); `requester`, in words, who
    /// asked (`"alice (uid 1000)"`, `"the helpdesk's code entered by root"`, `"the policy
    /// server"`); a request on the control socket also records its peer, as every event does.
    ///
    /// A lease that ends more than `max_lease_days` from now, or has already ended, is
    /// refused: `ManagerError.invalidParameter("until", ...)` in the asker's words, with a
    /// `lease-refused` event and journal entry; nothing else changes. A registration whose
    /// wipe is committed cannot be leased (`ManagerError.wrongState`).
    ///
    /// The lease and its `lease-granted` event are written in one transaction; the journal
    /// entry follows it. The caller reschedules after its turn (`reschedule()`), as every
    /// change of what is due does; `grantLease(user:...)` does both.
    @discardableResult
    nonisolated(nonsending) func grantLease(
        until: Int64, source: OfflineLease.Source, reference: String, requester: String, in turn: borrowing RegistrationTurn
    ) async throws -> OfflineLease {
        let r = turn.record
        let now = context.clock.now().wall
        let untilText = Timestamp.iso(until)
        let maxDays = context.configuration.offlineCodes.maxLeaseDays
        if let refusal = OfflineLease.refusal(until: until, now: now, maxDays: maxDays, untilText: untilText) {
            await recordRefusal(in: turn, until: until, source: source, reference: reference, requester: requester, refusal, at: now)
            throw ManagerError.invalidParameter("until", reason: "offline lease for \(r.user) refused: \(refusal)")
        }
        guard !r.state.isWipeCommitted else {
            throw ManagerError.wrongState(
                user: r.user, current: r.state, reason: "the wipe of \(r.user) is committed (\(r.state.rawValue)); a lease cannot hold it off, nothing was granted")
        }
        let lease = OfflineLease(until: until, grantedAt: now, source: source, reference: reference)
        let text = "\(lease.describe(untilText: untilText)), asked by \(requester)"
        let granted: RegistrationRecord?
        do {
            granted = try await context.store.grantLease(
                lease, turn.held, event: context.event(r.user, .leaseGranted, RegistrationContext.leaseTrigger(source), text, at: now))
        } catch {
            throw context.stateFailure(r.user, "the offline lease", error)
        }
        guard let granted else { throw ManagerError.noSuchRegistration(r.user) }
        var meta = context.leaseFields(r, lease, requester: requester, id: .leaseGranted)
        meta["lease_granted_at"] = .string(Timestamp.iso(now))
        context.logger.notice("\(r.user): \(text); the offline policy neither locks nor wipes before it ends", metadata: meta)
        try turn.committed(granted)
        return lease
    }

    /// A refused lease in the history and the journal. Not recording it does not change
    /// the refusal (the journal still has it).
    nonisolated(nonsending) func recordRefusal(
        in turn: borrowing RegistrationTurn, until: Int64, source: OfflineLease.Source, reference: String, requester: String, _ refusal: String, at now: Int64
    ) async {
        let r = turn.record
        let by = source == .server ? "the policy server (\(reference))" : "an offline code (challenge \(reference))"
        let text = "offline lease from \(by), asked by \(requester), refused: \(refusal)"
        let e = context.event(r.user, .leaseRefused, RegistrationContext.leaseTrigger(source), text, at: now)
        do {
            if source == .server {
                // The server asks again at every check-in: recorded (and logged) once.
                guard try await context.store.refuseServerLease(turn.held, until: until, reason: text, event: e) else { return }
            } else {
                try await context.store.append(e)
            }
        } catch {
            context.stateNotice("the refused offline lease is not in the history of \(r.user)", user: r.user, error)
        }
        let refused = OfflineLease(until: until, grantedAt: now, source: source, reference: reference)
        context.logger.warning("\(r.user): \(text)", metadata: context.leaseFields(r, refused, requester: requester, id: .leaseRefused))
    }

    /// The `offlineLease` of a settings answer (lockwipe protocol), applied in the turn of
    /// the registration whose contact it came with: granted unless it is the lease in force
    /// already, refused past `max_lease_days` (once, however often the server asks); an
    /// answer without one keeps the lease in force and ends a refusal shown in status.
    /// Returns what happened, for the check-in's result; nil when nothing changed.
    nonisolated(nonsending) func applyServerLease(_ until: Int64?, in turn: borrowing RegistrationTurn) async -> String? {
        let r = turn.record
        guard let until else {
            if r.leaseRefused != nil {
                do { try await context.store.clearLeaseRefusal(turn.held) } catch {
                    context.stateNotice("the end of a refused lease of \(r.user) is not recorded", user: r.user, error)
                }
            }
            return nil
        }
        if let lease = r.lease, lease.source == .server, lease.until == until { return nil }
        let server = context.configuration.server.url ?? "the policy server"
        do {
            let lease = try await grantLease(until: until, source: .server, reference: server, requester: "the policy server", in: turn)
            return "offline lease until \(Timestamp.iso(lease.until)) granted"
        } catch {
            return "the offline lease the server asked for was refused: \((error as? ManagerError)?.message ?? ErrorWords.of(error))"
        }
    }

    /// Records the end of the lease of `r` (its record with the clock just checkpointed) when
    /// the offline clock has passed it and it is not recorded yet (`lease-ended`, once per
    /// lease: a restart does not repeat it). Run by the evaluation's checkpoint of every
    /// clock, outside the turn (`StateStore.endLease` writes only a lease not yet ended).
    nonisolated(nonsending) func recordLeaseEnd(_ r: RegistrationRecord, at wall: Int64) async {
        guard let lease = r.lease, lease.endsUnrecorded(r.clock) else { return }
        // A lease that ended before the last contact held nothing off: its end is
        // recorded all the same, once, so history says it is over.
        let untilText = Timestamp.iso(lease.until)
        let text = "offline lease until \(untilText) ended (\(lease.describe(untilText: untilText))); the offline policy applies again"
        do {
            guard
                try await context.store.endLease(
                    registration: r.id, until: lease.until, at: wall, event: context.event(r.user, .leaseEnded, RegistrationContext.leaseTrigger(lease.source), text, at: wall))
            else { return }
        } catch {
            context.stateNotice("the end of the offline lease of \(r.user) is not recorded (tried again at the next evaluation)", user: r.user, error)
            return
        }
        context.logger.notice("\(r.user): \(text)", metadata: context.leaseFields(r, lease, requester: nil, id: .leaseEnded))
    }
}
