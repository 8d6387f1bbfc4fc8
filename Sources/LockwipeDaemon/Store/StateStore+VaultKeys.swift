import Foundation
import GRDB
import LockwipeCore
import LockwipeVaultIO

/// Vault keys: the row in the state database (table `vault_keys`: identifier, wrapping,
/// passcode set time, failed attempts, and the name of the key file) and the wrapped key
/// itself in its file (`KeyFiles`). No wrapped key is ever written to the database
/// (since `v6-key-files`), so none can survive in its free pages or WAL frames.
extension StateStore {
    /// The vault key of registration `id`, its wrapped form read from its key file.
    public nonisolated(nonsending) func vaultKey(registration id: RegistrationID) async throws -> StoredVaultKey? {
        try await perform { [self] in
            let user = try db.read { db in try Self.user(of: id, db) }
            guard
                var k = try db.read({ db in
                    try Row.fetchOne(db, sql: "SELECT * FROM vault_keys WHERE user = ?", arguments: [user]).map(Self.vaultKeyRow(from:))
                })
            else { return nil }
            guard let name = k.keyFile else {
                throw KeyWrapError.malformed("the database names no key file for the vault of \(user)")
            }
            k.wrapped = try keyFiles.read(name)
            return k
        }
    }

    /// The vault key fields `status` shows, without reading the key file.
    public nonisolated(nonsending) func vaultKeyStatus(registration id: RegistrationID) async throws -> VaultKeyStatus? {
        try await perform { [self] in
            try db.read { db in
                let user = try Self.user(of: id, db)
                let sql = "SELECT wrapping, passcode_set_at, failed_attempts, wrap_format FROM vault_keys WHERE user = ?"
                return try Row.fetchOne(db, sql: sql, arguments: [user]).map {
                    VaultKeyStatus(
                        wrapping: WrappedKey.Wrapping(rawValue: $0["wrapping"]) ?? .passcode,
                        passcodeSetAt: $0["passcode_set_at"], failedAttempts: $0["failed_attempts"], format: $0["wrap_format"])
                }
            }
        }
    }

    /// A row, with an empty `wrapped` (the key file holds it).
    static func vaultKeyRow(from row: Row) -> StoredVaultKey {
        let wrapping = WrappedKey.Wrapping(rawValue: row["wrapping"]) ?? .passcode
        let hex: String = row["key_identifier"]
        var k = StoredVaultKey(
            identifier: Fscrypt.KeyIdentifier(hex: hex) ?? Fscrypt.KeyIdentifier(bytes: []),
            wrapped: WrappedKey(wrapping: wrapping, salt: Data(), scrypt: nil, sealed: Data(), format: row["wrap_format"]),
            passcodeSetAt: row["passcode_set_at"], failedAttempts: row["failed_attempts"], keyFile: row["key_file"])
        k.lastFailedAt = row["failed_at"]
        return k
    }

    /// A wrapped key as rows before `v6-key-files` kept it (only that migration reads one).
    static func legacyWrappedKey(from row: Row) throws -> WrappedKey {
        let wrapping = WrappedKey.Wrapping(rawValue: row["wrapping"]) ?? .passcode
        var scrypt: WrappedKey.ScryptParameters?
        if let n: Int = row["scrypt_log_n"], let r: Int = row["scrypt_r"], let p: Int = row["scrypt_p"] {
            scrypt = .init(logN: n, r: r, p: p)
        }
        return WrappedKey(wrapping: wrapping, salt: row["salt"], scrypt: scrypt, sealed: row["sealed"])
    }

