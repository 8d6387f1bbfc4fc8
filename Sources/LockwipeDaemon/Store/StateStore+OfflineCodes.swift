import GRDB
import LockwipeCore

/// The offline codes' rows (docs/offline-codes.md): the machine's challenge counter, which
/// only grows and never wraps within its key epoch, and per registration its outstanding challenge and the wrong
/// responses in a row. Durable, so that a restart neither reuses a counter nor forgets a
/// back-off.
extension StateStore {
    /// The row of registration `id`, if it has one.
    public nonisolated(nonsending) func offlineChallenge(registration id: RegistrationID) async throws -> OfflineChallengeRecord? {
        try await perform { [self] in
            try db.read { db in try Self.offlineChallenge(try Self.user(of: id, db), registrationID: id, db) }
        }
    }

    static func offlineChallenge(_ user: String, registrationID: RegistrationID, _ db: Database) throws -> OfflineChallengeRecord? {
        guard let row = try Row.fetchOne(db, sql: "SELECT * FROM offline_codes WHERE user = ? AND registration_id = ?", arguments: [user, registrationID])
        else { return nil }
        let counter: Int64? = row["counter"]
        return OfflineChallengeRecord(
            user: row["user"], registrationID: row["registration_id"], counter: counter.map { UInt32(truncatingIfNeeded: $0) }, days: row["days"],
            issuedAt: row["issued_at"], failures: row["failures"], failedAt: row["failed_at"])
    }

    /// The key epoch the machine's counters are of, and whether its counters are used up
    /// (`OfflineCode.countersPerEpoch`): provisioning is then for the next epoch.
    public nonisolated(nonsending) func offlineCodeEpoch() async throws -> (epoch: Int, usedUp: Bool) {
        try await perform { [self] in
            try db.read { db in
                let row = try Row.fetchOne(db, sql: "SELECT next, epoch FROM offline_code_counter WHERE id = 1")
                let next: Int64 = row?["next"] ?? 1
                let epoch: Int = row?["epoch"] ?? 0
                return (epoch, next > OfflineCode.countersPerEpoch)
            }
        }
    }

    /// Moves the counters to key epoch `epoch` (the one after the stored one), counting
    /// from 1 again: what provisioning does, before it stores the new epoch's key, once the
    /// old epoch's counters are used up. False (nothing written) when the stored epoch is
    /// not the one before `epoch`.
    public nonisolated(nonsending) func advanceOfflineCodeEpoch(to epoch: Int, event: StoredEvent?) async throws -> Bool {
        try await perform { [self] in
            try db.write { db in
                let current = try Int.fetchOne(db, sql: "SELECT epoch FROM offline_code_counter WHERE id = 1") ?? 0
                guard epoch == current + 1 else { return false }
                try db.execute(
                    sql: "INSERT INTO offline_code_counter (id, next, epoch) VALUES (1, 1, ?) ON CONFLICT(id) DO UPDATE SET next = 1, epoch = excluded.epoch",
                    arguments: [epoch])
                // Challenges of the old epoch are outstanding no more: their key is gone.
                try db.execute(sql: "UPDATE offline_codes SET counter = NULL")
                if let event { try Self.append(event, db) }
                return true
            }
        }
    }

