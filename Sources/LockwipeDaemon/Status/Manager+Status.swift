import LockwipeBase
import LockwipeCore

/// What the daemon reports: `status` (the registrations a caller may see, with their
/// clocks, next actions, key and check-in state, and the warnings an operator must read),
/// `history`, the policy in force, and the one-line summary for systemd's STATUS=.
extension Manager {

    func outlooks(_ reading: ClockReading) async throws -> [Outlook] {
        try await context.store.registrations().map { context.outlook(registry.inForce($0), reading) }
    }

    public func statusLine() async -> String {
        if let damage = context.store.damage { return "DEGRADED, nothing is enforced: \(damage)" }
        do {
            let warnBefore = context.configuration.warnBeforeSeconds
            return StatusSummary.line(try await outlooks(context.clock.now()).map { $0.summaryEntry(warnBefore: warnBefore) })
        } catch {
            return "the state database cannot be read: \(ErrorWords.of(error))"
        }
    }

    /// What `status` shows `caller` (`user`: that registration only), in the domain's values:
    /// `Control/` builds the report (`StatusReport+Snapshot.swift`).
    func statusSnapshot(for caller: Caller, user: String?) async throws -> StatusSnapshot {
        let reading = context.clock.now()
        let everyone = try await context.store.registrations().map(registry.inForce)
        var list = everyone.filter {
            caller.isAdmin || Ownership.isOwn(registrationUID: $0.uid, callerUID: caller.credentials.uid)
        }
        if let user {
            list = list.filter { $0.user == user }
            if list.isEmpty { throw ManagerError.noSuchRegistration(user) }
        }
        let server = context.configuration.server
        let connections = server.sapIdentity == nil ? [:] : try await context.store.sapConnections()
        var entries: [StatusSnapshot.Entry] = []
        // Never waits for the TPM: during the start-up pass the key may still be opening.
        let machineKey = context.keys.machineKeyStateNow
        let outboxes = await outboxFacts(list)
        for r in list {
            let (p, source) = context.policy(for: r)
            let evaluated = context.outlook(r, reading, policy: p)
            let lock = PolicyLockLift.Lock(state: r.state, trigger: r.lockTrigger, liftable: r.lockLiftable)
            let key = await context.keyStatus(r)
            entries.append(
                StatusSnapshot.Entry(
                    record: r, policy: p, policySource: source, offline: evaluated.offline, next: evaluated.next,
                    warning: evaluated.warning(warnBefore: context.configuration.warnBeforeSeconds),
                    nextCheckIn: server.isConfigured && !r.state.isWipeCommitted ? checkIns.nextCheckIn(of: r.id, wall: reading.wall) : nil,
                    logoutLockAt: logout.lockTime(r.id, wall: reading.wall),
                    runningWipe: registry.byID[r.id]?.runningWipe, connection: connections[r.id], key: key,
                    passcodePolicy: context.passcodePolicy(for: r).policy,
                    lockWaitsFor: PolicyLockLift.waitingFor(
                        lock, user: r.user, setting: context.configuration.liftAfterContact, serverConfigured: server.isConfigured)
                        ?? UnlockRule.waitingFor(user: r.user, protection: r.protection, state: r.state, trigger: r.lockTrigger),
                    atRest: r.state.isWipeCommitted ? nil : context.atRest(r, key: key), outbox: await outboxStatus(r, outboxes)))
        }
        let machine = context.machinePolicy(everyone)
        return StatusSnapshot(
            reading: reading, server: server, registrations: entries, policy: machine.policy, policySource: machine.source,
            missingAdminGroup: caller.adminGroupExists ? nil : context.configuration.adminGroup,
            logoutWarnings: logout.warnings(users: list.filter { $0.state == .active && context.passcodePolicy(for: $0).policy.lockTimeout > 0 }.map(\.user)),
            rejectedReload: rejectedReload, records: list, warnBefore: Int64(context.configuration.warnBeforeSeconds),
            machineKey: machineKey.map { .init(sealing: $0.sealing, problem: $0.problem, recoveryKey: context.keys.recoveryKey?.identifier) })
    }

    /// What `status` reads of the outboxes once for all registrations: the sealed ones kept
    /// and the last seal and upload of each; nil without `[outbox]` and nothing kept. A
    /// read that fails leaves its part out (said in the journal).
    private func outboxFacts(_ list: [RegistrationRecord]) async -> (kept: [RegistrationID: [SealedOutboxes.Kept]], times: [RegistrationID: (sealed: Int64?, uploaded: Int64?)])? {
        let outboxes = SealedOutboxes(stateDirectory: context.paths.stateDirectory)
        var kept: [SealedOutboxes.Kept] = []
        do {
            kept = try await BlockingPool.run { try outboxes.all() }
        } catch {
            context.stateNotice("status: the sealed outboxes kept on the machine are left out", error)
        }
        guard context.configuration.outbox.directory != nil || !kept.isEmpty || list.contains(where: { $0.outbox != nil }) else { return nil }
        var times: [RegistrationID: (sealed: Int64?, uploaded: Int64?)] = [:]
        do {
            times = try await context.store.lastOutboxEvents()
        } catch {
            context.stateNotice("status: when each outbox was last sealed and uploaded is left out", error)
        }
        return (Dictionary(grouping: kept, by: \.registration), times)
    }

