import GRDB
import LockwipeCore

/// The offline codes' rows (docs/offline-codes.md): the machine's challenge counter, which
/// only grows (modulo 2^20), and per registration its outstanding challenge and the wrong
/// responses in a row. Durable, so that a restart neither reuses a counter nor forgets a
/// back-off.
extension StateStore {
    /// The row of `user`, if it belongs to the registration `registrationID`.
    public nonisolated(nonsending) func offlineChallenge(_ user: String, registrationID: String) async throws -> OfflineChallengeRecord? {
        try await perform { [self] in
            try db.read { db in try Self.offlineChallenge(user, registrationID: registrationID, db) }
        }
    }

    static func offlineChallenge(_ user: String, registrationID: String, _ db: Database) throws -> OfflineChallengeRecord? {
        guard let row = try Row.fetchOne(db, sql: "SELECT * FROM offline_codes WHERE user = ? AND registration_id = ?", arguments: [user, registrationID])
        else { return nil }
        let counter: Int64? = row["counter"]
        return OfflineChallengeRecord(
            user: row["user"], registrationID: row["registration_id"], counter: counter.map { UInt32(truncatingIfNeeded: $0) }, days: row["days"],
            issuedAt: row["issued_at"], failures: row["failures"], failedAt: row["failed_at"])
    }

    /// Takes the machine's next counter and makes it `user`'s outstanding challenge
    /// (replacing any earlier one, keeping the wrong responses in a row of the same
    /// registration), recording `event`, in one transaction. Returns the counter.
    public nonisolated(nonsending) func issueOfflineChallenge(
        _ user: String, registrationID: String, days: Int, at time: Int64, event: @escaping @Sendable (UInt32) -> StoredEvent
    ) async throws -> UInt32 {
        let mask = Int64(1 << OfflineCode.counterBits) - 1
        return try await perform { [self] in
            try db.write { db in
                let next = try Int64.fetchOne(db, sql: "SELECT next FROM offline_code_counter WHERE id = 1") ?? 1
                try db.execute(
                    sql: "INSERT INTO offline_code_counter (id, next) VALUES (1, ?) ON CONFLICT(id) DO UPDATE SET next = excluded.next",
                    arguments: [(next + 1) & mask])
                let counter = UInt32(next & mask)
                try db.execute(
                    sql: """
                        INSERT INTO offline_codes (user, registration_id, counter, days, issued_at, failures, failed_at) VALUES (?, ?, ?, ?, ?, 0, NULL)
                        ON CONFLICT(user) DO UPDATE SET counter = excluded.counter, days = excluded.days, issued_at = excluded.issued_at,
                            failures = CASE WHEN registration_id = excluded.registration_id THEN failures ELSE 0 END,
                            failed_at = CASE WHEN registration_id = excluded.registration_id THEN failed_at ELSE NULL END,
                            registration_id = excluded.registration_id
                        """,
                    arguments: [user, registrationID, Int64(counter), days, time])
                try Self.append(event(counter), db)
                return counter
            }
        }
    }

    /// Counts a wrong response of `user` (durably, with its event); returns the count in a row.
    public nonisolated(nonsending) func recordOfflineCodeFailure(
        _ user: String, registrationID: String, at time: Int64, event: @escaping @Sendable (Int) -> StoredEvent
    ) async throws -> Int {
        try await perform { [self] in
            try db.write { db in
                try db.execute(
                    sql: "UPDATE offline_codes SET failures = failures + 1, failed_at = ? WHERE user = ? AND registration_id = ?",
                    arguments: [time, user, registrationID])
                let count = try Int.fetchOne(db, sql: "SELECT failures FROM offline_codes WHERE user = ?", arguments: [user]) ?? 0
                try Self.append(event(count), db)
                return count
            }
        }
    }

    /// Uses up `user`'s outstanding challenge `counter` (once: false when it is no longer
    /// outstanding), resets the wrong responses and records `event`, in one transaction.
    public nonisolated(nonsending) func useOfflineChallenge(_ user: String, registrationID: String, counter: UInt32, event: StoredEvent) async throws -> Bool {
        try await perform { [self] in
            try db.write { db in
                try db.execute(
                    sql: "UPDATE offline_codes SET counter = NULL, failures = 0, failed_at = NULL WHERE user = ? AND registration_id = ? AND counter = ?",
                    arguments: [user, registrationID, Int64(counter)])
                guard db.changesCount == 1 else { return false }
                try Self.append(event, db)
                return true
            }
        }
    }
}
