import GRDB
import LockwipeCore

extension StateStore {
    public nonisolated(nonsending) func append(_ event: StoredEvent) async throws {
        try await perform { [self] in
            try db.write { db in try Self.append(event, db) }
        }
    }

    static func append(_ e: StoredEvent, _ db: Database) throws {
        try db.execute(
            sql: "INSERT INTO events (time, user, kind, trigger, detail, certificate) VALUES (?, ?, ?, ?, ?, ?)",
            arguments: [e.time, e.user, e.kind, e.trigger?.rawValue, e.detail, e.certificate])
    }

    /// The newest `limit` events (of `user`, when given), oldest first.
    public nonisolated(nonsending) func events(user: String?, limit: Int) async throws -> [StoredEvent] {
        try await perform { [self] in
            try db.read { db in
                let rows =
                    user == nil
                    ? try Row.fetchAll(db, sql: "SELECT * FROM events ORDER BY id DESC LIMIT ?", arguments: [limit])
                    : try Row.fetchAll(db, sql: "SELECT * FROM events WHERE user = ? ORDER BY id DESC LIMIT ?", arguments: [user, limit])
                return rows.reversed().map {
                    StoredEvent(
                        time: $0["time"], user: $0["user"], kind: $0["kind"],
                        trigger: ($0["trigger"] as String?).flatMap(Trigger.init(rawValue:)), detail: $0["detail"],
                        certificate: $0["certificate"])
                }
            }
        }
    }
}
