import GRDB
import LockwipeCore

extension StateStore {
    public nonisolated(nonsending) func append(_ event: StoredEvent) async throws {
        try await perform { [self] in
            try db.write { db in try Self.append(event, db) }
        }
    }

    /// Records `e` as an event of the registration `e.user` has now (its uid and id, read
    /// in the same transaction): history belongs to a registration, not to a name that a
    /// later, unrelated account may carry. Callers that remove a registration append its
    /// last event before the row goes.
    static func append(_ e: StoredEvent, _ db: Database) throws {
        try db.execute(
            sql: """
                INSERT INTO events (time, user, kind, trigger, detail, certificate, uid, registration_id, requester_uid, requester_pid, requester_comm)
                VALUES (?, ?, ?, ?, ?, ?, (SELECT uid FROM registrations WHERE user = ?), (SELECT id FROM registrations WHERE user = ?), ?, ?, ?)
                """,
            arguments: [
                e.time, e.user, e.kind.rawValue, e.trigger?.rawValue, e.detail, e.certificate, e.user, e.user, e.requester.map { Int64($0.uid) },
                e.requester.map { Int64($0.pid) }, e.requester?.comm,
            ])
    }

    /// The newest `limit` events (of `user`, when given), oldest first. With `owner`, only
    /// the events that belong to a registration of that uid (`Ownership.ownsRecord`).
    public nonisolated(nonsending) func events(user: String?, limit: Int, owner: UInt32? = nil, since: Int64? = nil) async throws -> [StoredEvent] {
        try await perform { [self] in
            try db.read { db in
                var conditions: [String] = []
                var arguments: [any DatabaseValueConvertible] = []
                if let user {
                    conditions.append("user = ?")
                    arguments.append(user)
                }
                if let owner {
                    conditions.append("uid = ? AND registration_id IS NOT NULL")
                    arguments.append(Int64(owner))
                }
                if let since {
                    conditions.append("time >= ?")
                    arguments.append(since)
                }
                arguments.append(limit)
                let filter = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
                let rows = try Row.fetchAll(
                    db, sql: "SELECT * FROM events \(filter) ORDER BY id DESC LIMIT ?", arguments: StatementArguments(arguments))
                let events = try rows.reversed().map(Self.storedEvent(from:))
                guard let owner else { return events }
                return events.filter { Ownership.ownsRecord(uid: $0.uid, registrationID: $0.registrationID, callerUID: owner) }
            }
        }
    }

    /// An event row as a `StoredEvent`. A kind this lockwiped does not know (the row was
    /// written by a newer one, before a downgrade) fails the read and says so: history is
    /// the audit trail, not shown with an event left out or renamed.
    static func storedEvent(from row: Row) throws -> StoredEvent {
        let kind: String = row["kind"]
        guard let known = EventKind(rawValue: kind) else { throw UnknownEventKind(kind: kind, id: row["id"]) }
        return StoredEvent(
            time: row["time"], user: row["user"], kind: known, trigger: (row["trigger"] as String?).flatMap(Trigger.init(rawValue:)),
            detail: row["detail"], certificate: row["certificate"], uid: (row["uid"] as Int64?).map { UInt32(truncatingIfNeeded: $0) },
            registrationID: row["registration_id"],
            requester: (row["requester_uid"] as Int64?).map {
                StoredEvent.Requester(
                    uid: UInt32(truncatingIfNeeded: $0), pid: Int32(truncatingIfNeeded: row["requester_pid"] as Int64? ?? 0), comm: row["requester_comm"])
            })
    }
}
