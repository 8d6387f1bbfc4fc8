import LockwipeCore

@testable import LockwipeDaemon

/// The per-registration requests as `Control/` makes them (`perform(on:)` and the
/// registration's own operation), under the short names the tests read best.
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
}
