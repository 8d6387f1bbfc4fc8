import Foundation
import GRDB
import LockwipeCore

extension StateStore {
    /// Records a check-in the server rejected (`CheckInDecision.Write.rejected`): a failed
    /// attempt, and the rejection (status, text; since when, kept from the first one in a
    /// row) until the next contact clears it. Not a contact: the offline clock runs on.
    /// Returns the registration as written (read in the same transaction).
    @discardableResult
    nonisolated(nonsending) func recordRejected(
        _ held: TurnHeld, at time: Int64, status: Int, text: String, failures: Int
    ) async throws
        -> RegistrationRecord?
    {
        let id = held.id
        return try await perform { [self] in
            try db.write { db in
                let user = try Self.user(of: id, db)
                try Self.ensureServerRow(user, db)
                try db.execute(
                    sql: """
                        UPDATE server_state SET last_attempt = ?, last_error = ?, failures = ?,
                            rejected_status = ?, rejected_text = ?, rejected_since = coalesce(rejected_since, ?) WHERE user = ?
                        """,
                    arguments: [time, "rejected by the server (HTTP \(status): \(text))", failures, status, text, time, user])
                return try fetchRegistrations(db, only: id).first
            }
        }
    }
}
