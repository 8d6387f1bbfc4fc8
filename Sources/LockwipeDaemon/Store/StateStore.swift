import Foundation
import GRDB
import Synchronization
import LockwipeCore
import LockwipeProtocol

/// A registration as the daemon keeps it.
public struct RegistrationRecord: Sendable, Equatable {
    public var user: String
    public var uid: UInt32
    public var state: RegistrationState
    public var protection: Protection
    public var directories: [String]
    public var lockTrigger: Trigger?
    public var blocked: Bool
    public var clock: OfflineClock
    public var lastWipe: WipeSummary?
    /// What the policy server said and when it was last tried.
    public var server = ServerRecord()
    /// Which registration this is: a fresh random id at every registration, so that a
    /// check-in answer, a key wrap or any other late result can be tied to the registration
    /// it belongs to, and not to a later one of the same user name.
    public var id = RegistrationRecord.newID()

    /// 128 random bits as 32 lowercase hex digits.
    public static func newID() -> String {
        var rng = SystemRandomNumberGenerator()
        return (0..<2).map { _ in
            let hex = String(rng.next() as UInt64, radix: 16)
            return String(repeating: "0", count: 16 - hex.count) + hex
        }.joined()
    }

    /// The device and inode of each directory (same order as `directories`), recorded at
    /// registration; nil for one registered before they were recorded (`v5-vault-identity`)
    /// until start-up records it.
    public var identities: [VaultDirectory.Identity?] = []
    /// Why the last action could not reach the vault (missing, replaced, lock not
    /// verified), until an action succeeds again; shown in `status` as `vault_error`.
    public var vaultError: String?

    /// The vault directories with their recorded identities: what every action opens.
    public var vaults: [VaultDirectory] {
        directories.enumerated().map { i, path in VaultDirectory(path: path, identity: i < identities.count ? identities[i] : nil) }
    }
}

/// The check-in side of a registration, as persisted (table `server_state`).
public struct ServerRecord: Sendable, Equatable {
    /// The last valid policy the server sent; nil before the first one (local policy applies).
    public var policy: Policy?
    /// The settings document that policy came with (passcode and shared-device settings).
    public var settings: ServerSettings?
    /// Wall time the server policy was last received.
    public var policyReceivedAt: Int64?
    /// Wall time of the last check-in attempt, and its error (nil when it was a contact).
    public var lastAttempt: Int64?
    public var lastError: String?
    /// Failed attempts in a row (drives the backoff).
    public var failures = 0
    /// The x-message-code that blocked the registration, while it is blocked.
    public var blockedCode: String?
    /// Which credentials are stored: "none", "token", "certificate", "token+certificate".
    public var credentials = "none"

    public init() {}
}

/// A registration's credentials for the policy server. Secret: stored in the state
/// database only (0600 in a 0700 directory), never logged, never shown; its description
/// says only what is present.
public struct ServerCredentials: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    public var token: String?
    /// PEM certificate chain and PEM private key for TLS client authentication.
    public var clientCertificate: String?
    public var clientKey: String?

    public init(token: String? = nil, clientCertificate: String? = nil, clientKey: String? = nil) {
        self.token = token
        self.clientCertificate = clientCertificate
        self.clientKey = clientKey
    }

    public var kind: String {
        switch (token != nil, clientCertificate != nil) {
        case (false, false): return "none"
        case (true, false): return "token"
        case (false, true): return "certificate"
        case (true, true): return "token+certificate"
        }
    }

    public var description: String { "ServerCredentials(\(kind))" }
    public var debugDescription: String { description }
}

/// Owner and mode of a vault directory as it was before a permission lock: what unlock restores.
public struct LockRecord: Sendable, Equatable {
    public var path: String
    public var uid: UInt32
    public var gid: UInt32
    public var mode: UInt32
}

/// An audit event as stored.
public struct StoredEvent: Sendable, Equatable {
    public var time: Int64
    public var user: String
    public var kind: String
    public var trigger: Trigger?
    public var detail: String
}

/// Why the state database cannot be trusted. The daemon then enforces nothing (it cannot
/// know what it would be enforcing), says so loudly, and `status` shows this text.
public enum StateStoreDamage: Error, Sendable, Equatable, CustomStringConvertible {
    /// The database was created once (the marker says so) and is gone now.
    case missing(path: String)
    /// It exists but cannot be opened or read, or fails SQLite's integrity check.
    case damaged(path: String, reason: String)
    /// Deleted or replaced while the daemon had it open.
    case replaced(path: String)

    public var description: String { what + "; lockwiped enforces nothing until it is restored from a backup, or moved aside together with \(StateStore.markerName) to start afresh (lockwiped(8))" }

    private var what: String {
        switch self {
        case .missing(let path):
            return "the state database \(path) is missing, but this machine had one (\(StateStore.markerName) is there): registrations, lock records and pending wipes are unknown"
        case .damaged(let path, let reason):
            return "the state database \(path) is damaged (\(reason))"
        case .replaced(let path):
            return "the state database \(path) was deleted or replaced while lockwiped was running"
        }
    }
}

