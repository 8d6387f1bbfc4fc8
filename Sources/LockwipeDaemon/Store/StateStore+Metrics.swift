import GRDB
import LockwipeCore

extension StateStore {
    /// How many wipes finished complete and incomplete, as the history records them (the
    /// metrics file's counters: wipe events are never pruned, `HistoryRetention.Rule.kept`,
    /// so they only grow).
    nonisolated(nonsending) func wipeCounts() async throws -> (complete: Int, incomplete: Int) {
        try await perform { [self] in
            try db.read { db in
                let rows = try Row.fetchAll(
                    db, sql: "SELECT kind, count(*) AS n FROM events WHERE kind IN (?, ?) GROUP BY kind",
                    arguments: [EventKind.wipe.rawValue, EventKind.wipeIncomplete.rawValue])
                var counts = (complete: 0, incomplete: 0)
                for row in rows {
                    let kind: String = row["kind"]
                    let n: Int = row["n"]
                    if kind == EventKind.wipe.rawValue { counts.complete = n } else { counts.incomplete = n }
                }
                return counts
            }
        }
    }
}