    /// Takes the machine's next counter of key epoch `epoch` and makes it registration
    /// `registrationID`'s outstanding challenge (replacing any earlier one, keeping the wrong responses in a
    /// row of the same registration), recording `event`, in one transaction. A counter is
    /// never issued twice in one epoch: once they are used up the answer says so, and
    /// nothing is written; so does a registration that asked `OfflineChallengeRate`'s
    /// limit already.
    nonisolated(nonsending) func issueOfflineChallenge(
        _ held: TurnHeld, days: Int, epoch: Int, at time: Int64, event: @escaping @Sendable (UInt32) -> StoredEvent
    ) async throws -> OfflineChallengeIssue {
        let registrationID = held.id
        return try await perform { [self] in
            try db.write { db in
                let user = try Self.user(of: registrationID, db)
                let row = try Row.fetchOne(db, sql: "SELECT next, epoch FROM offline_code_counter WHERE id = 1")
                let next: Int64 = row?["next"] ?? 1
                let stored: Int = row?["epoch"] ?? 0
                guard stored == epoch else { return .epochChanged(now: stored) }
                guard next >= 1, next <= OfflineCode.countersPerEpoch else { return .usedUp(epoch: stored) }
                let previous = try Row.fetchOne(
                    db, sql: "SELECT window_start, window_count FROM offline_codes WHERE user = ? AND registration_id = ?",
                    arguments: [user, registrationID])
                let window: OfflineChallengeRate.Window? = (previous?["window_start"] as Int64?).map {
                    OfflineChallengeRate.Window(start: $0, count: previous?["window_count"] ?? 0)
                }
                let allowed: OfflineChallengeRate.Window
                switch OfflineChallengeRate.decide(after: window, now: time) {
                case .refused(let until): return .tooSoon(until: until)
                case .allowed(let w): allowed = w
                }
                try db.execute(
                    sql: "INSERT INTO offline_code_counter (id, next, epoch) VALUES (1, ?, ?) ON CONFLICT(id) DO UPDATE SET next = excluded.next",
                    arguments: [next + 1, stored])
                let counter = UInt32(next)
                try db.execute(
                    sql: """
                        INSERT INTO offline_codes (user, registration_id, counter, days, issued_at, failures, failed_at, window_start, window_count)
                            VALUES (?, ?, ?, ?, ?, 0, NULL, ?, ?)
                        ON CONFLICT(user) DO UPDATE SET counter = excluded.counter, days = excluded.days, issued_at = excluded.issued_at,
                            failures = CASE WHEN registration_id = excluded.registration_id THEN failures ELSE 0 END,
                            failed_at = CASE WHEN registration_id = excluded.registration_id THEN failed_at ELSE NULL END,
                            window_start = excluded.window_start, window_count = excluded.window_count,
                            registration_id = excluded.registration_id
                        """,
                    arguments: [user, registrationID, Int64(counter), days, time, allowed.start, allowed.count])
                try Self.append(event(counter), db)
                return .issued(counter: counter)
            }
        }
    }

    /// Counts a wrong response to registration `registrationID`'s challenge (durably, with
    /// its event); returns the count in a row.
    nonisolated(nonsending) func recordOfflineCodeFailure(
        _ held: TurnHeld, at time: Int64, event: @escaping @Sendable (Int) -> StoredEvent
    ) async throws -> Int {
        let registrationID = held.id
        return try await perform { [self] in
            try db.write { db in
                try db.execute(
                    sql: "UPDATE offline_codes SET failures = failures + 1, failed_at = ? WHERE registration_id = ?",
                    arguments: [time, registrationID])
                let count = try Int.fetchOne(db, sql: "SELECT failures FROM offline_codes WHERE registration_id = ?", arguments: [registrationID]) ?? 0
                try Self.append(event(count), db)
                return count
            }
        }
    }

    /// Uses up registration `id`'s outstanding challenge `counter` (once: false when it is no longer
    /// outstanding), resets the wrong responses and records `event`, in one transaction.
    nonisolated(nonsending) func useOfflineChallenge(_ held: TurnHeld, counter: UInt32, event: StoredEvent) async throws -> Bool {
        let id = held.id
        return try await perform { [self] in
            try db.write { db in
                try db.execute(
                    sql: "UPDATE offline_codes SET counter = NULL, failures = 0, failed_at = NULL WHERE registration_id = ? AND counter = ?",
                    arguments: [id, Int64(counter)])
                guard db.changesCount == 1 else { return false }
                try Self.append(event, db)
                return true
            }
        }
    }
}