/// The daemon's durable state: one SQLite database (WAL, `secure_delete`) in the state
/// directory. Every state transition and the event that records it are written in one
/// transaction, so history and state never disagree after a crash.
///
/// A database that was once created and is now missing or damaged is never silently
/// replaced by an empty one (that would forget every lock and pending wipe): opening
/// throws `StateStoreDamage`. A database deleted or replaced while open is noticed at the
/// next access, and every access after that fails with the same damage.
public final class StateStore: Sendable {
    public static let fileName = "state.sqlite"
    /// Created beside the database once it exists: "there was a database here".
    public static let markerName = "state.created"
    let db: CheckedQueue
    public let path: String
    /// Where the wrapped vault keys are (never in the database: see `KeyFiles`).
    public let keyFiles: KeyFiles
    private let registrationCache = Mutex<(generation: UInt64, list: [RegistrationRecord])?>(nil)

    public init(directory: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        path = directory + "/" + Self.fileName
        keyFiles = KeyFiles(stateDirectory: directory)
        let marker = directory + "/" + Self.markerName
        let existed = FileManager.default.fileExists(atPath: path)
        if !existed, FileManager.default.fileExists(atPath: marker) {
            throw StateStoreDamage.missing(path: path)
        }
        var config = GRDB.Configuration()
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA secure_delete = ON")
        }
        config.busyMode = .timeout(5)
        let previousMask = umask(0o077)
        defer { umask(previousMask) }
        let queue: DatabaseQueue
        do {
            queue = try DatabaseQueue(path: path, configuration: config)
            try queue.writeWithoutTransaction { db in
                _ = try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL")
            }
            if existed {
                let check = try queue.read { try String.fetchAll($0, sql: "PRAGMA quick_check") }
                if check != ["ok"] { throw StateStoreDamage.damaged(path: path, reason: "integrity check: " + check.prefix(3).joined(separator: "; ")) }
            }
            let walBytes = Self.fileSize(path + "-wal")
            // Rows with a wrapped key that v6-key-files is about to move out.
            let keysMoved = try queue.read { db -> Bool in
                guard try db.tableExists("vault_keys"), try !db.columns(in: "vault_keys").contains(where: { $0.name == "key_file" }) else { return false }
                return try Int.fetchOne(db, sql: "SELECT count(*) FROM vault_keys") ?? 0 > 0
            }
            try Self.migrator(keyFiles).migrate(queue)
            if keysMoved {
                // The wrapped keys the migration moved out may still be in the database
                // file's free space and in WAL frames written before it: overwrite both.
                try Self.scrubWrappedKeyCopies(queue, walBytes: walBytes)
            }
        } catch let damage as StateStoreDamage {
            throw damage
        } catch {
            throw StateStoreDamage.damaged(path: path, reason: "\(error)")
        }
        if !FileManager.default.fileExists(atPath: marker) {
            guard FileManager.default.createFile(atPath: marker, contents: Data("lockwiped created \(Self.fileName) here; if it goes missing, lockwiped refuses to start afresh\n".utf8)) else {
                throw FileSystemError("create", marker)
            }
        }
        db = try CheckedQueue(queue, path: path)
    }

    /// The damage noticed while running, if any (then every access fails with it).
    public var damage: StateStoreDamage? { db.damage }

    /// Called once, when damage is first noticed while running (to log it loudly).
    public func onDamage(_ observer: @escaping @Sendable (StateStoreDamage) -> Void) { db.setObserver(observer) }

    /// A store that fails every access with `damage`: what the daemon runs with when its
    /// database cannot be trusted, so that it still answers `status` with the reason.
    public init(damaged damage: StateStoreDamage) throws {
        path = {
            switch damage {
            case .missing(let p), .damaged(let p, _), .replaced(let p): return p
            }
        }()
        keyFiles = KeyFiles(stateDirectory: (path as NSString).deletingLastPathComponent)
        db = try CheckedQueue(DatabaseQueue(), path: path, damage: damage)
    }

    /// The migrations, for tests that build a database as an older version left it (up
    /// to a migration before `v6-key-files`, which would write key files to a directory
    /// that does not exist: use `migrate(path:keyFiles:upTo:)` for that).
    static var migratorForTesting: DatabaseMigrator { migrator(KeyFiles(stateDirectory: "/nonexistent")) }

    private static func migrator(_ keyFiles: KeyFiles) -> DatabaseMigrator {
        var m = DatabaseMigrator()
        m.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE registrations (
                    user TEXT PRIMARY KEY NOT NULL,
                    uid INTEGER NOT NULL,
                    state TEXT NOT NULL,
                    protection TEXT NOT NULL,
                    lock_trigger TEXT,
                    blocked INTEGER NOT NULL DEFAULT 0,
                    created_at INTEGER NOT NULL,
                    clock_last_contact INTEGER NOT NULL,
                    clock_accumulated_boot INTEGER NOT NULL,
                    clock_boot_id TEXT NOT NULL,
                    clock_boot_mark INTEGER NOT NULL,
                    clock_last_wall INTEGER NOT NULL,
                    clock_offline_seconds INTEGER NOT NULL,
                    last_wipe TEXT
                );
                CREATE TABLE directories (
                    user TEXT NOT NULL REFERENCES registrations(user) ON DELETE CASCADE,
                    position INTEGER NOT NULL,
                    path TEXT NOT NULL UNIQUE,
                    PRIMARY KEY (user, position)
                );
                CREATE TABLE lock_records (
                    path TEXT PRIMARY KEY NOT NULL,
                    user TEXT NOT NULL,
                    uid INTEGER NOT NULL,
                    gid INTEGER NOT NULL,
                    mode INTEGER NOT NULL
                );
                CREATE TABLE pending_wipes (
                    user TEXT PRIMARY KEY NOT NULL,
                    reason TEXT NOT NULL,
                    trigger TEXT NOT NULL,
                    started_at INTEGER NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0
                );
                CREATE TABLE events (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    time INTEGER NOT NULL,
                    user TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    trigger TEXT,
                    detail TEXT NOT NULL
                );
                CREATE INDEX events_user ON events(user, id);
                """)
        }
        // Policy server check-in: per-registration credentials (secret) and what the
        // server last said.
        m.registerMigration("v2-server") { db in
            try db.execute(sql: """
                CREATE TABLE credentials (
                    user TEXT PRIMARY KEY NOT NULL,
                    token TEXT,
                    client_certificate TEXT,
                    client_key TEXT,
                    updated_at INTEGER NOT NULL
                );
                CREATE TABLE server_state (
                    user TEXT PRIMARY KEY NOT NULL,
                    policy_lock INTEGER,
                    policy_wipe INTEGER,
                    settings TEXT,
                    policy_received_at INTEGER,
                    last_attempt INTEGER,
                    last_error TEXT,
                    failures INTEGER NOT NULL DEFAULT 0,
                    blocked_code TEXT
                );
                """)
        }
        // Encrypted vaults: the vault key, only wrapped (one row per registration), the
        // passcode's set time and the durable failed-unlock count; when a crypto-erase
        // destroyed the key.
        m.registerMigration("v3-vault") { db in
            try db.execute(sql: """
                CREATE TABLE vault_keys (
                    user TEXT PRIMARY KEY NOT NULL,
                    key_identifier TEXT NOT NULL,
                    wrapping TEXT NOT NULL,
                    salt BLOB NOT NULL,
                    scrypt_log_n INTEGER,
                    scrypt_r INTEGER,
                    scrypt_p INTEGER,
                    sealed BLOB NOT NULL,
                    passcode_set_at INTEGER,
                    failed_attempts INTEGER NOT NULL DEFAULT 0
                );
                ALTER TABLE pending_wipes ADD COLUMN key_destroyed_at INTEGER;
                ALTER TABLE pending_wipes ADD COLUMN key_destroyed_seconds REAL;
                """)
        }
        // Registration ids (see `RegistrationRecord.id`); registrations made before get one.
        m.registerMigration("v4-registration-id") { db in
            try db.execute(sql: """
                ALTER TABLE registrations ADD COLUMN id TEXT;
                UPDATE registrations SET id = lower(hex(randomblob(16))) WHERE id IS NULL;
                CREATE UNIQUE INDEX registrations_id ON registrations(id);
                """)
        }
        // A vault is an inode, not a path: the device and inode of each directory, recorded
        // at registration (NULL for older registrations until start-up records them), and
        // why the last action could not reach the vault.
        m.registerMigration("v5-vault-identity") { db in
            try db.execute(sql: """
                ALTER TABLE directories ADD COLUMN device INTEGER;
                ALTER TABLE directories ADD COLUMN inode INTEGER;
                ALTER TABLE registrations ADD COLUMN vault_error TEXT;
                """)
        }
        // Wrapped keys move out of the database into files of their own (`KeyFiles`),
        // which can be overwritten, and the time of the last wrong passcode is kept
        // (`PasscodeBackoff`); `salt` and `sealed` are left as zeros of the same size
        // (overwritten in place, see `scrubWrappedKeyCopies`) and are empty from now on.
        m.registerMigration("v6-key-files") { db in
            try db.execute(sql: "ALTER TABLE vault_keys ADD COLUMN key_file TEXT")
            // When the last wrong passcode was tried: the back-off counts from it.
            try db.execute(sql: "ALTER TABLE vault_keys ADD COLUMN failed_at INTEGER")
            for row in try Row.fetchAll(db, sql: "SELECT * FROM vault_keys WHERE length(sealed) > 0") {
                let user: String = row["user"]
                let wrapped = try Self.legacyWrappedKey(from: row)
                let name = try keyFiles.write(wrapped)
                try db.execute(
                    sql: "UPDATE vault_keys SET key_file = ?, sealed = zeroblob(length(sealed)), salt = zeroblob(length(salt)) WHERE user = ?",
                    arguments: [name, user])
            }
        }
        return m
    }

    /// Creates (or migrates) a database at `path` only up to `migration`: how tests make
    /// the database an older lockwiped left.
    static func migrate(path: String, keyFiles: KeyFiles, upTo migration: String) throws {
        let queue = try DatabaseQueue(path: path)
        try queue.writeWithoutTransaction { db in _ = try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL") }
        try migrator(keyFiles).migrate(queue, upTo: migration)
    }

    private static func fileSize(_ path: String) -> Int64 {
        var st = stat()
        return stat(path, &st) == 0 ? Int64(st.st_size) : 0
    }

    /// After moving wrapped keys out: the zeroed rows are checkpointed into the database
    /// file (overwriting the old cells in place, `secure_delete` zeroing what moved), then
    /// the WAL is overwritten from its start over at least `walBytes` (its size before the
    /// migration, whose frames may hold old page images) by a filler transaction, and only
    /// then truncated. A plain `wal_checkpoint(TRUNCATE)` would free those frames unread
    /// but not overwritten.
    static func scrubWrappedKeyCopies(_ queue: DatabaseQueue, walBytes: Int64) throws {
        try queue.writeWithoutTransaction { db in
            _ = try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(RESTART)")
            let pageSize = try Int.fetchOne(db, sql: "PRAGMA page_size") ?? 4096
            // Every frame is a page plus a 24-byte header; fill past the old size.
            let fill = max(walBytes, Int64(pageSize)) + Int64(4 * pageSize)
            try db.execute(sql: "CREATE TABLE IF NOT EXISTS wal_scrub (filler BLOB)")
            try db.inTransaction {
                try db.execute(sql: "INSERT INTO wal_scrub (filler) VALUES (zeroblob(?))", arguments: [fill])
                return .commit
            }
            try db.execute(sql: "DROP TABLE wal_scrub")
            _ = try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)")
        }
    }

    // MARK: Registrations

    /// Every registration, by user. Served from memory until the next write: `status`,
    /// the scheduler and every request read them, and reading them from SQLite each time
    /// made GetStatus cost a query per registration and table.
    public func registrations() throws -> [RegistrationRecord] {
        let generation = try db.writeGeneration()
        if let cached = registrationCache.withLock({ $0 }), cached.generation == generation { return cached.list }
        let list = try db.read { db in try Self.fetchRegistrations(db) }
        registrationCache.withLock { $0 = (generation, list) }
        return list
    }

    public func registration(_ user: String) throws -> RegistrationRecord? {
        try registrations().first { $0.user == user }
    }

    /// Every registration with its directories, server state and which credentials it has:
    /// four queries in all, whatever the number of registrations.
    private static func fetchRegistrations(_ db: Database) throws -> [RegistrationRecord] {
        var directories: [String: [String]] = [:]
        var identities: [String: [VaultDirectory.Identity?]] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT user, path, device, inode FROM directories ORDER BY user, position") {
            directories[row["user"], default: []].append(row["path"])
            let device: Int64? = row["device"], inode: Int64? = row["inode"]
            identities[row["user"], default: []].append(
                device.flatMap { d in inode.map { VaultDirectory.Identity(device: UInt64(bitPattern: d), inode: UInt64(bitPattern: $0)) } })
        }
        var servers: [String: ServerRecord] = [:]
        for s in try Row.fetchAll(db, sql: "SELECT * FROM server_state") {
            var server = ServerRecord()
            if let lock: Int = s["policy_lock"], let wipe: Int = s["policy_wipe"] {
                server.policy = Policy(offlineDaysBeforeLock: lock, offlineDaysBeforeWipe: wipe)
            }
            server.settings = (s["settings"] as String?).flatMap { try? JSONDecoder().decode(ServerSettings.self, from: Data($0.utf8)) }
            server.policyReceivedAt = s["policy_received_at"]
            server.lastAttempt = s["last_attempt"]
            server.lastError = s["last_error"]
            server.failures = s["failures"]
            server.blockedCode = s["blocked_code"]
            servers[s["user"]] = server
        }
        var credentials: [String: String] = [:]
        for c in try Row.fetchAll(db, sql: "SELECT user, token IS NOT NULL AS t, client_certificate IS NOT NULL AS c FROM credentials") {
            credentials[c["user"]] = ServerCredentials(token: (c["t"] as Bool) ? "" : nil, clientCertificate: (c["c"] as Bool) ? "" : nil).kind
        }
        return try Row.fetchAll(db, sql: "SELECT * FROM registrations ORDER BY user").map { row in
            let name: String = row["user"]
            let wipeJSON: String? = row["last_wipe"]
            var server = servers[name] ?? ServerRecord()
            if let kind = credentials[name] { server.credentials = kind }
            var record = RegistrationRecord(
                user: name,
                uid: UInt32(row["uid"] as Int64),
                state: RegistrationState(rawValue: row["state"]) ?? .locked,  // unknown: fail closed
                protection: Protection(rawValue: row["protection"]) ?? .permissions,
                directories: directories[name] ?? [],
                lockTrigger: (row["lock_trigger"] as String?).flatMap(Trigger.init(rawValue:)),
                blocked: row["blocked"],
                clock: OfflineClock(
                    lastContact: row["clock_last_contact"], accumulatedBoot: row["clock_accumulated_boot"],
                    bootID: row["clock_boot_id"], bootMark: row["clock_boot_mark"], lastWall: row["clock_last_wall"],
                    offlineSeconds: row["clock_offline_seconds"]),
                lastWipe: wipeJSON.flatMap { try? JSONDecoder().decode(WipeSummary.self, from: Data($0.utf8)) },
                server: server,
                id: row["id"]
            )
            record.identities = identities[name] ?? []
            record.vaultError = row["vault_error"]
            return record
        }
    }

    /// Persists a new registration (and its credentials) and its `register` event in one transaction.
    /// A vault key's wrapped form is written to its file first; when the transaction
    /// fails the file is destroyed again (after a crash, the next start does it).
    public func insert(_ r: RegistrationRecord, credentials: ServerCredentials? = nil, vaultKey: StoredVaultKey? = nil, event: StoredEvent) throws {
        var vaultKey = vaultKey
        if vaultKey != nil { vaultKey!.keyFile = try keyFiles.write(vaultKey!.wrapped) }
        do {
            try insertRows(r, credentials: credentials, vaultKey: vaultKey, event: event)
        } catch {
            if let name = vaultKey?.keyFile { try? keyFiles.destroy(name) }
            throw error
        }
    }

    private func insertRows(_ r: RegistrationRecord, credentials: ServerCredentials?, vaultKey: StoredVaultKey?, event: StoredEvent) throws {
        try db.write { db in
            if let vaultKey { try Self.saveVaultKey(vaultKey, of: r.user, db) }
            if let credentials { try Self.saveCredentials(credentials, of: r.user, at: event.time, db) }
            try db.execute(
                sql: """
                    INSERT INTO registrations (user, uid, state, protection, lock_trigger, blocked, created_at,
                        clock_last_contact, clock_accumulated_boot, clock_boot_id, clock_boot_mark, clock_last_wall, clock_offline_seconds, id)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [r.user, Int64(r.uid), r.state.rawValue, r.protection.rawValue, r.lockTrigger?.rawValue, r.blocked,
                            event.time, r.clock.lastContact, r.clock.accumulatedBoot, r.clock.bootID, r.clock.bootMark,
                            r.clock.lastWall, r.clock.offlineSeconds, r.id])
            for (i, vault) in r.vaults.enumerated() {
                try db.execute(sql: "INSERT INTO directories (user, position, path, device, inode) VALUES (?, ?, ?, ?, ?)",
                               arguments: [r.user, i, vault.path, vault.identity.map { Int64(bitPattern: $0.device) },
                                           vault.identity.map { Int64(bitPattern: $0.inode) }])
            }
            try Self.append(event, db)
        }
    }

    /// Removes a registration (its lock records, pending wipe and any wrapped key too) and
    /// records `event`.
    public func delete(_ user: String, event: StoredEvent) throws {
        var keyFile: String?
        defer { if let keyFile { try? keyFiles.destroy(keyFile) } }
        try db.write { db in
            try db.execute(sql: "DELETE FROM directories WHERE user = ?", arguments: [user])
            try db.execute(sql: "DELETE FROM lock_records WHERE user = ?", arguments: [user])
            try db.execute(sql: "DELETE FROM pending_wipes WHERE user = ?", arguments: [user])
            try db.execute(sql: "DELETE FROM credentials WHERE user = ?", arguments: [user])
            try db.execute(sql: "DELETE FROM server_state WHERE user = ?", arguments: [user])
            if let name = try String.fetchOne(db, sql: "SELECT key_file FROM vault_keys WHERE user = ?", arguments: [user]) {
                keyFile = name
            }
            try db.execute(sql: "DELETE FROM vault_keys WHERE user = ?", arguments: [user])
            try db.execute(sql: "DELETE FROM registrations WHERE user = ?", arguments: [user])
            try Self.append(event, db)
        }
    }

    /// Records the identity of a directory registered before identities were kept
    /// (start-up, once its path passed the ancestor rule).
    public func recordIdentity(_ user: String, path: String, _ identity: VaultDirectory.Identity, event: StoredEvent) throws {
        try db.write { db in
            try db.execute(sql: "UPDATE directories SET device = ?, inode = ? WHERE user = ? AND path = ? AND device IS NULL",
                           arguments: [Int64(bitPattern: identity.device), Int64(bitPattern: identity.inode), user, path])
            try Self.append(event, db)
        }
    }

    /// Sets or clears why the vault of `user` could not be reached; `lockFailed` moves a
    /// `locked` registration to `lock-failed` (the lock is committed but not in force) and
    /// `lockHolds` moves `lock-failed` back to `locked` once a retry verified it.
    public func setVaultError(_ user: String, _ error: String?, lockFailed: Bool = false, lockHolds: Bool = false, event: StoredEvent? = nil) throws {
        try db.write { db in
            try db.execute(sql: "UPDATE registrations SET vault_error = ? WHERE user = ?", arguments: [error, user])
            if lockFailed {
                try db.execute(sql: "UPDATE registrations SET state = ? WHERE user = ? AND state = ?",
                               arguments: [RegistrationState.lockFailed.rawValue, user, RegistrationState.locked.rawValue])
            }
            if lockHolds {
                try db.execute(sql: "UPDATE registrations SET state = ? WHERE user = ? AND state = ?",
                               arguments: [RegistrationState.locked.rawValue, user, RegistrationState.lockFailed.rawValue])
            }
            if let event { try Self.append(event, db) }
        }
    }

    /// Moves a registration to `state` and records `event`, atomically.
    public func transition(_ user: String, to state: RegistrationState, lockTrigger: Trigger?, event: StoredEvent?) throws {
        try db.write { db in
            try db.execute(sql: "UPDATE registrations SET state = ?, lock_trigger = ? WHERE user = ?",
                           arguments: [state.rawValue, lockTrigger?.rawValue, user])
            if let event { try Self.append(event, db) }
        }
    }

    /// Persists checkpoints of offline clocks (they only grow; see `OfflineClock`).
    public func saveClocks(_ clocks: [(user: String, clock: OfflineClock)]) throws {
        guard !clocks.isEmpty else { return }
        try db.write { db in
            for (user, c) in clocks { try Self.save(c, of: user, db) }
        }
    }

    private static func save(_ c: OfflineClock, of user: String, _ db: Database) throws {
        // Prepared once per connection: every evaluation saves every registration's clock.
        try db.cachedStatement(sql: """
            UPDATE registrations SET clock_last_contact = ?, clock_accumulated_boot = ?, clock_boot_id = ?,
                clock_boot_mark = ?, clock_last_wall = ?, clock_offline_seconds = ? WHERE user = ?
            """).execute(arguments: [c.lastContact, c.accumulatedBoot, c.bootID, c.bootMark, c.lastWall, c.offlineSeconds, user])
    }

    // MARK: Locks

    public func lockRecords(_ user: String) throws -> [LockRecord] {
        try db.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM lock_records WHERE user = ? ORDER BY path", arguments: [user]).map {
                LockRecord(path: $0["path"], uid: UInt32($0["uid"] as Int64), gid: UInt32($0["gid"] as Int64), mode: UInt32($0["mode"] as Int64))
            }
        }
    }

    /// Commits a lock before the filesystem is touched: the original owner and mode of
    /// every directory (kept if already recorded, so a re-lock after a crash never records
    /// the locked `root:root 0000` as "original"), the new state and the event.
    public func commitLock(_ user: String, records: [LockRecord], trigger: Trigger, event: StoredEvent) throws {
        try db.write { db in
            for r in records {
                try db.execute(
                    sql: "INSERT OR IGNORE INTO lock_records (path, user, uid, gid, mode) VALUES (?, ?, ?, ?, ?)",
                    arguments: [r.path, user, Int64(r.uid), Int64(r.gid), Int64(r.mode)])
            }
            try db.execute(sql: "UPDATE registrations SET state = ?, lock_trigger = ? WHERE user = ?",
                           arguments: [RegistrationState.locked.rawValue, trigger.rawValue, user])
            try Self.append(event, db)
        }
    }

    /// Commits an unlock after the filesystem was restored: state active, records gone and
    /// offline clock restarted (an admin unlock is a re-authentication), in one transaction,
    /// so a crash can never leave an active registration with its old offline time.
    /// A nil `clock` keeps the offline clock (a user's own unlock of an encrypted vault is
    /// not a re-authentication by the server or an administrator).
    public func commitUnlock(_ user: String, clock: OfflineClock?, event: StoredEvent) throws {
        try db.write { db in
            try db.execute(sql: "DELETE FROM lock_records WHERE user = ?", arguments: [user])
            try db.execute(sql: "UPDATE registrations SET state = ?, lock_trigger = NULL, vault_error = NULL WHERE user = ?",
                           arguments: [RegistrationState.active.rawValue, user])
            if let clock { try Self.save(clock, of: user, db) }
            try Self.append(event, db)
        }
    }

    // MARK: Server check-in

    public func credentials(_ user: String) throws -> ServerCredentials? {
        try db.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM credentials WHERE user = ?", arguments: [user]).map {
                ServerCredentials(token: $0["token"], clientCertificate: $0["client_certificate"], clientKey: $0["client_key"])
            }
        }
    }

    /// Replaces a registration's credentials (all of them) and records `event` (which must
    /// not contain them).
    public func setCredentials(_ user: String, _ credentials: ServerCredentials, event: StoredEvent) throws {
        try db.write { db in
            try Self.saveCredentials(credentials, of: user, at: event.time, db)
            try Self.append(event, db)
        }
    }

    private static func saveCredentials(_ c: ServerCredentials, of user: String, at time: Int64, _ db: Database) throws {
        try db.execute(
            sql: """
                INSERT INTO credentials (user, token, client_certificate, client_key, updated_at) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT(user) DO UPDATE SET token = excluded.token, client_certificate = excluded.client_certificate,
                    client_key = excluded.client_key, updated_at = excluded.updated_at
                """,
            arguments: [user, c.token, c.clientCertificate, c.clientKey, time])
    }

    private static func ensureServerRow(_ user: String, _ db: Database) throws {
        try db.execute(sql: "INSERT OR IGNORE INTO server_state (user) VALUES (?)", arguments: [user])
    }

    /// Records an attempt that was not a contact: nothing else changes.
    public func recordFailedAttempt(_ user: String, at time: Int64, error: String, failures: Int) throws {
        try db.write { db in
            try Self.ensureServerRow(user, db)
            try db.execute(sql: "UPDATE server_state SET last_attempt = ?, last_error = ?, failures = ? WHERE user = ?",
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
            try db.execute(sql: "UPDATE server_state SET last_attempt = ?, last_error = ?, failures = 0, blocked_code = NULL WHERE user = ?",
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
                try db.execute(sql: "UPDATE registrations SET state = ?, lock_trigger = NULL, vault_error = NULL WHERE user = ?",
                               arguments: [RegistrationState.active.rawValue, user])
            }
            for e in events { try Self.append(e, db) }
        }
    }

    /// Changes why a locked registration is locked (a server contact lifts a server or
    /// offline lock of an encrypted vault it cannot open: the user's passcode is left).
    public func setLockTrigger(_ user: String, _ trigger: Trigger) throws {
        try db.write { db in
            try db.execute(sql: "UPDATE registrations SET lock_trigger = ? WHERE user = ? AND state IN (?, ?)",
                           arguments: [trigger.rawValue, user, RegistrationState.locked.rawValue, RegistrationState.lockFailed.rawValue])
        }
    }

    /// Marks a registration blocked by the server (`code` as sent); not a contact.
    public func setBlocked(_ user: String, code: String, at time: Int64, failures: Int, event: StoredEvent?) throws {
        try db.write { db in
            try Self.ensureServerRow(user, db)
            try db.execute(sql: "UPDATE registrations SET blocked = 1 WHERE user = ?", arguments: [user])
            try db.execute(sql: "UPDATE server_state SET last_attempt = ?, last_error = ?, failures = ?, blocked_code = ? WHERE user = ?",
                           arguments: [time, "blocked by the server (\(code))", failures, code, user])
            if let event { try Self.append(event, db) }
        }
    }

    // MARK: Wipes

    public struct PendingWipe: Sendable, Equatable {
        public var user: String
        public var reason: String
        public var trigger: Trigger
        public var startedAt: Int64
        public var attempts: Int
    }

    /// Makes the intent to wipe durable before the first byte is touched.
    public func commitWipeIntent(_ user: String, reason: String, trigger: Trigger, event: StoredEvent) throws {
        try db.write { db in
            try db.execute(
                sql: "INSERT OR IGNORE INTO pending_wipes (user, reason, trigger, started_at) VALUES (?, ?, ?, ?)",
                arguments: [user, reason, trigger.rawValue, event.time])
            try db.execute(sql: "UPDATE registrations SET state = ? WHERE user = ?", arguments: [RegistrationState.wipePending.rawValue, user])
            try Self.append(event, db)
        }
    }

    public func pendingWipes() throws -> [PendingWipe] {
        try db.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM pending_wipes ORDER BY started_at, user").map {
                PendingWipe(user: $0["user"], reason: $0["reason"], trigger: Trigger(rawValue: $0["trigger"]) ?? .resume,
                            startedAt: $0["started_at"], attempts: $0["attempts"])
            }
        }
    }

    /// Marks the start of an attempt (state `wiping`), so a crash shows up as a resumed attempt.
    public func beginWipeAttempt(_ user: String, event: StoredEvent?) throws {
        try db.write { db in
            try db.execute(sql: "UPDATE pending_wipes SET attempts = attempts + 1 WHERE user = ?", arguments: [user])
            try db.execute(sql: "UPDATE registrations SET state = ? WHERE user = ?", arguments: [RegistrationState.wiping.rawValue, user])
            if let event { try Self.append(event, db) }
        }
    }

    /// Records the wipe's report. Only a complete wipe ends the pending intent and makes the
    /// registration `wiped`; an incomplete one stays pending and is retried.
    public func finishWipe(_ user: String, summary: WipeSummary, event: StoredEvent) throws {
        let json = String(decoding: try JSONEncoder().encode(summary), as: UTF8.self)
        try db.write { db in
            if summary.complete {
                try db.execute(sql: "DELETE FROM pending_wipes WHERE user = ?", arguments: [user])
                try db.execute(sql: "DELETE FROM lock_records WHERE user = ?", arguments: [user])
                try db.execute(sql: "UPDATE registrations SET state = ?, last_wipe = ?, vault_error = NULL WHERE user = ?",
                               arguments: [RegistrationState.wiped.rawValue, json, user])
            } else {
                try db.execute(sql: "UPDATE registrations SET state = ?, last_wipe = ? WHERE user = ?",
                               arguments: [RegistrationState.wipePending.rawValue, json, user])
            }
            try Self.append(event, db)
        }
    }

    // MARK: History

    public func append(_ event: StoredEvent) throws {
        try db.write { db in try Self.append(event, db) }
    }

    static func append(_ e: StoredEvent, _ db: Database) throws {
        try db.execute(sql: "INSERT INTO events (time, user, kind, trigger, detail) VALUES (?, ?, ?, ?, ?)",
                       arguments: [e.time, e.user, e.kind, e.trigger?.rawValue, e.detail])
    }

    /// The newest `limit` events (of `user`, when given), oldest first.
    public func events(user: String?, limit: Int) throws -> [StoredEvent] {
        try db.read { db in
            let rows = user == nil
                ? try Row.fetchAll(db, sql: "SELECT * FROM events ORDER BY id DESC LIMIT ?", arguments: [limit])
                : try Row.fetchAll(db, sql: "SELECT * FROM events WHERE user = ? ORDER BY id DESC LIMIT ?", arguments: [user, limit])
            return rows.reversed().map {
                StoredEvent(time: $0["time"], user: $0["user"], kind: $0["kind"],
                            trigger: ($0["trigger"] as String?).flatMap(Trigger.init(rawValue:)), detail: $0["detail"])
            }
        }
    }
}

