import Foundation
import GRDB
import LockwipeCore

extension StateStore {
    public struct PendingWipe: Sendable, Equatable {
        /// The registration it is of (the one that holds `user`).
        public var registrationID: RegistrationID
        public var user: String
        public var reason: String
        public var trigger: Trigger
        public var startedAt: Int64
        public var attempts: Int
        public var requester: WipeRequester
    }

    /// Makes the intent to wipe durable before the first byte is touched.
    /// Returns the registration as written.
    @discardableResult
    nonisolated(nonsending) func commitWipeIntent(
        _ held: TurnHeld, reason: String, trigger: Trigger, requester: WipeRequester = WipeRequester(), event: StoredEvent
    ) async throws -> RegistrationRecord? {
        let id = held.id
        return try await perform { [self] in
            let requesterJSON = String(decoding: try StoredJSON.encoder().encode(requester), as: UTF8.self)
            return try db.write { db in
                let user = try Self.user(of: id, db)
                try db.execute(
                    sql: "INSERT OR IGNORE INTO pending_wipes (user, reason, trigger, started_at, requester) VALUES (?, ?, ?, ?, ?)",
                    arguments: [user, reason, trigger.rawValue, event.time, requesterJSON])
                try db.execute(sql: "UPDATE registrations SET state = ? WHERE user = ?", arguments: [RegistrationState.wipePending.rawValue, user])
                try Self.append(event, db)
                return try fetchRegistrations(db, user: user).first
            }
        }
    }

    public nonisolated(nonsending) func pendingWipes() async throws -> [PendingWipe] {
        try await perform { [self] in
            try db.read { db in
                try Row.fetchAll(
                    db, sql: "SELECT p.*, r.id AS registration_id FROM pending_wipes p JOIN registrations r ON r.user = p.user ORDER BY p.started_at, p.user"
                ).map(pendingWipe(from:))
            }
        }
    }

    public nonisolated(nonsending) func pendingWipe(registration id: RegistrationID) async throws -> PendingWipe? {
        try await perform { [self] in
            try db.read { db in
                let user = try Self.user(of: id, db)
                return try Row.fetchOne(db, sql: "SELECT *, ? AS registration_id FROM pending_wipes WHERE user = ?", arguments: [id, user]).map(pendingWipe(from:))
            }
        }
    }

    private func pendingWipe(from row: Row) -> PendingWipe {
        // Intents stored before v10-certificates have no requester.
        let requester = decodeStored(WipeRequester.self, row["requester"], "who asked for the pending wipe of \(row["user"] as String)")
        return PendingWipe(
            registrationID: row["registration_id"], user: row["user"], reason: row["reason"], trigger: Trigger(rawValue: row["trigger"]) ?? .resume,
            startedAt: row["started_at"], attempts: row["attempts"], requester: requester ?? WipeRequester())
    }

    /// Marks the start of an attempt (state `wiping`), so a crash shows up as a resumed attempt.
    nonisolated(nonsending) func beginWipeAttempt(_ held: TurnHeld, event: StoredEvent?) async throws {
        let id = held.id
        return try await perform { [self] in
            try db.write { db in
                let user = try Self.user(of: id, db)
                try db.execute(sql: "UPDATE pending_wipes SET attempts = attempts + 1 WHERE user = ?", arguments: [user])
                try db.execute(sql: "UPDATE registrations SET state = ? WHERE user = ?", arguments: [RegistrationState.wiping.rawValue, user])
                if let event { try Self.append(event, db) }
            }
        }
    }

