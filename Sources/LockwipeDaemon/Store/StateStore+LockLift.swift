import GRDB
import LockwipeCore

/// What the lift of a policy lock outside a contact writes (`PolicyLockLift`: a login
/// through PAM, an offline code); the contact's own writes are in `applyContact`.
extension StateStore {
    /// The server's or the offline lock is handed back to the user's passcode (the vault
    /// stays locked, its lock trigger becomes `user`), with its event, in one transaction.
    public nonisolated(nonsending) func commitHandBack(_ user: String, event: StoredEvent) async throws {
        try await perform { [self] in
            try db.write { db in
                try db.execute(
                    sql: "UPDATE registrations SET lock_trigger = ? WHERE user = ? AND state IN (?, ?)",
                    arguments: [Trigger.user.rawValue, user, RegistrationState.locked.rawValue, RegistrationState.lockFailed.rawValue])
                try Self.append(event, db)
            }
        }
    }

    /// A server that orders a lock again takes back what an earlier contact allowed.
    public nonisolated(nonsending) func clearLockLiftable(_ user: String) async throws {
        try await perform { [self] in
            try db.write { db in try db.execute(sql: "UPDATE registrations SET lock_liftable = 0 WHERE user = ?", arguments: [user]) }
        }
    }
}