    /// The row of a vault key whose wrapped form is already in `k.keyFile`. The columns
    /// `salt` and `sealed` of the first schema stay empty.
    static func saveVaultKey(_ k: StoredVaultKey, of user: String, _ db: Database) throws {
        guard let keyFile = k.keyFile else { throw DatabaseError(message: "the vault key of \(user) has no key file") }
        var values: [(any DatabaseValueConvertible)?] = []
        values.append(user)
        values.append(k.identifier.description)
        values.append(k.wrapped.wrapping.rawValue)
        values.append(keyFile)
        values.append(k.passcodeSetAt)
        values.append(k.failedAttempts)
        values.append(k.wrapped.format)
        try db.execute(
            sql: """
                INSERT INTO vault_keys (user, key_identifier, wrapping, salt, sealed, key_file, passcode_set_at, failed_attempts, wrap_format)
                VALUES (?, ?, ?, X'', X'', ?, ?, ?, ?)
                ON CONFLICT(user) DO UPDATE SET key_identifier = excluded.key_identifier, wrapping = excluded.wrapping,
                    salt = X'', scrypt_log_n = NULL, scrypt_r = NULL, scrypt_p = NULL, sealed = X'',
                    key_file = excluded.key_file, passcode_set_at = excluded.passcode_set_at,
                    failed_attempts = excluded.failed_attempts, failed_at = NULL, wrap_format = excluded.wrap_format
                """,
            arguments: StatementArguments(values))
    }

    /// Replaces the wrapped key (a passcode set or changed), resets the failed attempts and
    /// records `event`. Crash-safe, and leaves no copy of the old wrapping: the new key file
    /// is written and made durable, the database is switched to it (the commit point), and
    /// only then is the old file overwritten and unlinked. Returns what went wrong
    /// destroying the old file, if anything (it is then an orphan the next start destroys);
    /// the new passcode is in force either way.
    @discardableResult
    nonisolated(nonsending) func rewrapVaultKey(_ held: TurnHeld, _ wrapped: WrappedKey, passcodeSetAt: Int64?, event: StoredEvent) async throws -> String? {
        let id = held.id
        return try await perform { [self] in
            let newFile = try keyFiles.write(wrapped)
            let oldFile: String?
            do {
                oldFile = try db.write { db -> String? in
                    let user = try Self.user(of: id, db)
                    guard var k = try Row.fetchOne(db, sql: "SELECT * FROM vault_keys WHERE user = ?", arguments: [user]).map(Self.vaultKeyRow(from:)) else {
                        throw DatabaseError(message: "no vault key stored for \(user)")
                    }
                    let old = k.keyFile
                    k.wrapped = wrapped
                    k.keyFile = newFile
                    k.passcodeSetAt = passcodeSetAt
                    k.failedAttempts = 0
                    try Self.saveVaultKey(k, of: user, db)
                    try Self.append(event, db)
                    return old
                }
            } catch {
                try? keyFiles.destroy(newFile)
                throw error
            }
            guard let oldFile, oldFile != newFile else { return nil }
            do {
                try keyFiles.destroy(oldFile)
                return nil
            } catch {
                return "the old wrapped key \(keyFiles.path)/\(oldFile) could not be destroyed (\(error)); the next start destroys it"
            }
        }
    }

    /// Destroys every key file no vault key row names: what a crash between writing a key
    /// file and committing (or between committing a new one and destroying the old one)
    /// leaves. Run at start-up, before any request. Returns the names destroyed.
    public nonisolated(nonsending) func destroyOrphanKeyFiles() async throws -> [String] {
        try await perform { [self] in
            let named = try db.read { db in
                Set(try String.fetchAll(db, sql: "SELECT key_file FROM vault_keys WHERE key_file IS NOT NULL"))
            }
            return try keyFiles.destroyAll(except: named)
        }
    }

    /// Counts one unlock attempt as failed, durably, and returns the new count. Called
    /// before the passcode is even tried (a right one resets it): no crash, kill or
    /// dropped connection between a wrong guess and its answer can lose the count.
    nonisolated(nonsending) func recordFailedUnlock(_ held: TurnHeld, at time: Int64, event: StoredEvent?) async throws -> Int {
        let id = held.id
        return try await perform { [self] in
            try db.write { db in
                let user = try Self.user(of: id, db)
                try db.execute(sql: "UPDATE vault_keys SET failed_attempts = failed_attempts + 1, failed_at = ? WHERE user = ?", arguments: [time, user])
                if let event { try Self.append(event, db) }
                return try Int.fetchOne(db, sql: "SELECT failed_attempts FROM vault_keys WHERE user = ?", arguments: [user]) ?? 0
            }
        }
    }

