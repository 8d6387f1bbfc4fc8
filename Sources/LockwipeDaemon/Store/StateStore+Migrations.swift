import Foundation
import GRDB
import LockwipeCore

extension StateStore {
    /// The migrations, for tests that build a database as an older version left it (up
    /// to a migration before `v6-key-files`, which would write key files to a directory
    /// that does not exist: use `migrate(path:keyFiles:upTo:)` for that).
    static var migratorForTesting: DatabaseMigrator { migrator(KeyFiles(stateDirectory: "/nonexistent")) }

    static func migrator(_ keyFiles: KeyFiles) -> DatabaseMigrator {
        var m = DatabaseMigrator()
        m.registerMigration("v1") { db in
            try db.execute(
                sql: """
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
            try db.execute(
                sql: """
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
            try db.execute(
                sql: """
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
            try db.execute(
                sql: """
                    ALTER TABLE registrations ADD COLUMN id TEXT;
                    UPDATE registrations SET id = lower(hex(randomblob(16))) WHERE id IS NULL;
                    CREATE UNIQUE INDEX registrations_id ON registrations(id);
                    """)
        }
        // A vault is an inode, not a path: the device and inode of each directory, recorded
        // at registration (NULL for older registrations until start-up records them), and
        // why the last action could not reach the vault.
        m.registerMigration("v5-vault-identity") { db in
            try db.execute(
                sql: """
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
        // OAuth 2.0 (`[server.oauth]`): a registration's refresh token, secret like the
        // token beside it, replaced in place when the server rotates it.
        m.registerMigration("v7-oauth-refresh-token") { db in
            try db.execute(sql: "ALTER TABLE credentials ADD COLUMN refresh_token TEXT")
        }
        // SAP Mobile Services: each registration's application connection (its id once
        // the server gave one, or why it did not), kept by registration id.
        m.registerMigration("v8-sap-connections") { db in
            try db.execute(
                sql: """
                    CREATE TABLE sap_connections (
                        registration_id TEXT PRIMARY KEY NOT NULL,
                        user TEXT NOT NULL,
                        connection_id TEXT,
                        problem TEXT,
                        updated_at INTEGER NOT NULL
                    );
                    """)
        }
        // Warnings before offline locks and wipes (`[notify] warn_before`): the threshold
        // a registration was last warned about, so a restart does not warn again and a
        // contact that moves the threshold does.
        m.registerMigration("v9-warned-threshold") { db in
            try db.execute(sql: "ALTER TABLE registrations ADD COLUMN warned_threshold TEXT")
        }
        // Sanitization certificates: one per wipe attempt, kept after the registration is
        // gone (an audit record); the wipe's result event names its certificate; a wipe's
        // requester (peer uid, server, policy, retry limit) is kept with its intent.
        m.registerMigration("v10-certificates") { db in
            try db.execute(
                sql: """
                    CREATE TABLE certificates (
                        id TEXT PRIMARY KEY,
                        user TEXT NOT NULL,
                        finished_at INTEGER NOT NULL,
                        complete INTEGER NOT NULL,
                        body TEXT NOT NULL
                    );
                    CREATE INDEX certificates_by_user ON certificates (user, finished_at);
                    ALTER TABLE events ADD COLUMN certificate TEXT;
                    ALTER TABLE pending_wipes ADD COLUMN requester TEXT;
                    """)
        }
        // History and certificates belong to a registration (its uid and id), not to a
        // name a later, unrelated account may carry. What can be known is kept: the events
        // of a registration that still exists, from its own `register` event on (the newest
        // of that name: a name has one registration at a time), and the certificates those
        // events name. Everything older (earlier registrations of the name, names no longer
        // registered) stays unattributed: administrators see it, no user does.
        m.registerMigration("v11-event-owners") { db in
            try db.execute(
                sql: """
                    ALTER TABLE events ADD COLUMN uid INTEGER;
                    ALTER TABLE events ADD COLUMN registration_id TEXT;
                    ALTER TABLE certificates ADD COLUMN uid INTEGER;
                    ALTER TABLE certificates ADD COLUMN registration_id TEXT;
                    UPDATE events
                        SET uid = (SELECT r.uid FROM registrations r WHERE r.user = events.user),
                            registration_id = (SELECT r.id FROM registrations r WHERE r.user = events.user)
                        WHERE EXISTS (SELECT 1 FROM registrations r WHERE r.user = events.user)
                          AND events.id >= (SELECT max(e.id) FROM events e WHERE e.user = events.user AND e.kind = 'register');
                    UPDATE certificates
                        SET uid = (SELECT e.uid FROM events e WHERE e.certificate = certificates.id AND e.registration_id IS NOT NULL),
                            registration_id = (SELECT e.registration_id FROM events e WHERE e.certificate = certificates.id AND e.registration_id IS NOT NULL)
                        WHERE EXISTS (SELECT 1 FROM events e WHERE e.certificate = certificates.id AND e.registration_id IS NOT NULL);
                    CREATE INDEX events_owner ON events(uid, user, id);
                    """)
        }
        // Who asked for an event on the control socket (issue 27): its uid, pid and comm.
        // Older events keep NULL: what asked for them is unknown.
        m.registerMigration("v12-event-requesters") { db in
            try db.execute(
                sql: """
                    ALTER TABLE events ADD COLUMN requester_uid INTEGER;
                    ALTER TABLE events ADD COLUMN requester_pid INTEGER;
                    ALTER TABLE events ADD COLUMN requester_comm TEXT;
                    """)
        }
        // The server rejects the registration (issue 29): reached, but refusing it. NULL:
        // not rejected (as every registration was before).
        m.registerMigration("v13-server-rejection") { db in
            try db.execute(
                sql: """
                    ALTER TABLE server_state ADD COLUMN rejected_status INTEGER;
                    ALTER TABLE server_state ADD COLUMN rejected_text TEXT;
                    ALTER TABLE server_state ADD COLUMN rejected_since INTEGER;
                    """)
        }
        // SAP's full reset after a wipe: when a registration's credentials and connection id
        // were forgotten, the connection given up, and what its DELETE came to.
        m.registerMigration("v14-sap-reset") { db in
            try db.execute(
                sql: """
                    ALTER TABLE sap_connections ADD COLUMN reset_at INTEGER;
                    ALTER TABLE sap_connections ADD COLUMN reset_connection TEXT;
                    ALTER TABLE sap_connections ADD COLUMN reset_result TEXT;
                    """)
        }
        // Offline leases (issue 30): a registration may stay offline until `lease_until`
        // (wall clock), granted at `lease_granted_at` by `lease_source` ("offline-code" or
        // "server") for `lease_reference` (the challenge it answered, or the server);
        // `lease_ended_at` once its end was recorded. NULL: no lease. The lease the
        // server asks for and that was refused (`lease_refused_until`, and why): recorded
        // once, not at every check-in, and shown in status until the server stops asking.
        m.registerMigration("v15-offline-lease") { db in
            try db.execute(
                sql: """
                    ALTER TABLE registrations ADD COLUMN lease_until INTEGER;
                    ALTER TABLE registrations ADD COLUMN lease_granted_at INTEGER;
                    ALTER TABLE registrations ADD COLUMN lease_source TEXT;
                    ALTER TABLE registrations ADD COLUMN lease_reference TEXT;
                    ALTER TABLE registrations ADD COLUMN lease_ended_at INTEGER;
                    ALTER TABLE registrations ADD COLUMN lease_refused_until INTEGER;
                    ALTER TABLE registrations ADD COLUMN lease_refused TEXT;
                    """)
        }
        // Offline codes (issue 30): the machine's challenge counter, and per registration
        // its outstanding challenge and wrong responses in a row (StateStore+OfflineCodes).
        m.registerMigration("v16-offline-codes") { db in
            try db.execute(
                sql: """
                    CREATE TABLE offline_code_counter (id INTEGER PRIMARY KEY CHECK (id = 1), next INTEGER NOT NULL);
                    CREATE TABLE offline_codes (
                        user TEXT PRIMARY KEY,
                        registration_id TEXT NOT NULL,
                        counter INTEGER,
                        days INTEGER NOT NULL DEFAULT 0,
                        issued_at INTEGER,
                        failures INTEGER NOT NULL DEFAULT 0,
                        failed_at INTEGER
                    );
                    """)
        }
        // A server or offline lock that a contact made liftable (`[lock] lift_after_contact =
        // "at-login"`, `PolicyLockLift`): it waits for its user's login or passcode. Any
        // later write of the state or the lock trigger (a lock again, an unlock, a hand-back,
        // a wipe) clears it, in the same statement's transaction, so that no path can leave a
        // new lock liftable by an old contact.
        m.registerMigration("v17-lock-liftable") { db in
            try db.execute(
                sql: """
                    ALTER TABLE registrations ADD COLUMN lock_liftable INTEGER NOT NULL DEFAULT 0;
                    CREATE TRIGGER registrations_lock_liftable_cleared AFTER UPDATE OF state, lock_trigger ON registrations
                    BEGIN
                        UPDATE registrations SET lock_liftable = 0 WHERE rowid = NEW.rowid AND lock_liftable != 0;
                    END;
                    """)
        }
        // History a user cannot weaponise (issue 40, finding 5; HistoryRetention): a run of
        // refusals is one event with `repeats` and the time of its last (`last_time`); the
        // history is pruned per registration (the index). Details recorded before were not
        // bounded: one longer than the bound is cut to it here, marked as cut.
        m.registerMigration("v18-event-repeats") { db in
            try db.execute(
                sql: """
                    ALTER TABLE events ADD COLUMN repeats INTEGER;
                    ALTER TABLE events ADD COLUMN last_time INTEGER;
                    CREATE INDEX events_registration ON events(registration_id, id);
                    """)
            try db.execute(
                sql: "UPDATE events SET detail = substr(detail, 1, ?) || ' … (cut: ' || length(CAST(detail AS BLOB)) || ' bytes)' WHERE length(CAST(detail AS BLOB)) > ?",
                arguments: [HistoryRetention.maxDetailBytes / 4, HistoryRetention.maxDetailBytes])
        }
        // Offline codes that never replay (issue 40, finding 1): the counter belongs to a key
        // epoch and never wraps, and each registration's challenges are counted in a window.
        m.registerMigration("v19-offline-code-epochs") { db in
            try db.execute(
                sql: """
                    ALTER TABLE offline_code_counter ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE offline_codes ADD COLUMN window_start INTEGER;
                    ALTER TABLE offline_codes ADD COLUMN window_count INTEGER NOT NULL DEFAULT 0;
                    """)
        }
        // Advice that fits (issue 42): the server URL a rejection came from, so that it is
        // forgotten once that server is no longer the one configured (NULL: recorded
        // before this column, forgotten at the first start that has it).
        m.registerMigration("v20-rejected-server") { db in
            try db.execute(sql: "ALTER TABLE server_state ADD COLUMN rejected_server TEXT")
        }
        // What a copy of the disk gets (issue 43): the wrap format of the key file the row
        // names, so that status tells a passcode wrap that also needs the sealed machine key
        // (format 3) from one a passcode alone opens, without reading the key file. NULL:
        // written before this column (format 2 or older; wrapped again at the next unlock).
        m.registerMigration("v21-wrap-format") { db in
            try db.execute(sql: "ALTER TABLE vault_keys ADD COLUMN wrap_format INTEGER")
        }
        // A registration's own outbox directory (issue 44, `register --outbox`); NULL: the
        // configuration's `[outbox] directory`.
        m.registerMigration("v22-outbox") { db in
            try db.execute(sql: "ALTER TABLE registrations ADD COLUMN outbox TEXT")
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
}
