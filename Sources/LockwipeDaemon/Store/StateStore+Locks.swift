import GRDB
import LockwipeCore
import LockwipeVaultIO

extension StateStore {
    public nonisolated(nonsending) func lockRecords(registration id: RegistrationID) async throws -> [LockRecord] {
        try await perform { [self] in
            try db.read { db in
                let user = try Self.user(of: id, db)
                return try Row.fetchAll(db, sql: "SELECT * FROM lock_records WHERE user = ? ORDER BY path", arguments: [user]).map {
                    LockRecord(path: $0["path"], uid: UInt32($0["uid"] as Int64), gid: UInt32($0["gid"] as Int64), mode: UInt32($0["mode"] as Int64))
                }
            }
        }
    }

    /// Commits a lock before the filesystem is touched: the original owner and mode of
    /// every directory (kept if already recorded, so a re-lock after a crash never records
    /// the locked `root:root 0000` as "original"), the new state and the event.
    nonisolated(nonsending) func commitLock(_ held: TurnHeld, records: [LockRecord], trigger: Trigger, event: StoredEvent) async throws {
        let id = held.id
        return try await perform { [self] in
            try db.write { db in
                let user = try Self.user(of: id, db)
                for r in records {
                    try db.execute(
                        sql: "INSERT OR IGNORE INTO lock_records (path, user, uid, gid, mode) VALUES (?, ?, ?, ?, ?)",
                        arguments: [r.path, user, Int64(r.uid), Int64(r.gid), Int64(r.mode)])
                }
                try db.execute(
                    sql: "UPDATE registrations SET state = ?, lock_trigger = ? WHERE user = ?",
                    arguments: [RegistrationState.locked.rawValue, trigger.rawValue, user])
                try Self.append(event, db)
            }
        }
    }

    /// Commits an unlock after the filesystem was restored: state active, records gone and
    /// offline clock restarted (an admin unlock is a re-authentication), in one transaction,
    /// so a crash can never leave an active registration with its old offline time.
    /// A nil `clock` keeps the offline clock (a user's own unlock of an encrypted vault is
    /// not a re-authentication by the server or an administrator). Returns the registration
    /// as written (read in the same transaction).
    @discardableResult
    nonisolated(nonsending) func commitUnlock(_ held: TurnHeld, clock: OfflineClock?, event: StoredEvent) async throws -> RegistrationRecord? {
        let id = held.id
        return try await perform { [self] in
            try db.write { db in
                let user = try Self.user(of: id, db)
                try db.execute(sql: "DELETE FROM lock_records WHERE user = ?", arguments: [user])
                try db.execute(
                    sql: "UPDATE registrations SET state = ?, lock_trigger = NULL, vault_error = NULL WHERE user = ?",
                    arguments: [RegistrationState.active.rawValue, user])
                if let clock { try Self.restartClock(clock, of: user, db) }
                try Self.append(event, db)
                return try fetchRegistrations(db, user: user).first
            }
        }
    }
}