/// The database queue, checked before every access: the file at `path` must still be the
/// one that was opened (same device and inode). A state directory cleaned out by hand
/// would otherwise let the daemon write on into an unlinked file and start empty at the
/// next restart.
final class CheckedQueue: Sendable {
    private let queue: DatabaseQueue
    private let path: String
    private let identity: (dev: UInt64, ino: UInt64)
    private let noticed: Mutex<StateStoreDamage?>
    private let observer = Mutex<(@Sendable (StateStoreDamage) -> Void)?>(nil)

    init(_ queue: DatabaseQueue, path: String, damage: StateStoreDamage? = nil) throws {
        self.queue = queue
        self.path = path
        noticed = Mutex(damage)
        var st = stat()
        if damage == nil {
            guard stat(path, &st) == 0 else { throw StateStoreDamage.replaced(path: path) }
        }
        identity = (UInt64(st.st_dev), UInt64(st.st_ino))
    }

    func setObserver(_ o: @escaping @Sendable (StateStoreDamage) -> Void) { observer.withLock { $0 = o } }

    var damage: StateStoreDamage? {
        try? check()
        return noticed.withLock { $0 }
    }

    private func latch(_ damage: StateStoreDamage) -> StateStoreDamage {
        let first = noticed.withLock { current -> Bool in
            guard current == nil else { return false }
            current = damage
            return true
        }
        if first { observer.withLock { $0 }?(damage) }
        return noticed.withLock { $0 } ?? damage
    }

