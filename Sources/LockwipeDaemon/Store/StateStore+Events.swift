import GRDB
import LockwipeCore

extension StateStore {
    public nonisolated(nonsending) func append(_ event: StoredEvent) async throws {
        try await perform { [self] in
            try db.write { db in try Self.append(event, db) }
        }
    }

    /// Records a refusal that nothing counts (`HistoryRetention.Rule.repeatable`): counted
    /// into the registration's newest event when it is a run of the same refusals
    /// (`HistoryRetention.merges`), else recorded as the first of a run. Returns how many
    /// refusals the run holds now (1: a new event).
    @discardableResult
    public nonisolated(nonsending) func appendRepeatable(_ event: StoredEvent) async throws -> Int {
        try await perform { [self] in
            try db.write { db in try Self.appendRepeatable(event, db) }
        }
    }

    static func appendRepeatable(_ e: StoredEvent, _ db: Database) throws -> Int {
        let key = HistoryRetention.RepeatKey(kind: e.kind, trigger: e.trigger, requesterUID: e.requester?.uid)
        if let registrationID = try RegistrationID.fetchOne(db, sql: "SELECT id FROM registrations WHERE user = ?", arguments: [e.user]),
            let row = try Row.fetchOne(
                db, sql: "SELECT id, kind, trigger, requester_uid, time, repeats FROM events WHERE registration_id = ? ORDER BY id DESC LIMIT 1",
                arguments: [registrationID]),
            let kind = EventKind(rawValue: row["kind"])
        {
            let newest = HistoryRetention.Newest(
                key: HistoryRetention.RepeatKey(
                    kind: kind, trigger: (row["trigger"] as String?).flatMap(Trigger.init(rawValue:)),
                    requesterUID: (row["requester_uid"] as Int64?).map { UInt32(truncatingIfNeeded: $0) }),
                time: row["time"], repeats: row["repeats"])
            if HistoryRetention.merges(key, at: e.time, into: newest) {
                let id: Int64 = row["id"]
                try db.execute(
                    sql: "UPDATE events SET repeats = repeats + 1, last_time = ?, detail = ?, requester_pid = ?, requester_comm = ? WHERE id = ?",
                    arguments: [e.time, HistoryRetention.bounded(detail: e.detail), e.requester.map { Int64($0.pid) }, e.requester?.comm, id])
                return (newest.repeats ?? 0) + 1
            }
        }
        var first = e
        first.repeats = 1
        first.lastTime = nil
        try append(first, db)
        return 1
    }

    /// Records `e` as an event of the registration `e.user` has now (its uid and id, read
    /// in the same transaction): history belongs to a registration, not to a name that a
    /// later, unrelated account may carry. Callers that remove a registration append its
    /// last event before the row goes. Its detail is bounded (`HistoryRetention.bounded`),
    /// and the registration's history is pruned as `HistoryRetention` says, in the same
    /// transaction.
    static func append(_ e: StoredEvent, _ db: Database) throws {
        try db.execute(
            sql: """
                INSERT INTO events (time, user, kind, trigger, detail, certificate, uid, registration_id, requester_uid, requester_pid, requester_comm,
                    repeats, last_time)
                VALUES (?, ?, ?, ?, ?, ?, (SELECT uid FROM registrations WHERE user = ?), (SELECT id FROM registrations WHERE user = ?), ?, ?, ?, ?, ?)
                """,
            arguments: [
                e.time, e.user, e.kind.rawValue, e.trigger?.rawValue, HistoryRetention.bounded(detail: e.detail), e.certificate, e.user, e.user,
                e.requester.map { Int64($0.uid) }, e.requester.map { Int64($0.pid) }, e.requester?.comm, e.repeats, e.lastTime,
            ])
        if let registrationID = try RegistrationID.fetchOne(db, sql: "SELECT registration_id FROM events WHERE id = ?", arguments: [db.lastInsertedRowID]) {
            try pruneHistory(registrationID: registrationID, rule: HistoryRetention.rule(for: e.kind), now: e.time, db)
        }
    }

    /// Prunes the history of the registration `registrationID` (`HistoryRetention`): the
    /// events of `rule` past its count, oldest first, and every event that is not `kept`
    /// older than `maxAge` before `now`.
    static func pruneHistory(registrationID: RegistrationID, rule: HistoryRetention.Rule, now: Int64, _ db: Database) throws {
        if let max = HistoryRetention.maxEvents(rule) {
            let kinds = EventKind.allCases.filter { HistoryRetention.rule(for: $0) == rule }.map(\.rawValue)
            let list = kinds.map { _ in "?" }.joined(separator: ", ")
            try db.execute(
                sql: """
                    DELETE FROM events WHERE registration_id = ? AND kind IN (\(list)) AND id <= (
                        SELECT id FROM events WHERE registration_id = ? AND kind IN (\(list)) ORDER BY id DESC LIMIT 1 OFFSET ?)
                    """,
                arguments: StatementArguments([registrationID.rawValue] + kinds + [registrationID.rawValue] + kinds) + [max])
        }
        let kept = EventKind.allCases.filter { HistoryRetention.rule(for: $0) == .kept }.map(\.rawValue)
        try db.execute(
            sql: "DELETE FROM events WHERE registration_id = ? AND coalesce(last_time, time) < ? AND kind NOT IN (\(kept.map { _ in "?" }.joined(separator: ", ")))",
            arguments: StatementArguments([registrationID]) + [now - HistoryRetention.maxAge] + StatementArguments(kept))
    }

