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
        _ held: TurnHeld, at time: Int64, status: Int, text: String, failures: Int, server: String
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
                            rejected_status = ?, rejected_text = ?, rejected_since = coalesce(rejected_since, ?), rejected_server = ? WHERE user = ?
                        """,
                    arguments: [time, "rejected by the server (HTTP \(status): \(text))", failures, status, text, time, server, user])
                return try fetchRegistrations(db, user: user).first
            }
        }
    }

    /// Forgets every rejection that did not come from `server` (the URL configured now; nil
    /// when none is), and returns the users whose rejection was forgotten: a rejection is
    /// the answer of one server, and says nothing once another (or none) is configured.
    /// Machine-wide, outside any turn, as `checkpointClocks`: it touches only the rejection,
    /// which a check-in's answer records again.
    public nonisolated(nonsending) func forgetRejections(unlessFrom server: String?) async throws -> [String] {
        try await perform { [self] in
            try db.write { db in
                let users = try String.fetchAll(
                    db, sql: "SELECT user FROM server_state WHERE rejected_status IS NOT NULL AND rejected_server IS NOT ? ORDER BY user",
                    arguments: [server])
                try db.execute(
                    sql: """
                        UPDATE server_state SET rejected_status = NULL, rejected_text = NULL, rejected_since = NULL, rejected_server = NULL
                        WHERE rejected_status IS NOT NULL AND rejected_server IS NOT ?
                        """, arguments: [server])
                return users
            }
        }
    }
}
