import LockwipeBase
import LockwipeCore
import LockwipeProtocol
import Logging

/// Offline leases (`OfflineLease`): granted by a helpdesk's offline code or by the policy
/// server, capped by `[offline_codes] max_lease_days`, each grant, refusal and end a history
/// event and a journal entry of its own (`lease-granted` / `leaseGranted`, `lease-refused` /
/// `leaseRefused`, `lease-ended` / `leaseEnded`).
extension Manager {
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
    func grantLease(
        until: Int64, source: OfflineLease.Source, reference: String, requester: String, in turn: borrowing RegistrationTurn
    ) async throws -> OfflineLease {
        let r = turn.record
        let now = clock.now().wall
        let untilText = Timestamp.iso(until)
        let maxDays = configuration.offlineCodes.maxLeaseDays
        if let refusal = OfflineLease.refusal(until: until, now: now, maxDays: maxDays, untilText: untilText) {
            await recordRefusal(r, until: until, source: source, reference: reference, requester: requester, refusal, at: now)
            throw ManagerError.invalidParameter("until", reason: "offline lease for \(r.user) refused: \(refusal)")
        }
        guard !r.state.isWipeCommitted else {
            throw ManagerError.wrongState(
                user: r.user, current: r.state, reason: "the wipe of \(r.user) is committed (\(r.state.rawValue)); a lease cannot hold it off, nothing was granted")
        }
        let lease = OfflineLease(until: until, grantedAt: now, source: source, reference: reference)
        let text = "\(lease.describe(untilText: untilText)), asked by \(requester)"
        let granted: Bool
        do {
            granted = try await store.grantLease(lease, registration: r.id, event: event(r.user, .leaseGranted, Self.leaseTrigger(source), text, at: now))
        } catch {
            throw stateFailure(r.user, "the offline lease", error)
        }
        guard granted else { throw ManagerError.noSuchRegistration(r.user) }
        var meta = leaseFields(r, lease, requester: requester, id: .leaseGranted)
        meta["lease_granted_at"] = .string(Timestamp.iso(now))
        logger.notice("\(r.user): \(text); the offline policy neither locks nor wipes before it ends", metadata: meta)
        try await turn.refresh()
        return lease
    }

    /// `grantLease(until:...in:)` in the registration's own turn, then the plan made again.
    @discardableResult
    public func grantLease(user: String, until: Int64, source: OfflineLease.Source, reference: String, requester: String) async throws -> OfflineLease {
        let lease = try await registration(named: user).withTurn { turn in
            try await grantLease(until: until, source: source, reference: reference, requester: requester, in: turn)
        }
        await reschedule()
        return lease
    }

    /// A refused lease in the history and the journal. Not recording it does not change
    /// the refusal (the journal still has it).
    func recordRefusal(
        _ r: RegistrationRecord, until: Int64, source: OfflineLease.Source, reference: String, requester: String, _ refusal: String, at now: Int64
    ) async {
        let by = source == .server ? "the policy server (\(reference))" : "an offline code (challenge \(reference))"
        let text = "offline lease from \(by), asked by \(requester), refused: \(refusal)"
        let e = event(r.user, .leaseRefused, Self.leaseTrigger(source), text, at: now)
        do {
            if source == .server {
                // The server asks again at every check-in: recorded (and logged) once.
                guard try await store.refuseServerLease(registration: r.id, until: until, reason: text, event: e) else { return }
            } else {
                try await store.append(e)
            }
        } catch {
            stateNotice("the refused offline lease is not in the history of \(r.user)", user: r.user, error)
        }
        let refused = OfflineLease(until: until, grantedAt: now, source: source, reference: reference)
        logger.warning("\(r.user): \(text)", metadata: leaseFields(r, refused, requester: requester, id: .leaseRefused))
    }

    /// Records the end of every lease whose end the offline clock has passed and that is
    /// not recorded yet (`lease-ended`, once per lease: a restart does not repeat it).
    func recordEndedLeases(_ records: [RegistrationRecord], at wall: Int64) async {
        for r in records {
            guard let lease = r.lease, lease.endedAt == nil, !lease.inForce(r.clock) else { continue }
            // A lease that ended before the last contact held nothing off: its end is
            // recorded all the same, once, so history says it is over.
            let untilText = Timestamp.iso(lease.until)
            let text = "offline lease until \(untilText) ended (\(lease.describe(untilText: untilText))); the offline policy applies again"
            do {
                guard
                    try await store.endLease(
                        registration: r.id, until: lease.until, at: wall, event: event(r.user, .leaseEnded, Self.leaseTrigger(lease.source), text, at: wall))
                else { continue }
            } catch {
                stateNotice("the end of the offline lease of \(r.user) is not recorded (tried again at the next evaluation)", user: r.user, error)
                continue
            }
            logger.notice("\(r.user): \(text)", metadata: leaseFields(r, lease, requester: nil, id: .leaseEnded))
        }
    }

