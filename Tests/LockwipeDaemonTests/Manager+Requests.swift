import LockwipeCore
import LockwipeProtocol

@testable import LockwipeDaemon

/// The requests as `Control/` makes them (`perform(on:)` and the registration's own
/// operation; the reports built from the Manager's snapshot as the handlers build them),
/// under the short names the tests read best.
extension Manager {
    @discardableResult
    func lock(user: String, trigger: Trigger, reason: String) async throws -> Outcome {
        try await perform(on: user) { turn in try await turn.registration.lock(in: turn, trigger: trigger, reason: reason) }
    }

    @discardableResult
    func wipe(user: String, trigger: Trigger, reason: String, requester: WipeRequester = WipeRequester()) async throws -> Outcome {
        try await perform(on: user) { turn in try await turn.registration.wipe(in: turn, trigger: trigger, reason: reason, requester: requester) }
    }

    @discardableResult
    func grantLease(user: String, until: Int64, source: OfflineLease.Source, reference: String, requester: String) async throws -> OfflineLease {
        try await perform(on: user) { turn in
            try await turn.registration.grantLease(until: until, source: source, reference: reference, requester: requester, in: turn)
        }
    }

    func status(for caller: Caller, user: String?) async throws -> StatusReport {
        StatusReport(try await statusSnapshot(for: caller, user: user))
    }

    func history(user: String?, owner: UInt32?, limit: Int, since: Int64? = nil) async throws -> HistoryReply {
        HistoryReply(try await historyPage(user: user, owner: owner, limit: limit, since: since))
    }

    func policyInfo() async throws -> PolicyInfo {
        let (policy, source) = try await policyInForce()
        return PolicyInfo(policy: policy, source: source)
    }
}
