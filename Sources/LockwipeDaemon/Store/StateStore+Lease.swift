import GRDB
import LockwipeCore

/// Offline leases (`OfflineLease`, `v15-offline-lease`): one per registration, the last
/// one granted, kept after it ended (status shows when it did).
extension StateStore {
    /// The lease stored in a `registrations` row, if any. A source this lockwiped does not
    /// know (a newer one wrote it) holds nothing off: the policy applies (fail closed).
    static func lease(from row: Row) -> OfflineLease? {
        guard let until: Int64 = row["lease_until"], let grantedAt: Int64 = row["lease_granted_at"],
            let source = (row["lease_source"] as String?).flatMap(OfflineLease.Source.init(rawValue:))
        else { return nil }
        return OfflineLease(until: until, grantedAt: grantedAt, source: source, reference: row["lease_reference"] ?? "", endedAt: row["lease_ended_at"])
    }

    /// Stores `lease` for registration `id` (replacing any earlier lease) and its event, in
    /// one transaction. Returns the registration as written (read in the same transaction);
    /// nil (and nothing recorded) when it is gone.
    nonisolated(nonsending) func grantLease(_ lease: OfflineLease, _ held: TurnHeld, event: StoredEvent) async throws -> RegistrationRecord? {
        let id = held.id
        return try await perform { [self] in
            try db.write { db in
                try db.execute(
                    sql: """
                        UPDATE registrations SET lease_until = ?, lease_granted_at = ?, lease_source = ?, lease_reference = ?, lease_ended_at = NULL,
                            lease_refused_until = NULL, lease_refused = NULL
                        WHERE id = ?
                        """,
                    arguments: [lease.until, lease.grantedAt, lease.source.rawValue, lease.reference, id])
                guard db.changesCount == 1 else { return nil }
                try Self.append(event, db)
                return try fetchRegistrations(db, only: id).first
            }
        }
    }

    /// Records that the lease of registration `id` that ends at `until` ended, with its
    /// event, unless that was recorded already (or another lease replaced it): returns false then.
    public nonisolated(nonsending) func endLease(registration id: RegistrationID, until: Int64, at time: Int64, event: StoredEvent) async throws -> Bool {
        try await perform { [self] in
            try db.write { db in
                try db.execute(
                    sql: "UPDATE registrations SET lease_ended_at = ? WHERE id = ? AND lease_until = ? AND lease_ended_at IS NULL",
                    arguments: [time, id, until])
                guard db.changesCount == 1 else { return false }
                try Self.append(event, db)
                return true
            }
        }
    }

    /// Records that the server's lease until `until` was refused for registration `id`,
    /// with its event, unless that refusal is recorded already: returns false then, so
    /// a server that keeps asking is refused in the history and the journal once.
    nonisolated(nonsending) func refuseServerLease(_ held: TurnHeld, until: Int64, reason: String, event: StoredEvent) async throws -> Bool {
        let id = held.id
        return try await perform { [self] in
            try db.write { db in
                try db.execute(
                    sql: "UPDATE registrations SET lease_refused_until = ?, lease_refused = ? WHERE id = ? AND lease_refused_until IS NOT ?",
                    arguments: [until, reason, id, until])
                guard db.changesCount == 1 else { return false }
                try Self.append(event, db)
                return true
            }
        }
    }

    /// The server no longer asks for the lease it was refused: status stops saying so.
    nonisolated(nonsending) func clearLeaseRefusal(_ held: TurnHeld) async throws {
        let id = held.id
        return try await perform { [self] in
            try db.write { db in
                try db.execute(
                    sql: "UPDATE registrations SET lease_refused_until = NULL, lease_refused = NULL WHERE id = ? AND lease_refused_until IS NOT NULL",
                    arguments: [id])
            }
        }
    }
}
