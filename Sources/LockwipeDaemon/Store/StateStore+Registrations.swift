import Foundation
import GRDB
import LockwipeCore
import LockwipeVaultIO
import Synchronization

extension StateStore {
    /// Every registration, by user. Served from memory until the next write: `status`,
    /// the scheduler and every request read them, and reading them from SQLite each time
    /// made GetStatus cost a query per registration and table.
    /// The cached list is returned without leaving the caller's thread (one `stat` of the
    /// database file checks it is still the one opened); a query runs on the store's queue.
    public nonisolated(nonsending) func registrations() async throws -> [RegistrationRecord] {
        try db.faults.check(#function)
        let generation = try db.writeGeneration()
        if let cached = registrationCache.withLock({ $0 }), cached.generation == generation { return cached.list }
        return try await perform("registrations, from the database") { [self] in
            let list = try db.read { db in try fetchRegistrations(db) }
            registrationCache.withLock { $0 = (generation, list) }
            return list
        }
    }

    /// How many writes the store has committed, of any table: a record read when it was N
    /// (taken before the read) is what the store holds while it is still N.
    public func writesCommitted() throws -> UInt64 { try db.writeGeneration() }

    /// The registration that holds the name `user` now: the one lookup by name. Every
    /// other operation on a registration takes its id.
    public nonisolated(nonsending) func registration(_ user: String) async throws -> RegistrationRecord? {
        try await registrations().first { $0.user == user }
    }

    /// The registration `id` (nil: it is gone; a name registered again is another id).
    public nonisolated(nonsending) func registration(id: RegistrationID) async throws -> RegistrationRecord? {
        try await registrations().first { $0.id == id }
    }

    /// The name registration `id` holds, read in the transaction `db` of an operation on
    /// it. The tables beside `registrations` keep their rows by that name (a name is held by
    /// one registration at a time); resolving the id in the operation's own transaction is
    /// what makes an operation meant for a registration that is gone (its name registered
    /// again meanwhile) fail with `RegistrationGone` instead of reaching the new one.
    static func user(of id: RegistrationID, _ db: Database) throws -> String {
        guard let user = try String.fetchOne(db, sql: "SELECT user FROM registrations WHERE id = ?", arguments: [id]) else {
            throw RegistrationGone(id: id)
        }
        return user
    }

    /// Every registration with its directories, server state and which credentials it has:
    /// four queries in all, whatever the number of registrations (`only`: that registration
    /// alone, as a write that returns the record it wrote reads it, in its transaction).
    func fetchRegistrations(_ db: Database, only id: RegistrationID? = nil) throws -> [RegistrationRecord] {
        try fetchRegistrations(db, user: try id.map { try Self.user(of: $0, db) })
    }

    /// The registration of `user` (every one when nil): for a write that has already turned
    /// its id into the name in the same transaction (`user(of:_:)`), so as not to look it
    /// up twice.
    func fetchRegistrations(_ db: Database, user: String?) throws -> [RegistrationRecord] {
        let (whereUser, arguments): (String, StatementArguments) = user.map { (" WHERE user = ?", [$0]) } ?? ("", [])
        var directories: [String: [String]] = [:]
        var identities: [String: [VaultDirectory.Identity?]] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT user, path, device, inode FROM directories\(whereUser) ORDER BY user, position", arguments: arguments) {
            directories[row["user"], default: []].append(row["path"])
            let device: Int64? = row["device"], inode: Int64? = row["inode"]
            identities[row["user"], default: []].append(
                device.flatMap { d in inode.map { VaultDirectory.Identity(device: UInt64(bitPattern: d), inode: UInt64(bitPattern: $0)) } })
        }
        var servers: [String: ServerRecord] = [:]
        for s in try Row.fetchAll(db, sql: "SELECT * FROM server_state\(whereUser)", arguments: arguments) {
            var server = ServerRecord()
            if let lock: Int = s["policy_lock"], let wipe: Int = s["policy_wipe"] {
                server.policy = Policy(offlineDaysBeforeLock: lock, offlineDaysBeforeWipe: wipe)
            }
            server.settings = decodeStored(ServerSettings.self, s["settings"], "the server settings stored for \(s["user"] as String)")
            server.policyReceivedAt = s["policy_received_at"]
            server.lastAttempt = s["last_attempt"]
            server.lastError = s["last_error"]
            server.failures = s["failures"]
            server.blockedCode = s["blocked_code"]
            server.rejectedStatus = s["rejected_status"]
            server.rejectedText = s["rejected_text"]
            server.rejectedSince = s["rejected_since"]
            servers[s["user"]] = server
        }
        var credentials: [String: String] = [:]
        for c in try Row.fetchAll(
            db, sql: "SELECT user, token IS NOT NULL AS t, client_certificate IS NOT NULL AS c, refresh_token IS NOT NULL AS r FROM credentials\(whereUser)", arguments: arguments)
        {
            credentials[c["user"]] =
                ServerCredentials(
                    token: (c["t"] as Bool) ? "" : nil, clientCertificate: (c["c"] as Bool) ? "" : nil, refreshToken: (c["r"] as Bool) ? "" : nil
                ).kind
        }
        return try Row.fetchAll(db, sql: "SELECT * FROM registrations\(whereUser) ORDER BY user", arguments: arguments).map { row in
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
                clock: Self.clock(from: row),
                lastWipe: decodeStored(WipeSummary.self, wipeJSON, "the report of the last wipe of \(name)"),
                server: server,
                id: row["id"]
            )
            record.identities = identities[name] ?? []
            record.vaultError = row["vault_error"]
            record.warnedThreshold = row["warned_threshold"]
            record.lease = Self.lease(from: row)
            record.leaseRefused = row["lease_refused"]
            record.lockLiftable = row["lock_liftable"]
            record.outbox = row["outbox"]
            return record
        }
    }

    /// Persists a new registration (and its credentials) and its `register` event in one transaction.
    /// A vault key's wrapped form is written to its file first; when the transaction
    /// fails the file is destroyed again (after a crash, the next start does it).
    public nonisolated(nonsending) func insert(_ r: RegistrationRecord, credentials: ServerCredentials? = nil, vaultKey: StoredVaultKey? = nil, event: StoredEvent) async throws {
        try await perform { [self] in
            var vaultKey = vaultKey
            if vaultKey != nil { vaultKey!.keyFile = try keyFiles.write(vaultKey!.wrapped) }
            do {
                try insertRows(r, credentials: credentials, vaultKey: vaultKey, event: event)
            } catch {
                if let name = vaultKey?.keyFile { try? keyFiles.destroy(name) }
                throw error
            }
        }
    }

    private func insertRows(_ r: RegistrationRecord, credentials: ServerCredentials?, vaultKey: StoredVaultKey?, event: StoredEvent) throws {
        try db.write { db in
            if let vaultKey { try Self.saveVaultKey(vaultKey, of: r.user, db) }
            if let credentials { try Self.saveCredentials(credentials, of: r.user, at: event.time, db) }
            try db.execute(
                sql: """
                    INSERT INTO registrations (user, uid, state, protection, lock_trigger, blocked, created_at,
                        clock_last_contact, clock_accumulated_boot, clock_boot_id, clock_boot_mark, clock_last_wall, clock_offline_seconds, id, outbox)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    r.user, Int64(r.uid), r.state.rawValue, r.protection.rawValue, r.lockTrigger?.rawValue, r.blocked,
                    event.time, r.clock.lastContact, r.clock.accumulatedBoot, r.clock.bootID, r.clock.bootMark,
                    r.clock.lastWall, r.clock.offlineSeconds, r.id, r.outbox,
                ])
            for (i, vault) in r.vaults.enumerated() {
                try db.execute(
                    sql: "INSERT INTO directories (user, position, path, device, inode) VALUES (?, ?, ?, ?, ?)",
                    arguments: [
                        r.user, i, vault.path, vault.identity.map { Int64(bitPattern: $0.device) },
                        vault.identity.map { Int64(bitPattern: $0.inode) },
                    ])
            }
            try Self.append(event, db)
        }
    }

    /// Removes a registration (its lock records, pending wipe and any wrapped key too) and
    /// records `event`.
    nonisolated(nonsending) func delete(_ held: TurnHeld, event: StoredEvent) async throws {
        let id = held.id
        return try await perform { [self] in
            var keyFile: String?
            defer { if let keyFile { try? keyFiles.destroy(keyFile) } }
            try db.write { db in
                let user = try Self.user(of: id, db)
                try db.execute(sql: "DELETE FROM directories WHERE user = ?", arguments: [user])
                try db.execute(sql: "DELETE FROM lock_records WHERE user = ?", arguments: [user])
                try db.execute(sql: "DELETE FROM pending_wipes WHERE user = ?", arguments: [user])
                try db.execute(sql: "DELETE FROM credentials WHERE user = ?", arguments: [user])
                try db.execute(sql: "DELETE FROM server_state WHERE user = ?", arguments: [user])
                try db.execute(sql: "DELETE FROM sap_connections WHERE user = ?", arguments: [user])
                if let name = try String.fetchOne(db, sql: "SELECT key_file FROM vault_keys WHERE user = ?", arguments: [user]) {
                    keyFile = name
                }
                try db.execute(sql: "DELETE FROM vault_keys WHERE user = ?", arguments: [user])
                // The event first: it belongs to the registration that is removed.
                try Self.append(event, db)
                try db.execute(sql: "DELETE FROM registrations WHERE user = ?", arguments: [user])
            }
        }
    }

    /// Records the identity of a directory registered before identities were kept
    /// (start-up, once its path passed the ancestor rule).
    nonisolated(nonsending) func recordIdentity(_ held: TurnHeld, path: String, _ identity: VaultDirectory.Identity, event: StoredEvent) async throws {
        let id = held.id
        return try await perform { [self] in
            try db.write { db in
                let user = try Self.user(of: id, db)
                try db.execute(
                    sql: "UPDATE directories SET device = ?, inode = ? WHERE user = ? AND path = ? AND device IS NULL",
                    arguments: [Int64(bitPattern: identity.device), Int64(bitPattern: identity.inode), user, path])
                try Self.append(event, db)
            }
        }
    }

    /// Records that registration `id` was warned about `threshold`, with its event, unless
    /// it already was: returns false then (or when the registration is gone), so a warning
    /// is given once however many evaluations race to give it.
    public nonisolated(nonsending) func markWarned(registration id: RegistrationID, threshold: String, event: StoredEvent) async throws -> Bool {
        try await perform { [self] in
            try db.write { db in
                try db.execute(
                    sql: "UPDATE registrations SET warned_threshold = ? WHERE id = ? AND warned_threshold IS NOT ?",
                    arguments: [threshold, id, threshold])
                guard db.changesCount == 1 else { return false }
                try Self.append(event, db)
                return true
            }
        }
    }

    /// Sets or clears why the vault of registration `id` could not be reached; `lockFailed` moves a
    /// `locked` registration to `lock-failed` (the lock is committed but not in force) and
    /// `lockHolds` moves `lock-failed` back to `locked` once a retry verified it.
    nonisolated(nonsending) func setVaultError(
        _ held: TurnHeld, _ error: String?, lockFailed: Bool = false, lockHolds: Bool = false, event: StoredEvent? = nil
    ) async throws {
        let id = held.id
        return try await perform { [self] in
            try db.write { db in
                let user = try Self.user(of: id, db)
                try db.execute(sql: "UPDATE registrations SET vault_error = ? WHERE user = ?", arguments: [error, user])
                if lockFailed {
                    try db.execute(
                        sql: "UPDATE registrations SET state = ? WHERE user = ? AND state = ?",
                        arguments: [RegistrationState.lockFailed.rawValue, user, RegistrationState.locked.rawValue])
                }
                if lockHolds {
                    try db.execute(
                        sql: "UPDATE registrations SET state = ? WHERE user = ? AND state = ?",
                        arguments: [RegistrationState.locked.rawValue, user, RegistrationState.lockFailed.rawValue])
                }
                if let event { try Self.append(event, db) }
            }
        }
    }
}