    /// Records the wipe's report and its certificate, with the result event that names it,
    /// in one transaction. Only a complete wipe ends the pending intent and makes the
    /// registration `wiped`; an incomplete one stays pending and is retried.
    nonisolated(nonsending) func finishWipe(
        _ held: TurnHeld, summary: WipeSummary, certificate: SanitizationCertificate? = nil, event: StoredEvent
    ) async throws {
        let id = held.id
        return try await perform { [self] in
            let json = String(decoding: try StoredJSON.encoder().encode(summary), as: UTF8.self)
            let certificateJSON = try certificate.map { String(decoding: try Self.certificateEncoder.encode($0), as: UTF8.self) }
            var event = event
            event.certificate = certificate?.id
            try db.write { db in
                let user = try Self.user(of: id, db)
                if let certificate, let certificateJSON {
                    try db.execute(
                        sql: """
                            INSERT INTO certificates (id, user, finished_at, complete, body, uid, registration_id)
                            VALUES (?, ?, ?, ?, ?, (SELECT uid FROM registrations WHERE id = ?), ?)
                            """,
                        arguments: [certificate.id, user, event.time, summary.complete, certificateJSON, id, id])
                }
                if summary.complete {
                    try db.execute(sql: "DELETE FROM pending_wipes WHERE user = ?", arguments: [user])
                    try db.execute(sql: "DELETE FROM lock_records WHERE user = ?", arguments: [user])
                    try db.execute(
                        sql: "UPDATE registrations SET state = ?, last_wipe = ?, vault_error = NULL WHERE user = ?",
                        arguments: [RegistrationState.wiped.rawValue, json, user])
                } else {
                    try db.execute(
                        sql: "UPDATE registrations SET state = ?, last_wipe = ? WHERE user = ?",
                        arguments: [RegistrationState.wipePending.rawValue, json, user])
                }
                try Self.append(event, db)
            }
        }
    }
}

extension StateStore {
    static let certificateEncoder = StoredJSON.encoder(sortedKeys: true)

    /// The newest certificate of `user`'s wipes, or the one with `id`. With `owner`, only
    /// a certificate that belongs to a registration of that uid (`Ownership.ownsRecord`).
    public nonisolated(nonsending) func certificate(user: String, id: String? = nil, owner: UInt32? = nil) async throws -> SanitizationCertificate? {
        try await perform { [self] in
            let row = try db.read { db in
                let owned = owner == nil ? "" : " AND uid = ? AND registration_id IS NOT NULL"
                var arguments: [any DatabaseValueConvertible] = [user]
                if let id { arguments.append(id) }
                if let owner { arguments.append(Int64(owner)) }
                return id == nil
                    ? try Row.fetchOne(
                        db, sql: "SELECT body, uid, registration_id FROM certificates WHERE user = ?\(owned) ORDER BY finished_at DESC, rowid DESC LIMIT 1",
                        arguments: StatementArguments(arguments))
                    : try Row.fetchOne(
                        db, sql: "SELECT body, uid, registration_id FROM certificates WHERE user = ? AND id = ?\(owned)", arguments: StatementArguments(arguments))
            }
            guard let row else { return nil }
            if let owner {
                let uid = (row["uid"] as Int64?).map { UInt32(truncatingIfNeeded: $0) }
                guard Ownership.ownsRecord(uid: uid, registrationID: row["registration_id"], callerUID: owner) else { return nil }
            }
            let body: String = row["body"]
            return try StoredJSON.decoder().decode(SanitizationCertificate.self, from: Data(body.utf8))
        }
    }

    /// The certificates with these ids (those the history's events name).
    public nonisolated(nonsending) func certificates(ids: [String]) async throws -> [String: SanitizationCertificate] {
        guard !ids.isEmpty else { return [:] }
        return try await perform { [self] in
            let rows = try db.read { db in
                try Row.fetchAll(db, sql: "SELECT id, body FROM certificates WHERE id IN (\(ids.map { _ in "?" }.joined(separator: ",")))", arguments: StatementArguments(ids))
            }
            var out: [String: SanitizationCertificate] = [:]
            for row in rows {
                let body: String = row["body"]
                out[row["id"]] = try StoredJSON.decoder().decode(SanitizationCertificate.self, from: Data(body.utf8))
            }
            return out
        }
    }
}
