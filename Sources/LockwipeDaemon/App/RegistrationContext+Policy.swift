import Foundation
import LockwipeBase
import LockwipeCore
import Logging
import NIOCore

/// The policies in force for a registration: the server's or the local one, as the
/// configuration and the registration's record say (no I/O).
extension RegistrationContext {
    /// The offline policy that makes `r`'s wipe due, in words, for its certificate.
    func offlineRequester(_ r: RegistrationRecord) -> WipeRequester {
        let (p, source) = policy(for: r)
        return WipeRequester(policy: "\(source) policy: lock after \(p.offlineDaysBeforeLock) days offline, wipe after \(p.offlineDaysBeforeWipe) days")
    }

    /// The policy in force for `r`: the server's once it sent a valid one (while a server
    /// is configured), the local one otherwise.
    func policy(for r: RegistrationRecord) -> (policy: Policy, source: String) {
        if configuration.server.isConfigured, let p = r.server.policy { return (p, "server") }
        return (configuration.policy, "local")
    }

    /// The passcode policy in force for `r`: the local `[passcode]` table with every rule
    /// the server sent in its place (while a server is configured).
    /// The machine's policy among `list`: the newest valid policy the server sent (normally
    /// the same for every registration), else the local one.
    func machinePolicy(_ list: [RegistrationRecord]) -> (policy: Policy, source: String) {
        if configuration.server.isConfigured,
            let newest = list.filter({ $0.server.policy != nil }).max(by: { ($0.server.policyReceivedAt ?? 0) < ($1.server.policyReceivedAt ?? 0) }),
            let p = newest.server.policy
        {
            return (p, "server")
        }
        return (configuration.policy, "local")
    }

    func passcodePolicy(for r: RegistrationRecord) -> (policy: PasscodePolicy, source: String) {
        let server = configuration.server.isConfigured ? r.server.settings?.passcode : nil
        let p = configuration.passcode.overridden(by: server)
        return (p, p == configuration.passcode ? "local" : "server")
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

    func reason(_ action: Action, offline: Int64, policy p: Policy, source: String) -> String {
        let days = action == .lock ? p.offlineDaysBeforeLock : p.offlineDaysBeforeWipe
        return "offline for \(RelativeTime.format(seconds: offline)) (\(source) policy: \(Policy.threshold(action, days: days)))"
    }
}
