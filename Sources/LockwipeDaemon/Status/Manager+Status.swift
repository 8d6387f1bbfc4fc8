import Foundation
import LockwipeBase
import LockwipeCore
import LockwipeProtocol
import NIOCore

/// What the daemon reports: `status` (the registrations a caller may see, with their
/// clocks, next actions, key and check-in state, and the warnings an operator must read),
/// `history`, the policy in force, and the one-line summary for systemd's STATUS=.
extension Manager {

    func outlooks(_ reading: ClockReading) async throws -> [Outlook] {
        try await context.store.registrations().map { context.outlook(inForce($0), reading) }
    }

    func summaryEntries(_ outlooks: [Outlook]) -> [StatusSummary.Entry] {
        outlooks.map { o in
            let warned = if case .warn = warningDecision(o) { true } else { false }
            return StatusSummary.Entry(user: o.record.user, state: o.record.state, next: o.next, warned: warned)
        }
    }

    public func statusLine() async -> String {
        if let damage = context.store.damage { return "DEGRADED, nothing is enforced: \(damage)" }
        do {
            return StatusSummary.line(summaryEntries(try await outlooks(context.clock.now())))
        } catch {
            return "the state database cannot be read: \(ErrorWords.of(error))"
        }
    }

    public func status(for caller: Caller, user: String?) async throws -> StatusReport {
        let reading = context.clock.now()
        let everyone = try await context.store.registrations().map(inForce)
        var list = everyone.filter {
            caller.isAdmin || Ownership.isOwn(registrationUID: $0.uid, callerUID: caller.credentials.uid)
        }
        if let user {
            list = list.filter { $0.user == user }
            if list.isEmpty { throw ManagerError.noSuchRegistration(user) }
        }
        let server = context.configuration.server
        let connections = server.sapIdentity == nil ? [:] : try await context.store.sapConnections()
        var infos: [RegistrationInfo] = []
        for r in list {
            let (p, source) = context.policy(for: r)
            let evaluated = context.outlook(r, reading, policy: p)
            let (offline, next) = (evaluated.offline, evaluated.next)
            var info = RegistrationInfo(
                user: r.user, uid: r.uid, state: r.state, protection: r.protection, directories: r.directories,
                blocked: r.blocked, lastContact: Timestamp.iso(r.clock.lastContact), offlineSeconds: offline,
                nextAction: next.map { NextAction(action: $0.action, at: Timestamp.iso(reading.wall + $0.inSeconds)) },
                lockTrigger: r.state.isLockCommitted ? r.lockTrigger : nil, wipe: r.lastWipe,
                wipeProgress: registry.byID[r.id]?.runningWipe?.info())
            info.policy = PolicyInfo(policy: p, source: source)
            info.policySource = source
            info.blockedCode = r.blocked ? r.server.blockedCode : nil
            info.lastAttempt = r.server.lastAttempt.map(Timestamp.iso)
            if let status = r.server.rejectedStatus {
                info.rejected = RejectionInfo(
                    httpStatus: status, text: r.server.rejectedText ?? "", since: r.server.rejectedSince.map(Timestamp.iso),
                    check: CheckInDecision.rejectionAdvice)
            }
            info.lastError = r.server.lastAttempt == nil ? nil : r.server.lastError
            info.nextCheckIn = nextCheckInTime(r, wall: reading.wall).map(Timestamp.iso)
            info.credentials = r.server.credentials
            if let c = connections[r.id] {
                info.sapConnection = c.id
                info.sapConnectionProblem = c.problem
                if let at = c.resetAt {
                    info.sapReset = ServerResetInfo(
                        at: Timestamp.iso(at), connection: c.resetConnection, deleteResult: c.resetResult ?? "pending",
                        enrol: ServerReset.enrolCommands(user: r.user, oauth: server.oauth != nil))
                }
            }
            info.passcodePolicy = r.server.settings?.passcode
            if ServerPolicyAbsence.isAbsent(protocol: server.serverProtocol, r.server.settings) { info.serverPolicyNote = ServerPolicyAbsence.note }
            if server.serverProtocol == .sapMobileServices { info.sapPasswordPolicyLockTimeout = r.server.settings?.sapLockTimeout }
            info.sharedDevice = r.server.settings?.sharedDevice
            info.logoutLockAt = logoutLockTime(r.id, wall: reading.wall)
            info.vaultError = r.vaultError
            info.registrationId = r.id.rawValue
            info.lease = leaseInfo(r, offline: offline)
            let lock = PolicyLockLift.Lock(state: r.state, trigger: r.lockTrigger, liftable: r.lockLiftable)
            if let waits = PolicyLockLift.waitingFor(lock, user: r.user, setting: context.configuration.liftAfterContact, serverConfigured: server.isConfigured) {
                info.lockLiftable = r.lockLiftable
                info.lockWaitsFor = waits
            }
            if case .warn(let w) = warningDecision(evaluated) {
                info.warning = WarningInfo(action: w.action, at: Timestamp.iso(reading.wall + w.inSeconds), inSeconds: w.inSeconds)
            }
            await vaultStatus(r, into: &info)
            infos.append(info)
        }
        let warnings = StatusWarnings.list(
            list, server: server, adminGroup: caller.adminGroupExists ? nil : context.configuration.adminGroup, logout: logoutLockWarnings(list),
            connectionProblems: infos.compactMap { info in info.sapConnectionProblem.map { (info.user, $0) } }, rejectedReload: rejectedReload,
            serverResets: infos.compactMap { info in info.sapReset.map { (info.user, $0) } },
            policyNotes: infos.compactMap { info in info.serverPolicyNote.map { (info.user, $0) } })
        let leaseRefusals = list.compactMap { r in r.leaseRefused.map { "\(r.user): \($0)" } }
        return StatusReport(
            version: LockwipeVersion.current, server: ServerInfo(configured: server.isConfigured, url: server.url, insecureHttp: server.usesInsecureHTTP),
            policy: policyInfo(everyone), registrations: infos, warnings: warnings + leaseRefusals)
    }

