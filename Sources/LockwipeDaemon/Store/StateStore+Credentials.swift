import GRDB
import LockwipeCore

extension StateStore {
    public nonisolated(nonsending) func credentials(registration id: RegistrationID) async throws -> ServerCredentials? {
        try await perform { [self] in
            try db.read { db in
                let user = try Self.user(of: id, db)
                return try Row.fetchOne(db, sql: "SELECT * FROM credentials WHERE user = ?", arguments: [user]).map {
                    ServerCredentials(
                        token: $0["token"], clientCertificate: $0["client_certificate"], clientKey: $0["client_key"], refreshToken: $0["refresh_token"])
                }
            }
        }
    }

    /// Replaces a registration's credentials (all of them) and records `event` (which must
    /// not contain them).
    nonisolated(nonsending) func setCredentials(_ held: TurnHeld, _ credentials: ServerCredentials, event: StoredEvent) async throws {
        let id = held.id
        return try await perform { [self] in
            try db.write { db in
                let user = try Self.user(of: id, db)
                try Self.saveCredentials(credentials, of: user, at: event.time, db)
                try Self.append(event, db)
            }
        }
    }

    static func saveCredentials(_ c: ServerCredentials, of user: String, at time: Int64, _ db: Database) throws {
        try db.execute(
            sql: """
                INSERT INTO credentials (user, token, client_certificate, client_key, refresh_token, updated_at) VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT(user) DO UPDATE SET token = excluded.token, client_certificate = excluded.client_certificate,
                    client_key = excluded.client_key, refresh_token = excluded.refresh_token, updated_at = excluded.updated_at
                """,
            arguments: [user, c.token, c.clientCertificate, c.clientKey, c.refreshToken, time])
    }
}