    private func outboxStatus(
        _ r: RegistrationRecord, _ facts: (kept: [RegistrationID: [SealedOutboxes.Kept]], times: [RegistrationID: (sealed: Int64?, uploaded: Int64?)])?
    ) async -> OutboxStatus? {
        guard let facts, r.outbox != nil || context.configuration.outbox.directory != nil || facts.kept[r.id] != nil else { return nil }
        let (pending, problem) = await context.pendingOutbox(r)
        return OutboxStatus(
            directory: r.outbox ?? context.configuration.outbox.directory, pending: pending, pendingProblem: problem, kept: facts.kept[r.id] ?? [],
            lastSealed: facts.times[r.id]?.sealed, lastUploaded: facts.times[r.id]?.uploaded)
    }

    /// The history of `user` (nil: everyone), each event with the uid and registration it
    /// belongs to; with an `owner`, only the events of that uid's registrations
    /// (`Ownership.ownsRecord`), never those of another account that had the name. Who may
    /// ask for which is decided before (`WhoMay`, `.readHistory`).
    func historyPage(user: String?, owner: UInt32?, limit: Int, since: Int64? = nil) async throws -> HistoryPage {
        // 0 means none, as journalctl's -n 0; a negative count means nothing.
        guard limit >= 0 else { throw ManagerError.invalidParameter("limit", reason: "the number of events must be 0 or more, not \(limit)") }
        // At most HistoryRetention.maxReplyBytes, whatever is stored (issue 40, finding 5).
        let (events, truncated) = try await context.store.history(
            user: user, limit: min(limit, 10_000), owner: owner, since: since, maxBytes: HistoryRetention.maxReplyBytes)
        let certificates = try await context.store.certificates(ids: events.compactMap(\.certificate))
        return HistoryPage(events: events, certificates: certificates, truncated: truncated)
    }

    /// The machine's policy: the newest valid policy the server sent (normally the same for
    /// every registration), else the local one. Each registration shows its own too.
    func policyInForce() async throws -> (policy: Policy, source: String) { context.machinePolicy(try await context.store.registrations()) }

    /// The newest certificate of `user` (or the one with `id`); with an `owner`, only one
    /// made for that uid's registration (as `history`), so a new account with an old name
    /// finds none. Who may ask is decided before (`WhoMay`, `.readCertificate`).
    public func certificate(user: String, id: String?, owner: UInt32?) async throws -> SanitizationCertificate {
        guard let certificate = try await context.store.certificate(user: user, id: id, owner: owner) else {
            throw ManagerError.noSuchCertificate(user: user, id: id)
        }
        return certificate
    }

    // MARK: Metrics

    /// The metrics file's reading: what `status` reports, from the same clock arithmetic and
    /// policy evaluation (`outlook`), as numbers.
    func metricsSnapshot() async throws -> MetricsSnapshot {
        let reading = context.clock.now()
        if context.store.damage != nil {
            return MetricsSnapshot(
                version: LockwipeVersion.current, writtenAt: reading.wall, degraded: true, wipesComplete: 0, wipesIncomplete: 0, registrations: [])
        }
        let list = try await context.store.registrations()
        let wipes = try await context.store.wipeCounts()
        let machineKey = context.keys.machineKeyStateNow
        var atRest: [RegistrationID: AtRest] = [:]
        for r in list where !r.state.isWipeCommitted {
            atRest[r.id] = context.atRest(r, key: await context.keyStatus(r))
        }
        var snapshot = MetricsSnapshot(
            version: LockwipeVersion.current, writtenAt: reading.wall, degraded: false, wipesComplete: wipes.complete, wipesIncomplete: wipes.incomplete,
            registrations: list.map { r in
                let o = context.outlook(r, reading)
                var m = MetricsSnapshot.Registration(
                    user: r.user, uid: r.uid, id: r.id.rawValue, state: r.state, protection: r.protection, blocked: r.blocked, offlineSeconds: o.offline,
                    lastContact: r.clock.lastContact, next: o.next, failedCheckIns: r.server.failures, rejectedStatus: r.server.rejectedStatus)
                if let stored = r.lease, stored.remaining(r.clock, offline: o.offline) > 0 {
                    m.leaseEnd = stored.until
                    m.leaseSource = stored.source.rawValue
                }
                m.atRest = atRest[r.id]
                return m
            })
        snapshot.machineKeyUnavailable = machineKey?.problem != nil
        return snapshot
    }
}