    /// The history of `user` (nil: everyone), each event with the uid and registration it
    /// belongs to; with an `owner`, only the events of that uid's registrations
    /// (`Ownership.ownsRecord`), never those of another account that had the name. Who may
    /// ask for which is decided before (`WhoMay`, `.readHistory`).
    public func history(user: String?, owner: UInt32?, limit: Int, since: Int64? = nil) async throws -> HistoryReply {
        // 0 means none, as journalctl's -n 0; a negative count means nothing.
        guard limit >= 0 else { throw ManagerError.invalidParameter("limit", reason: "the number of events must be 0 or more, not \(limit)") }
        // At most HistoryRetention.maxReplyBytes, whatever is stored (issue 40, finding 5).
        let (events, truncated) = try await context.store.history(
            user: user, limit: min(limit, 10_000), owner: owner, since: since, maxBytes: HistoryRetention.maxReplyBytes)
        let certificates = try await context.store.certificates(ids: events.compactMap(\.certificate))
        return HistoryReply(
            events: events.map {
                let run = $0.repeats.flatMap { $0 > 1 ? $0 : nil }
                return HistoryEvent(
                    time: Timestamp.iso($0.time), user: $0.user, kind: $0.kind.rawValue, trigger: $0.trigger, detail: $0.detail,
                    certificate: $0.certificate.flatMap { certificates[$0] }, uid: $0.uid, registrationId: $0.registrationID?.rawValue,
                    requester: $0.requester.map { HistoryEvent.Requester(uid: $0.uid, pid: $0.pid, comm: $0.comm) }, repeats: run,
                    lastTime: run == nil ? nil : $0.lastTime.map(Timestamp.iso))
            }, truncated: truncated ? true : nil)
    }

    /// The machine's policy: the newest valid policy the server sent (normally the same for
    /// every registration), else the local one. Each registration shows its own too.
    public func policyInfo() async throws -> PolicyInfo { policyInfo(try await context.store.registrations()) }

    private func policyInfo(_ list: [RegistrationRecord]) -> PolicyInfo {
        if context.configuration.server.isConfigured,
            let newest = list.filter({ $0.server.policy != nil }).max(by: { ($0.server.policyReceivedAt ?? 0) < ($1.server.policyReceivedAt ?? 0) }),
            let p = newest.server.policy
        {
            return PolicyInfo(policy: p, source: "server")
        }
        return PolicyInfo(policy: context.configuration.policy, source: "local")
    }

    /// The users an action targets: one by name, or every registration.
    public func targets(user: String?, all: Bool) async throws -> [String] {
        if all { return try await context.store.registrations().map(\.user) }
        guard let user else { throw ManagerError.invalidParameter("user", reason: "give a user or all") }
        guard try await context.store.registration(user) != nil else { throw ManagerError.noSuchRegistration(user) }
        return [user]
    }

    public func registrationUID(_ user: String) async throws -> UInt32? { try await context.store.registration(user)?.uid }

    public func registration(_ user: String) async throws -> RegistrationRecord? { try await context.store.registration(user) }

    /// The names of the registrations that are `uid`'s own (`Ownership.isOwn`).
    public func ownRegistrations(uid: UInt32) async throws -> [String] {
        try await context.store.registrations().filter { Ownership.isOwn(registrationUID: $0.uid, callerUID: uid) }.map(\.user)
    }
}
