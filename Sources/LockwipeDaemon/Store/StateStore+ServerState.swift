import Foundation
import GRDB
import LockwipeCore

extension StateStore {
    private static func ensureServerRow(_ user: String, _ db: Database) throws {
        try db.execute(sql: "INSERT OR IGNORE INTO server_state (user) VALUES (?)", arguments: [user])
    }

    /// Records an attempt that was not a contact: nothing else changes.
    public func recordFailedAttempt(_ user: String, at time: Int64, error: String, failures: Int) throws {
        try db.write { db in
            try Self.ensureServerRow(user, db)
            try db.execute(
                sql: "UPDATE server_state SET last_attempt = ?, last_error = ?, failures = ? WHERE user = ?",
                arguments: [time, error, failures, user])
        }
    }

    /// Records a successful contact in one transaction: the offline clock restarts, the
    /// block is lifted, the server policy (when valid) replaces the stored one, and a
    /// server or offline lock is lifted (`unlock`, after the filesystem was restored).
    public func commitContact(
        _ user: String, clock: OfflineClock, at time: Int64, policy: Policy?, settings: ServerSettings?, policyError: String?,
        unlock: Bool, events: [StoredEvent]
    ) throws {
        let settingsJSON = try settings.map { String(decoding: try JSONEncoder().encode($0), as: UTF8.self) }
        try db.write { db in
            try Self.ensureServerRow(user, db)
            try Self.save(clock, of: user, db)
            try db.execute(sql: "UPDATE registrations SET blocked = 0 WHERE user = ?", arguments: [user])
            try db.execute(
                sql: "UPDATE server_state SET last_attempt = ?, last_error = ?, failures = 0, blocked_code = NULL WHERE user = ?",
                arguments: [time, policyError, user])
            if let policy {
                try db.execute(
                    sql: "UPDATE server_state SET policy_lock = ?, policy_wipe = ?, settings = ?, policy_received_at = ? WHERE user = ?",
                    arguments: [policy.offlineDaysBeforeLock, policy.offlineDaysBeforeWipe, settingsJSON, time, user])
            } else if let settingsJSON {
                try db.execute(sql: "UPDATE server_state SET settings = ? WHERE user = ?", arguments: [settingsJSON, user])
            }
            if unlock {
                try db.execute(sql: "DELETE FROM lock_records WHERE user = ?", arguments: [user])
                try db.execute(
                    sql: "UPDATE registrations SET state = ?, lock_trigger = NULL, vault_error = NULL WHERE user = ?",
                    arguments: [RegistrationState.active.rawValue, user])
            }
            for e in events { try Self.append(e, db) }
        }
    }

    /// Changes why a locked registration is locked (a server contact lifts a server or
    /// offline lock of an encrypted vault it cannot open: the user's passcode is left).
    public func setLockTrigger(_ user: String, _ trigger: Trigger) throws {
        try db.write { db in
            try db.execute(
                sql: "UPDATE registrations SET lock_trigger = ? WHERE user = ? AND state IN (?, ?)",
                arguments: [trigger.rawValue, user, RegistrationState.locked.rawValue, RegistrationState.lockFailed.rawValue])
        }
    }

    /// Marks a registration blocked by the server (`code` as sent); not a contact.
    public func setBlocked(_ user: String, code: String, at time: Int64, failures: Int, event: StoredEvent?) throws {
        try db.write { db in
            try Self.ensureServerRow(user, db)
            try db.execute(sql: "UPDATE registrations SET blocked = 1 WHERE user = ?", arguments: [user])
            try db.execute(
                sql: "UPDATE server_state SET last_attempt = ?, last_error = ?, failures = ?, blocked_code = ? WHERE user = ?",
                arguments: [time, "blocked by the server (\(code))", failures, code, user])
            if let event { try Self.append(event, db) }
        }
    }
}