    /// The `offlineLease` of a settings answer (lockwipe protocol), applied in the turn of
    /// the registration whose contact it came with: granted unless it is the lease in force
    /// already, refused past `max_lease_days` (once, however often the server asks); an
    /// answer without one keeps the lease in force and ends a refusal shown in status.
    /// Returns what happened, for the check-in's result; nil when nothing changed.
    func applyServerLease(_ until: Int64?, in turn: borrowing RegistrationTurn) async -> String? {
        let r = turn.record
        guard let until else {
            if r.leaseRefused != nil {
                do { try await store.clearLeaseRefusal(registration: r.id) } catch { stateNotice("the end of a refused lease of \(r.user) is not recorded", user: r.user, error) }
            }
            return nil
        }
        if let lease = r.lease, lease.source == .server, lease.until == until { return nil }
        let server = configuration.server.url ?? "the policy server"
        do {
            let lease = try await grantLease(until: until, source: .server, reference: server, requester: "the policy server", in: turn)
            return "offline lease until \(Timestamp.iso(lease.until)) granted"
        } catch {
            return "the offline lease the server asked for was refused: \((error as? ManagerError)?.message ?? ErrorWords.of(error))"
        }
    }

    static func leaseTrigger(_ source: OfflineLease.Source) -> Trigger? {
        source == .server ? .server : nil
    }

    func leaseFields(_ r: RegistrationRecord, _ lease: OfflineLease, requester: String?, id: MessageID) -> Logger.Metadata {
        var meta: Logger.Metadata = [
            "message_id": id.metadata, "user": .string(r.user), "uid": "\(r.uid)", "registration_id": .string(r.id),
            "lease_until": .string(Timestamp.iso(lease.until)), "lease_until_seconds": "\(lease.until)",
            "lease_source": .string(lease.source.rawValue), "lease_reference": .string(lease.reference),
            "offline_seconds": "\(r.clock.offlineSeconds)",
        ]
        if let requester { meta["lease_requester"] = .string(requester) }
        return meta
    }

    /// The offline time at which the lease of `r` ends, for `PolicyEvaluator.evaluate(leaseEndsAt:)`.
    func leaseEndsAt(_ r: RegistrationRecord) -> Int64? {
        r.lease?.endsAtOffline(r.clock)
    }

    /// What a lease did to an action now due, for its reason: nothing when the lease ended
    /// before the policy's threshold (or there is none).
    func leaseNote(_ r: RegistrationRecord, _ action: Action, policy p: Policy) -> String {
        guard let lease = r.lease else { return "" }
        let policyAt = action == .lock ? p.lockAfterSeconds : p.wipeAfterSeconds
        let moved = PolicyEvaluator.thresholds(policy: p, leaseEndsAt: leaseEndsAt(r))
        guard let policyAt, (action == .lock ? moved.lock : moved.wipe) != policyAt else { return "" }
        let untilText = Timestamp.iso(lease.until)
        return action == .lock
            ? "; held off until the end of the \(lease.describe(untilText: untilText))"
            : "; held off by the \(lease.describe(untilText: untilText)) until the policy's lock-to-wipe gap after its end"
    }

    /// The lease of `r` for `status`, as of offline time `offline`.
    func leaseInfo(_ r: RegistrationRecord, offline: Int64) -> LeaseInfo? {
        guard let lease = r.lease else { return nil }
        let left = max(0, lease.endsAtOffline(r.clock) - offline)
        return LeaseInfo(
            until: Timestamp.iso(lease.until), grantedAt: Timestamp.iso(lease.grantedAt), source: lease.source.rawValue, reference: lease.reference,
            inForce: left > 0, remainingSeconds: left, endedAt: lease.endedAt.map(Timestamp.iso))
    }

    /// The lease a wipe's certificate names: the one granted before the wipe was requested
    /// (at wall time `requestedAt`), in force then or ended; nil when none was.
    func certificateLease(_ r: RegistrationRecord, requestedAt: Int64) -> SanitizationCertificate.Lease? {
        guard let lease = r.lease, lease.grantedAt <= requestedAt else { return nil }
        let ended = lease.endedAt.map { $0 <= requestedAt } ?? false
        return SanitizationCertificate.Lease(
            until: Timestamp.iso(lease.until), grantedAt: Timestamp.iso(lease.grantedAt), source: lease.source.rawValue, reference: lease.reference,
            inForce: !ended && lease.until > requestedAt)
    }
}
