import Foundation
import LockwipeBase
import LockwipeCore
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

    /// What `status` shows `caller` (`user`: that registration only), in the domain's values:
    /// `Control/` builds the report (`StatusReport+Snapshot.swift`).
    func statusSnapshot(for caller: Caller, user: String?) async throws -> StatusSnapshot {
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
        var entries: [StatusSnapshot.Entry] = []
        for r in list {
            let (p, source) = context.policy(for: r)
            let evaluated = context.outlook(r, reading, policy: p)
            let lock = PolicyLockLift.Lock(state: r.state, trigger: r.lockTrigger, liftable: r.lockLiftable)
            entries.append(
                StatusSnapshot.Entry(
                    record: r, policy: p, policySource: source, offline: evaluated.offline, next: evaluated.next, warning: warningDecision(evaluated),
                    nextCheckIn: nextCheckInTime(r, wall: reading.wall), logoutLockAt: logoutLockTime(r.id, wall: reading.wall),
                    runningWipe: registry.byID[r.id]?.runningWipe, connection: connections[r.id], key: await keyStatus(r),
                    passcodePolicy: context.passcodePolicy(for: r).policy,
                    lockWaitsFor: PolicyLockLift.waitingFor(
                        lock, user: r.user, setting: context.configuration.liftAfterContact, serverConfigured: server.isConfigured)))
        }
        let machine = policyInForce(everyone)
        return StatusSnapshot(
            reading: reading, server: server, registrations: entries, policy: machine.policy, policySource: machine.source,
            missingAdminGroup: caller.adminGroupExists ? nil : context.configuration.adminGroup, logoutWarnings: logoutLockWarnings(list),
            rejectedReload: rejectedReload, records: list)
    }

    /// The key of an encrypted vault for `status`; nil for a permission vault, or when it
    /// cannot be read (status still answers, only the key fields are left out).
    private func keyStatus(_ r: RegistrationRecord) async -> VaultKeyStatus? {
        guard r.protection == .encrypted else { return nil }
        do {
            return try await context.store.vaultKeyStatus(r.user)
        } catch {
            context.stateNotice("status of \(r.user): the key fields are left out", user: r.user, error)
            return nil
        }
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
    func policyInForce() async throws -> (policy: Policy, source: String) { policyInForce(try await context.store.registrations()) }

    private func policyInForce(_ list: [RegistrationRecord]) -> (policy: Policy, source: String) {
        if context.configuration.server.isConfigured,
            let newest = list.filter({ $0.server.policy != nil }).max(by: { ($0.server.policyReceivedAt ?? 0) < ($1.server.policyReceivedAt ?? 0) }),
            let p = newest.server.policy
        {
            return (p, "server")
        }
        return (context.configuration.policy, "local")
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
