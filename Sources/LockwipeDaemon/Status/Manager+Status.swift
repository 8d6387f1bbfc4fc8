import Foundation
import LockwipeCore
import LockwipeProtocol
import NIOCore

/// What the daemon reports: `status` (the registrations a caller may see, with their
/// clocks, next actions, key and check-in state, and the warnings an operator must read),
/// `history`, the policy in force, and the one-line summary for systemd's STATUS=.
extension Manager {
    func summaryEntries() -> [StatusSummary.Entry] {
        let reading = clock.now()
        return ((try? store.registrations()) ?? []).map { r in
            StatusSummary.Entry(
                user: r.user, state: r.state,
                next: PolicyEvaluator.evaluate(policy: policy(for: r).policy, state: r.state, offlineSeconds: offlineNow(r, reading)).next)
        }
    }

    /// The offline time of `r` as of `reading`, without persisting a checkpoint (reads
    /// never write). Every schedule and report is computed from this, never from the stored
    /// checkpoint alone, which is as old as the last evaluation.
    func offlineNow(_ r: RegistrationRecord, _ reading: ClockReading) -> Int64 {
        r.state.isWipeCommitted ? r.clock.offlineSeconds : r.clock.advanced(to: reading).clock.offlineSeconds
    }

    public var statusLine: String {
        if let damage = store.damage { return "DEGRADED, nothing is enforced: \(damage)" }
        return StatusSummary.line(summaryEntries())
    }

    public func status(for caller: Caller, user: String?) throws -> StatusReport {
        let reading = clock.now()
        var list = try store.registrations().filter {
            caller.isAdmin || Ownership.isOwn(registrationUID: $0.uid, callerUID: caller.credentials.uid)
        }
        if let user {
            list = list.filter { $0.user == user }
            if list.isEmpty { throw ManagerError.noSuchRegistration(user) }
        }
        let server = configuration.server
        let infos = list.map { r -> RegistrationInfo in
            let offline = offlineNow(r, reading)
            let (p, source) = policy(for: r)
            let next = PolicyEvaluator.evaluate(policy: p, state: r.state, offlineSeconds: offline).next
            var info = RegistrationInfo(
                user: r.user, uid: r.uid, state: r.state, protection: r.protection, directories: r.directories,
                blocked: r.blocked, lastContact: Timestamp.iso(r.clock.lastContact), offlineSeconds: offline,
                nextAction: next.map { NextAction(action: $0.action, at: Timestamp.iso(reading.wall + $0.inSeconds)) },
                lockTrigger: r.state.isLockCommitted ? r.lockTrigger : nil, wipe: r.lastWipe,
                wipeProgress: runningWipes[r.user]?.info())
            info.policy = PolicyInfo(policy: p, source: source)
            info.policySource = source
            info.blockedCode = r.blocked ? r.server.blockedCode : nil
            info.lastAttempt = r.server.lastAttempt.map(Timestamp.iso)
            info.lastError = r.server.lastAttempt == nil ? nil : r.server.lastError
            info.nextCheckIn = nextCheckInTime(r, wall: reading.wall).map(Timestamp.iso)
            info.credentials = r.server.credentials
            if server.sapIdentity != nil, let c = try? store.sapConnection(registration: r.id) {
                info.sapConnection = c.id
                info.sapConnectionProblem = c.problem
            }
            info.passcodePolicy = r.server.settings?.passcode
            info.sharedDevice = r.server.settings?.sharedDevice
            info.logoutLockAt = logoutLockTime(r.user, wall: reading.wall)
            info.vaultError = r.vaultError
            vaultStatus(r, into: &info)
            return info
        }
        var warnings: [String] = []
        if !server.isConfigured {
            warnings.append("no policy server is configured: offline clocks restart only when an administrator unlocks a registration")
        }
        if server.usesInsecureHTTP {
            warnings.append(
                "the policy server is reached over plain http:// (allow_insecure_http = true): any local user who binds that port first receives every token and can order locks and wipes; use https://"
            )
        }
        if !caller.adminGroupExists {
            warnings.append("the admin group '\(configuration.adminGroup)' does not exist: only root is an administrator")
        }
        warnings += logoutLockWarnings(list)
        for r in list where r.state == .lockFailed {
            warnings.append("the lock of \(r.user) FAILED and is not in force; it is retried: \(r.vaultError ?? "see the journal")")
        }
        for r in list where r.state != .lockFailed && r.vaultError != nil {
            warnings.append("the vault of \(r.user) cannot be reached: \(r.vaultError!)")
        }
        for r in list where r.state == .wipePending {
            warnings.append("the wipe of \(r.user) is pending (incomplete or interrupted); it is retried at start-up")
        }
        for r in list where r.blocked {
            warnings.append("\(r.user) is blocked by the policy server (\(r.server.blockedCode ?? "blocked")); its data is untouched")
        }
        for info in infos {
            if let problem = info.sapConnectionProblem { warnings.append("\(info.user) has no SAP application connection yet: \(problem)") }
        }
        if server.isConfigured {
            for r in list where r.server.failures > 0 && !r.state.isWipeCommitted {
                warnings.append("check-in of \(r.user) failed \(r.server.failures) time(s) in a row: \(r.server.lastError ?? "unknown error")")
            }
        }
        return StatusReport(
            version: LockwipeVersion.current, server: ServerInfo(configured: server.isConfigured, url: server.url, insecureHttp: server.usesInsecureHTTP),
            policy: policyInfo(list), registrations: infos, warnings: warnings)
    }

    public func history(for caller: Caller, user: String?, limit: Int) throws -> HistoryReply {
        var filter = user
        if !caller.isAdmin {
            guard let name = user ?? caller.userName else { return HistoryReply(events: []) }
            guard
                Ownership.mayReadHistory(
                    of: name, registrationUID: try store.registration(name)?.uid,
                    callerUID: caller.credentials.uid, callerName: caller.userName)
            else {
                if user == nil { return HistoryReply(events: []) }
                throw ManagerError.notPermitted("only administrators may read the history of other users")
            }
            filter = name
        }
        let events = try store.events(user: filter, limit: max(1, min(limit, 10_000)))
        return HistoryReply(
            events: events.map {
                HistoryEvent(time: Timestamp.iso($0.time), user: $0.user, kind: $0.kind, trigger: $0.trigger, detail: $0.detail)
            })
    }

    /// The machine's policy: the newest valid policy the server sent (normally the same for
    /// every registration), else the local one. Each registration shows its own too.
    public func policyInfo() -> PolicyInfo { policyInfo((try? store.registrations()) ?? []) }

    private func policyInfo(_ list: [RegistrationRecord]) -> PolicyInfo {
        if configuration.server.isConfigured,
            let newest = list.filter({ $0.server.policy != nil }).max(by: { ($0.server.policyReceivedAt ?? 0) < ($1.server.policyReceivedAt ?? 0) }),
            let p = newest.server.policy
        {
            return PolicyInfo(policy: p, source: "server")
        }
        return PolicyInfo(policy: configuration.policy, source: "local")
    }

    /// The users an action targets: one by name, or every registration.
    public func targets(user: String?, all: Bool) throws -> [String] {
        if all { return try store.registrations().map(\.user) }
        guard let user else { throw ManagerError.invalidParameter("user", reason: "give a user or all") }
        guard try store.registration(user) != nil else { throw ManagerError.noSuchRegistration(user) }
        return [user]
    }

    public func registrationUID(_ user: String) throws -> UInt32? { try store.registration(user)?.uid }

    public func registration(_ user: String) throws -> RegistrationRecord? { try store.registration(user) }
}
