import Foundation
import LockwipeBase
import LockwipeCore
import Logging
import NIOCore

/// What the policy and a lease make of a registration's record at a clock reading (no I/O).
extension RegistrationContext {
    static func leaseTrigger(_ source: OfflineLease.Source) -> Trigger? {
        source == .server ? .server : nil
    }

    func leaseFields(_ r: RegistrationRecord, _ lease: OfflineLease, requester: String?, id: MessageID) -> Logger.Metadata {
        var meta: Logger.Metadata = [
            "message_id": id.metadata, "user": .string(r.user), "uid": "\(r.uid)", "registration_id": .string(r.id.rawValue),
            "lease_until": .string(Timestamp.iso(lease.until)), "lease_until_seconds": "\(lease.until)",
            "lease_source": .string(lease.source.rawValue), "lease_reference": .string(lease.reference),
            "offline_seconds": "\(r.clock.offlineSeconds)",
        ]
        if let requester { meta["lease_requester"] = .string(requester) }
        // LOCKWIPE_ACTION is the history's kind, as for warnings: `journalctl LOCKWIPE_ACTION=lease-granted`.
        let kind: EventKind = id == .leaseGranted ? .leaseGranted : id == .leaseEnded ? .leaseEnded : .leaseRefused
        meta["action"] = .string(kind.rawValue)
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

    func outlook(_ r: RegistrationRecord, _ reading: ClockReading, policy p: Policy? = nil) -> Outlook {
        let offline = offlineNow(r, reading)
        let next = PolicyEvaluator.evaluate(policy: p ?? policy(for: r).policy, state: r.state, offlineSeconds: offline, leaseEndsAt: leaseEndsAt(r)).next
        return Outlook(record: r, offline: offline, next: next)
    }

    /// The offline time of `r` as of `reading`, without persisting a checkpoint (reads
    /// never write). Every schedule and report is computed from this, never from the stored
    /// checkpoint alone, which is as old as the last evaluation.
    func offlineNow(_ r: RegistrationRecord, _ reading: ClockReading) -> Int64 {
        r.state.isWipeCommitted ? r.clock.offlineSeconds : r.clock.advanced(to: reading).clock.offlineSeconds
    }
}