    private func check() throws {
        if let known = noticed.withLock({ $0 }) { throw known }
        var st = stat()
        guard stat(path, &st) == 0, UInt64(st.st_dev) == identity.dev, UInt64(st.st_ino) == identity.ino else {
            throw latch(.replaced(path: path))
        }
    }

    /// Runs `body`; SQLite saying the file is corrupt or not a database latches that damage.
    private func guarded<T>(_ body: () throws -> T) throws -> T {
        try check()
        do {
            return try body()
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CORRUPT || error.resultCode == .SQLITE_NOTADB {
            throw latch(.damaged(path: path, reason: "\(error)"))
        }
    }

    /// Counts the writes (bumped after each one returns, committed or not): what was read
    /// at generation g is still what the database holds while the generation is g.
    private let writes = Atomic<UInt64>(0)

    /// The current write generation, after checking the file is still the one opened.
    func writeGeneration() throws -> UInt64 {
        try check()
        return writes.load(ordering: .acquiring)
    }

    private func written<T>(_ body: () throws -> T) throws -> T {
        defer { writes.add(1, ordering: .releasing) }
        return try guarded(body)
    }

    func read<T>(_ value: (Database) throws -> T) throws -> T { try guarded { try queue.read(value) } }
    func write<T>(_ updates: (Database) throws -> T) throws -> T { try written { try queue.write(updates) } }
    func writeWithoutTransaction<T>(_ updates: (Database) throws -> T) throws -> T { try written { try queue.writeWithoutTransaction(updates) } }
    func inDatabase<T>(_ work: (Database) throws -> T) throws -> T { try written { try queue.inDatabase(work) } }
}
