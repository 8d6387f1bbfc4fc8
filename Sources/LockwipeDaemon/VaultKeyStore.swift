import Foundation
import GRDB

/// An encrypted vault's key as the store keeps it: wrapped only (see `WrappedKey`), with
/// the kernel's identifier of the key (not secret: derived from it one-way), when the
/// passcode was set (nil while the machine key wraps it) and the failed unlocks in a row.
public struct StoredVaultKey: Sendable, Equatable {
    public var identifier: Fscrypt.KeyIdentifier
    public var wrapped: WrappedKey
    public var passcodeSetAt: Int64?
    public var failedAttempts: Int

    public init(identifier: Fscrypt.KeyIdentifier, wrapped: WrappedKey, passcodeSetAt: Int64?, failedAttempts: Int = 0) {
        self.identifier = identifier
        self.wrapped = wrapped
        self.passcodeSetAt = passcodeSetAt
        self.failedAttempts = failedAttempts
    }
}

/// Vault keys in the state database (table `vault_keys`, migration `v3-vault`).
///
/// Every change that replaces or removes a wrapped key ends with a `wal_checkpoint(TRUNCATE)`:
/// `secure_delete` zeroes the old bytes in the database file, but until a checkpoint the
/// write-ahead log still holds page images with the old wrapped copy.
extension StateStore {
    public func vaultKey(_ user: String) throws -> StoredVaultKey? {
        try db.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM vault_keys WHERE user = ?", arguments: [user]).map(Self.vaultKey(from:))
        }
    }

    static func vaultKey(from row: Row) throws -> StoredVaultKey {
        let wrapping = WrappedKey.Wrapping(rawValue: row["wrapping"]) ?? .passcode
        var scrypt: WrappedKey.ScryptParameters?
        if let n: Int = row["scrypt_log_n"], let r: Int = row["scrypt_r"], let p: Int = row["scrypt_p"] {
            scrypt = .init(logN: n, r: r, p: p)
        }
        let hex: String = row["key_identifier"]
        return StoredVaultKey(
            identifier: Fscrypt.KeyIdentifier(hex: hex) ?? Fscrypt.KeyIdentifier(bytes: []),
            wrapped: WrappedKey(wrapping: wrapping, salt: row["salt"], scrypt: scrypt, sealed: row["sealed"]),
            passcodeSetAt: row["passcode_set_at"], failedAttempts: row["failed_attempts"])
    }

    static func saveVaultKey(_ k: StoredVaultKey, of user: String, _ db: Database) throws {
        // Typed one by one: a literal of mixed optionals takes the type checker minutes.
        let scrypt: WrappedKey.ScryptParameters? = k.wrapped.scrypt
        let logN: Int? = scrypt?.logN
        let r: Int? = scrypt?.r
        let p: Int? = scrypt?.p
        var values: [(any DatabaseValueConvertible)?] = []
        values.append(user)
        values.append(k.identifier.description)
        values.append(k.wrapped.wrapping.rawValue)
        values.append(k.wrapped.salt)
        values.append(logN)
        values.append(r)
        values.append(p)
        values.append(k.wrapped.sealed)
        values.append(k.passcodeSetAt)
        values.append(k.failedAttempts)
        try db.execute(
            sql: """
                INSERT INTO vault_keys (user, key_identifier, wrapping, salt, scrypt_log_n, scrypt_r, scrypt_p, sealed, passcode_set_at, failed_attempts)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT(user) DO UPDATE SET key_identifier = excluded.key_identifier, wrapping = excluded.wrapping,
                    salt = excluded.salt, scrypt_log_n = excluded.scrypt_log_n, scrypt_r = excluded.scrypt_r,
                    scrypt_p = excluded.scrypt_p, sealed = excluded.sealed, passcode_set_at = excluded.passcode_set_at,
                    failed_attempts = excluded.failed_attempts
                """,
            arguments: StatementArguments(values))
    }

    /// Replaces the wrapped key (a passcode set or changed), resets the failed attempts,
    /// records `event`, and checkpoints so that no copy of the old wrapping survives.
    public func rewrapVaultKey(_ user: String, _ wrapped: WrappedKey, passcodeSetAt: Int64?, event: StoredEvent) throws {
        try db.write { db in
            guard var k = try Row.fetchOne(db, sql: "SELECT * FROM vault_keys WHERE user = ?", arguments: [user]).map(Self.vaultKey(from:)) else {
                throw DatabaseError(message: "no vault key stored for \(user)")
            }
            k.wrapped = wrapped
            k.passcodeSetAt = passcodeSetAt
            k.failedAttempts = 0
            try Self.saveVaultKey(k, of: user, db)
            try Self.append(event, db)
        }
        try checkpointTruncate()
    }

    /// Counts one unlock attempt as failed, durably, and returns the new count. Called
    /// before the passcode is even tried (a right one resets it): no crash, kill or
    /// dropped connection between a wrong guess and its answer can lose the count.
    public func recordFailedUnlock(_ user: String, event: StoredEvent?) throws -> Int {
        try db.write { db in
            try db.execute(sql: "UPDATE vault_keys SET failed_attempts = failed_attempts + 1 WHERE user = ?", arguments: [user])
            if let event { try Self.append(event, db) }
            return try Int.fetchOne(db, sql: "SELECT failed_attempts FROM vault_keys WHERE user = ?", arguments: [user]) ?? 0
        }
    }

    public func resetFailedUnlocks(_ user: String) throws {
        try db.write { db in
            try db.execute(sql: "UPDATE vault_keys SET failed_attempts = 0 WHERE user = ? AND failed_attempts <> 0", arguments: [user])
        }
    }

    /// Destroys every stored copy of a vault key (crypto-erase): the row is deleted with
    /// `secure_delete` on and the WAL is checkpointed and truncated. Records when, in the
    /// pending wipe. Returns false when there was no key left (a resumed wipe).
    @discardableResult
    public func destroyVaultKey(_ user: String, at time: Int64, secondsSinceRequest: Double, event: StoredEvent) throws -> Bool {
        let existed = try db.write { db -> Bool in
            try db.execute(sql: "DELETE FROM vault_keys WHERE user = ?", arguments: [user])
            let deleted = db.changesCount > 0
            if deleted {
                try db.execute(sql: "UPDATE pending_wipes SET key_destroyed_at = ?, key_destroyed_seconds = ? WHERE user = ?",
                               arguments: [time, secondsSinceRequest, user])
                try Self.append(event, db)
            }
            return deleted
        }
        try checkpointTruncate()
        return existed
    }

    /// When the key of a pending wipe was destroyed, and how long after the wipe request.
    public func keyDestroyed(_ user: String) throws -> (at: Int64, seconds: Double?)? {
        try db.read { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT key_destroyed_at, key_destroyed_seconds FROM pending_wipes WHERE user = ?", arguments: [user]),
                  let at: Int64 = row["key_destroyed_at"] else { return nil }
            return (at, row["key_destroyed_seconds"])
        }
    }

    /// Copies the WAL into the database file and truncates it to zero bytes.
    public func checkpointTruncate() throws {
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
