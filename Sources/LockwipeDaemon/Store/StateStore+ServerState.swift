import Foundation
import GRDB
import LockwipeCore

extension StateStore {
    static func ensureServerRow(_ user: String, _ db: Database) throws {
        try db.execute(sql: "INSERT OR IGNORE INTO server_state (user) VALUES (?)", arguments: [user])
    }

    /// Records an attempt that was not a contact: nothing else changes. Returns the
    /// registration as written (read in the same transaction).
    @discardableResult
    nonisolated(nonsending) func recordFailedAttempt(_ held: TurnHeld, at time: Int64, error: String, failures: Int) async throws -> RegistrationRecord? {
        let id = held.id
        return try await perform { [self] in
            try db.write { db in
                let user = try Self.user(of: id, db)
                try Self.ensureServerRow(user, db)
                try db.execute(
                    sql: "UPDATE server_state SET last_attempt = ?, last_error = ?, failures = ? WHERE user = ?",
                    arguments: [time, error, failures, user])
                return try fetchRegistrations(db, user: user).first
            }
        }
    }

    /// Marks a registration blocked by the server (`code` as sent); not a contact. Returns
    /// the registration as written (read in the same transaction).
    @discardableResult
    nonisolated(nonsending) func setBlocked(
        _ held: TurnHeld, code: String, at time: Int64, failures: Int, event: StoredEvent?
    ) async throws
        -> RegistrationRecord?
    {
        let id = held.id
        return try await perform { [self] in
            try db.write { db in
                let user = try Self.user(of: id, db)
                try Self.ensureServerRow(user, db)
                try db.execute(sql: "UPDATE registrations SET blocked = 1 WHERE user = ?", arguments: [user])
                try db.execute(
                    sql: "UPDATE server_state SET last_attempt = ?, last_error = ?, failures = ?, blocked_code = ? WHERE user = ?",
                    arguments: [time, "blocked by the server (\(code))", failures, code, user])
                if let event { try Self.append(event, db) }
                return try fetchRegistrations(db, user: user).first
            }
        }
    }
}
