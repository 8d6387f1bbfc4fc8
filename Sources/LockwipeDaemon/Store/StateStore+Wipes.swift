import Foundation
import GRDB
import LockwipeCore
import LockwipeProtocol

extension StateStore {
    public struct PendingWipe: Sendable, Equatable {
        public var user: String
        public var reason: String
        public var trigger: Trigger
        public var startedAt: Int64
        public var attempts: Int
    }

    /// Makes the intent to wipe durable before the first byte is touched.
    public nonisolated(nonsending) func commitWipeIntent(_ user: String, reason: String, trigger: Trigger, event: StoredEvent) async throws {
        try await perform { [self] in
            try db.write { db in
                try db.execute(
                    sql: "INSERT OR IGNORE INTO pending_wipes (user, reason, trigger, started_at) VALUES (?, ?, ?, ?)",
                    arguments: [user, reason, trigger.rawValue, event.time])
                try db.execute(sql: "UPDATE registrations SET state = ? WHERE user = ?", arguments: [RegistrationState.wipePending.rawValue, user])
                try Self.append(event, db)
            }
        }
    }

    public nonisolated(nonsending) func pendingWipes() async throws -> [PendingWipe] {
        try await perform { [self] in
            try db.read { db in
                try Row.fetchAll(db, sql: "SELECT * FROM pending_wipes ORDER BY started_at, user").map {
                    PendingWipe(
                        user: $0["user"], reason: $0["reason"], trigger: Trigger(rawValue: $0["trigger"]) ?? .resume,
                        startedAt: $0["started_at"], attempts: $0["attempts"])
                }
            }
        }
    }

    /// Marks the start of an attempt (state `wiping`), so a crash shows up as a resumed attempt.
    public nonisolated(nonsending) func beginWipeAttempt(_ user: String, event: StoredEvent?) async throws {
        try await perform { [self] in
            try db.write { db in
                try db.execute(sql: "UPDATE pending_wipes SET attempts = attempts + 1 WHERE user = ?", arguments: [user])
                try db.execute(sql: "UPDATE registrations SET state = ? WHERE user = ?", arguments: [RegistrationState.wiping.rawValue, user])
                if let event { try Self.append(event, db) }
            }
        }
    }

    /// Records the wipe's report. Only a complete wipe ends the pending intent and makes the
    /// registration `wiped`; an incomplete one stays pending and is retried.
    public nonisolated(nonsending) func finishWipe(_ user: String, summary: WipeSummary, event: StoredEvent) async throws {
        try await perform { [self] in
            let json = String(decoding: try JSONEncoder().encode(summary), as: UTF8.self)
            try db.write { db in
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