    /// Prunes every registration's history (`pruneHistory(registrationID:rule:now:_:)`)
    /// and the events that belong to none, by age: at start-up, so that a registration
    /// that records nothing more is pruned too, and a database from before these bounds
    /// is brought within them. Returns how many events went.
    public nonisolated(nonsending) func pruneHistory(now: Int64) async throws -> Int {
        try await perform { [self] in
            try db.write { db in
                let before = db.totalChangesCount
                for id in try RegistrationID.fetchAll(db, sql: "SELECT DISTINCT registration_id FROM events WHERE registration_id IS NOT NULL") {
                    for rule in [HistoryRetention.Rule.repeatable, .standard] { try Self.pruneHistory(registrationID: id, rule: rule, now: now, db) }
                }
                let kept = EventKind.allCases.filter { HistoryRetention.rule(for: $0) == .kept }.map(\.rawValue)
                try db.execute(
                    sql: "DELETE FROM events WHERE registration_id IS NULL AND coalesce(last_time, time) < ? AND kind NOT IN (\(kept.map { _ in "?" }.joined(separator: ", ")))",
                    arguments: [now - HistoryRetention.maxAge] + StatementArguments(kept))
                return db.totalChangesCount - before
            }
        }
    }

    /// When each registration's outbox was last sealed and a sealed outbox of it last
    /// uploaded (`outbox-sealed`, `outbox-uploaded`), for `status`: one read for all.
    public nonisolated(nonsending) func lastOutboxEvents() async throws -> [RegistrationID: (sealed: Int64?, uploaded: Int64?)] {
        try await perform { [self] in
            try db.read { db in
                var found: [RegistrationID: (sealed: Int64?, uploaded: Int64?)] = [:]
                let rows = try Row.fetchAll(
                    db,
                    sql: """
                        SELECT registration_id, kind, MAX(time) AS time FROM events
                        WHERE kind IN (?, ?) AND registration_id IS NOT NULL GROUP BY registration_id, kind
                        """, arguments: [EventKind.outboxSealed.rawValue, EventKind.outboxUploaded.rawValue])
                for row in rows {
                    let id = RegistrationID(row["registration_id"] as String)
                    let time: Int64 = row["time"]
                    var entry = found[id] ?? (nil, nil)
                    if (row["kind"] as String) == EventKind.outboxSealed.rawValue { entry.sealed = time } else { entry.uploaded = time }
                    found[id] = entry
                }
                return found
            }
        }
    }

    /// The newest `limit` events (of `user`, when given), oldest first. With `owner`, only
    /// the events that belong to a registration of that uid (`Ownership.ownsRecord`).
    public nonisolated(nonsending) func events(user: String?, limit: Int, owner: UInt32? = nil, since: Int64? = nil) async throws -> [StoredEvent] {
        try await history(user: user, limit: limit, owner: owner, since: since, maxBytes: .max).events
    }

    /// As `events`, at most `maxBytes` of them as a reply carries them
    /// (`HistoryRetention.eventBytes`): read newest first, one row at a time, stopping at
    /// the bound, so that what is stored never decides how much is held in memory.
    /// `truncated`: older events were left out for the bound.
    public nonisolated(nonsending) func history(
        user: String?, limit: Int, owner: UInt32? = nil, since: Int64? = nil, maxBytes: Int
    ) async throws -> (events: [StoredEvent], truncated: Bool) {
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
                let rows = try Row.fetchCursor(
                    db,
                    sql: """
                        SELECT *, (SELECT length(CAST(body AS BLOB)) FROM certificates WHERE certificates.id = events.certificate) AS certificate_bytes
                        FROM events \(filter) ORDER BY id DESC LIMIT ?
                        """,
                    arguments: StatementArguments(arguments))
                var events: [StoredEvent] = []
                var bytes = 0
                while let row = try rows.next() {
                    let e = try Self.storedEvent(from: row)
                    if let owner, !Ownership.ownsRecord(uid: e.uid, registrationID: e.registrationID, callerUID: owner) { continue }
                    let cost = HistoryRetention.eventBytes(
                        texts: [e.detail, e.user, e.registrationID?.rawValue ?? "", e.certificate ?? "", e.requester?.comm ?? ""],
                        certificateBytes: row["certificate_bytes"] ?? 0)
                    if cost > maxBytes - bytes { return (events.reversed(), true) }
                    bytes += cost
                    events.append(e)
                }
                return (events.reversed(), false)
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
            },
            repeats: row["repeats"], lastTime: row["last_time"])
    }
}
