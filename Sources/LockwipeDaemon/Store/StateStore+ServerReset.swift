import GRDB
import LockwipeCore

extension StateStore {
    /// SAP's full reset after a wipe, in one transaction: the token and refresh token of
    /// registration `registrationID` are forgotten (a client certificate is kept: it is the machine's, not the
    /// enrolment's), its connection id is forgotten and the
    /// reset recorded with `result` (what the DELETE is at), and `event` appended.
    nonisolated(nonsending) func commitServerReset(
        _ held: TurnHeld, connection: String?, result: String, event: StoredEvent
    ) async throws {
        let registrationID = held.id
        return try await perform { [self] in
            try db.write { db in
                let user = try Self.user(of: registrationID, db)
                try db.execute(
                    sql: "UPDATE credentials SET token = NULL, refresh_token = NULL, updated_at = ? WHERE user = ?",
                    arguments: [event.time, user])
                try db.execute(
                    sql: """
                        INSERT INTO sap_connections (registration_id, user, connection_id, problem, updated_at, reset_at, reset_connection, reset_result)
                            VALUES (?, ?, NULL, NULL, ?, ?, ?, ?)
                        ON CONFLICT(registration_id) DO UPDATE SET connection_id = NULL, problem = NULL, updated_at = excluded.updated_at,
                            reset_at = excluded.reset_at, reset_connection = excluded.reset_connection, reset_result = excluded.reset_result
                        """,
                    arguments: [registrationID, user, event.time, event.time, connection, result])
                try Self.append(event, db)
            }
        }
    }

    /// What the DELETE of the connection given up by the reset of `registrationID` came to
    /// (nothing when the registration is gone meanwhile).
    public nonisolated(nonsending) func recordServerResetResult(registration registrationID: RegistrationID, result: String) async throws {
        try await perform { [self] in
            try db.write { db in
                try db.execute(
                    sql: "UPDATE sap_connections SET reset_result = ? WHERE registration_id = ? AND reset_at IS NOT NULL",
                    arguments: [result, registrationID])
            }
        }
    }
}
