import GRDB
import LockwipeCore

/// The OAuth refresh token of a registration (`[server.oauth]`), stored with its other
/// credentials (secret: never logged nor shown).
extension StateStore {
    public nonisolated(nonsending) func refreshToken(registration id: RegistrationID) async throws -> String? {
        try await perform { [self] in
            try db.read { db in
                let user = try Self.user(of: id, db)
                return try String.fetchOne(db, sql: "SELECT refresh_token FROM credentials WHERE user = ?", arguments: [user])
            }
        }
    }

    /// Replaces registration `id`'s refresh token `old` by `new`, the one the token endpoint rotated it
    /// to, and commits before returning: the caller may use the access token that came
    /// with `new` only after this (a restart must never hold a refresh token the server
    /// has consumed). false, and nothing changed, when the stored token is no longer `old`
    /// (the credentials were replaced or the registration removed meanwhile).
    public nonisolated(nonsending) func rotateRefreshToken(registration id: RegistrationID, from old: String, to new: String, at time: Int64) async throws -> Bool {
        try await perform { [self] in
            try db.write { db in
                try db.execute(
                    sql: """
                        UPDATE credentials SET refresh_token = ?, updated_at = ?
                        WHERE user = (SELECT user FROM registrations WHERE id = ?) AND refresh_token = ?
                        """,
                    arguments: [new, time, id, old])
                return db.changesCount > 0
            }
        }
    }
}
