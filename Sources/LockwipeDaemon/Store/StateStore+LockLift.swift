import GRDB
import LockwipeCore

/// What the lift of a policy lock outside a contact writes (`PolicyLockLift`: a login
/// through PAM, an offline code); the contact's own writes are in `applyContact`.
extension StateStore {
    /// The server's or the offline lock is handed back to the user's passcode (the vault
    /// stays locked, its lock trigger becomes `user`), with its event, in one transaction.
    /// Returns the registration as written (read in the same transaction).
    @discardableResult
    nonisolated(nonsending) func commitHandBack(_ held: TurnHeld, event: StoredEvent) async throws -> RegistrationRecord? {
        let id = held.id
        return try await perform { [self] in
            try db.write { db in
                let user = try Self.user(of: id, db)
                try db.execute(
                    sql: "UPDATE registrations SET lock_trigger = ? WHERE user = ? AND state IN (?, ?)",
                    arguments: [Trigger.user.rawValue, user, RegistrationState.locked.rawValue, RegistrationState.lockFailed.rawValue])
                try Self.append(event, db)
                return try fetchRegistrations(db, user: user).first
            }
        }
    }

    /// A server that orders a lock again takes back what an earlier contact allowed.
    nonisolated(nonsending) func clearLockLiftable(_ held: TurnHeld) async throws {
        let id = held.id
        return try await perform { [self] in
            try db.write { db in try db.execute(sql: "UPDATE registrations SET lock_liftable = 0 WHERE id = ?", arguments: [id]) }
        }
    }
}
