import Foundation
import GRDB
import LockwipeCore

extension StateStore {
    /// Records a successful contact (`ContactCommit`) in one transaction: the offline clock
    /// restarts, the block is lifted, failures reset, the server policy (when valid) replaces
    /// the stored one, the lock is lifted or handed back, and the events are appended.
    /// Returns the registration as written (read in the same transaction).
    @discardableResult
    nonisolated(nonsending) func commitContact(_ held: TurnHeld, _ c: ContactCommit) async throws -> RegistrationRecord? {
        let id = held.id
        return try await perform { [self] in
            let settingsJSON = try c.settings.map { String(decoding: try StoredJSON.encoder().encode($0), as: UTF8.self) }
            return try db.write { db in
                let user = try Self.user(of: id, db)
                try Self.applyContact(user, c, settingsJSON: settingsJSON, db)
                return try fetchRegistrations(db, user: user).first
            }
        }
    }

    /// The writes of a contact, inside the caller's transaction.
    static func applyContact(_ user: String, _ c: ContactCommit, settingsJSON: String?, _ db: Database) throws {
        try Self.ensureServerRow(user, db)
        try Self.restartClock(c.clock, of: user, db)
        try db.execute(sql: "UPDATE registrations SET blocked = 0 WHERE user = ?", arguments: [user])
        try db.execute(
            sql: """
                UPDATE server_state SET last_attempt = ?, last_error = ?, failures = 0, blocked_code = NULL,
                    rejected_status = NULL, rejected_text = NULL, rejected_since = NULL, rejected_server = NULL, settings = coalesce(?, settings) WHERE user = ?
                """, arguments: [c.time, c.policyError, settingsJSON, user])
        if let p = c.policy {
            try db.execute(
                sql: "UPDATE server_state SET policy_lock = ?, policy_wipe = ?, policy_received_at = ? WHERE user = ?",
                arguments: [p.offlineDaysBeforeLock, p.offlineDaysBeforeWipe, c.time, user])
        }
        switch c.lock {
        case .keep:
            break
        case .lifted:
            try db.execute(sql: "DELETE FROM lock_records WHERE user = ?", arguments: [user])
            try db.execute(
                sql: "UPDATE registrations SET state = ?, lock_trigger = NULL, vault_error = NULL WHERE user = ?",
                arguments: [RegistrationState.active.rawValue, user])
        case .handedBack:
            try db.execute(
                sql: "UPDATE registrations SET lock_trigger = ? WHERE user = ? AND state IN (?, ?)",
                arguments: [Trigger.user.rawValue, user, RegistrationState.locked.rawValue, RegistrationState.lockFailed.rawValue])
        case .notLiftable:
            try db.execute(sql: "UPDATE registrations SET lock_liftable = 0 WHERE user = ?", arguments: [user])
        case .liftable:
            try db.execute(
                sql: "UPDATE registrations SET lock_liftable = 1 WHERE user = ? AND state IN (?, ?) AND lock_trigger IN (?, ?)",
                arguments: [
                    user, RegistrationState.locked.rawValue, RegistrationState.lockFailed.rawValue, Trigger.server.rawValue, Trigger.offline.rawValue,
                ])
        }
        for e in c.events { try Self.append(e, db) }
    }
}
