import LockwipeBase
import LockwipeCore
import Logging

/// Offline leases (`OfflineLease`): granted by a helpdesk's offline code or by the policy
/// server, capped by `[offline_codes] max_lease_days`, each grant, refusal and end a history
/// event and a journal entry of its own (`lease-granted` / `leaseGranted`, `lease-refused` /
/// `leaseRefused`, `lease-ended` / `leaseEnded`).
extension Manager {

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
                    try await context.store.endLease(
                        registration: r.id, until: lease.until, at: wall, event: context.event(r.user, .leaseEnded, RegistrationContext.leaseTrigger(lease.source), text, at: wall))
                else { continue }
            } catch {
                context.stateNotice("the end of the offline lease of \(r.user) is not recorded (tried again at the next evaluation)", user: r.user, error)
                continue
            }
            context.logger.notice("\(r.user): \(text)", metadata: context.leaseFields(r, lease, requester: nil, id: .leaseEnded))
        }
    }

}