    /// Records the event of a wrong passcode for registration `id` and moves the time of
    /// its last failure to when it was found wrong (the back-off counts from there).
    nonisolated(nonsending) func append(_ event: StoredEvent, failedUnlockAt time: Int64, _ held: TurnHeld) async throws {
        let id = held.id
        return try await perform { [self] in
            try db.write { db in
                let user = try Self.user(of: id, db)
                try db.execute(sql: "UPDATE vault_keys SET failed_at = ? WHERE user = ? AND failed_attempts > 0", arguments: [time, user])
                try Self.append(event, db)
            }
        }
    }

    nonisolated(nonsending) func resetFailedUnlocks(_ held: TurnHeld) async throws {
        let id = held.id
        return try await perform { [self] in
            try db.write { db in
                let user = try Self.user(of: id, db)
                try db.execute(sql: "UPDATE vault_keys SET failed_attempts = 0, failed_at = NULL WHERE user = ? AND failed_attempts <> 0", arguments: [user])
            }
        }
    }

    /// Destroys every stored copy of a vault key (crypto-erase): its key file is
    /// overwritten in place, `fsync`ed and unlinked, then the row is deleted. Records when,
    /// in the pending wipe. Returns false when there was no key left (a resumed wipe).
    @discardableResult
    nonisolated(nonsending) func destroyVaultKey(_ held: TurnHeld, at time: Int64, secondsSinceRequest: Double, event: StoredEvent) async throws -> Bool {
        let id = held.id
        return try await perform { [self] in
            let (user, keyFile) = try db.read { db in
                let user = try Self.user(of: id, db)
                return (user, try String.fetchOne(db, sql: "SELECT key_file FROM vault_keys WHERE user = ?", arguments: [user]))
            }
            if let keyFile { try keyFiles.destroy(keyFile) }
            let existed = try db.write { db -> Bool in
                guard try Self.user(of: id, db) == user else { throw RegistrationGone(id: id) }
                try db.execute(sql: "DELETE FROM vault_keys WHERE user = ?", arguments: [user])
                let deleted = db.changesCount > 0
                if deleted {
                    try db.execute(
                        sql: "UPDATE pending_wipes SET key_destroyed_at = ?, key_destroyed_seconds = ? WHERE user = ?",
                        arguments: [time, secondsSinceRequest, user])
                    try Self.append(event, db)
                }
                return deleted
            }
            try checkpointTruncate()
            return existed
        }
    }

    /// When the key of a pending wipe was destroyed, and how long after the wipe request.
    public nonisolated(nonsending) func keyDestroyed(registration id: RegistrationID) async throws -> (at: Int64, seconds: Double?)? {
        try await perform { [self] in
            try db.read { db in
                let user = try Self.user(of: id, db)
                guard let row = try Row.fetchOne(db, sql: "SELECT key_destroyed_at, key_destroyed_seconds FROM pending_wipes WHERE user = ?", arguments: [user]),
                    let at: Int64 = row["key_destroyed_at"]
                else { return nil }
                return (at, row["key_destroyed_seconds"])
            }
        }
    }

    /// Copies the WAL into the database file and truncates it to zero bytes (on the
    /// store's queue).
    func checkpointTruncate() throws {
        try db.writeWithoutTransaction { db in
            _ = try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)")
        }
    }
}

extension Fscrypt.KeyIdentifier {
    /// From the hex form `description` gives.
    init?(hex: String) {
        guard hex.count == 32 else { return nil }
        var bytes: [UInt8] = []
        var i = hex.startIndex
        while i < hex.endIndex {
            let j = hex.index(i, offsetBy: 2)
            guard let b = UInt8(hex[i..<j], radix: 16) else { return nil }
            bytes.append(b)
            i = j
        }
        self.init(bytes: bytes)
    }
}
