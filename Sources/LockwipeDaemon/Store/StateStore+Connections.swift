import GRDB
import LockwipeCore

extension StateStore {
    /// The application connection of the registration `registrationID`, if one was made.
    public nonisolated(nonsending) func sapConnection(registration registrationID: RegistrationID) async throws -> SAPConnectionRecord? {
        try await perform { [self] in
            try db.read { db in
                try Row.fetchOne(db, sql: "SELECT * FROM sap_connections WHERE registration_id = ?", arguments: [registrationID]).map {
                    Self.connectionRecord($0)
                }
            }
        }
    }

    /// Every registration's SAP connection, by registration id: `status` reads them in one
    /// query rather than one per registration.
    public nonisolated(nonsending) func sapConnections() async throws -> [RegistrationID: SAPConnectionRecord] {
        try await perform { [self] in
            try db.read { db in
                var out: [RegistrationID: SAPConnectionRecord] = [:]
                for row in try Row.fetchAll(db, sql: "SELECT * FROM sap_connections") {
                    out[row["registration_id"]] = Self.connectionRecord(row)
                }
                return out
            }
        }
    }

    static func connectionRecord(_ row: Row) -> SAPConnectionRecord {
        SAPConnectionRecord(
            id: row["connection_id"], problem: row["problem"], updatedAt: row["updated_at"], resetAt: row["reset_at"],
            resetConnection: row["reset_connection"], resetResult: row["reset_result"])
    }

    /// Records what a successful Connections request of registration `registrationID`
    /// gave (an id, or with `id` nil the `problem` that there was none)
    /// and the contact it is (SAP's SDKs count any successful response), with the
    /// contact's events, in one transaction. Returns the registration as written (read in
    /// the same transaction).
    @discardableResult
    nonisolated(nonsending) func commitConnection(
        _ held: TurnHeld, id: String?, problem: String?, contact: ContactCommit
    ) async throws -> RegistrationRecord? {
        let registrationID = held.id
        return try await perform { [self] in
            try db.write { db in
                let user = try Self.user(of: registrationID, db)
                try db.execute(
                    sql: """
                        INSERT INTO sap_connections (registration_id, user, connection_id, problem, updated_at) VALUES (?, ?, ?, ?, ?)
                        ON CONFLICT(registration_id) DO UPDATE SET user = excluded.user, connection_id = excluded.connection_id,
                            problem = excluded.problem, updated_at = excluded.updated_at
                        """,
                    arguments: [registrationID, user, id, problem, contact.time])
                try Self.applyContact(user, contact, settingsJSON: nil, db)
                return try fetchRegistrations(db, user: user).first
            }
        }
    }
}
