import GRDB
import LockwipeCore

extension StateStore {
    /// Persists checkpoints of offline clocks (they only grow; see `OfflineClock`).
    public func saveClocks(_ clocks: [(user: String, clock: OfflineClock)]) throws {
        guard !clocks.isEmpty else { return }
        try db.write { db in
            for (user, c) in clocks { try Self.save(c, of: user, db) }
        }
    }

    static func save(_ c: OfflineClock, of user: String, _ db: Database) throws {
        // Prepared once per connection: every evaluation saves every registration's clock.
        try db.cachedStatement(
            sql: """
                UPDATE registrations SET clock_last_contact = ?, clock_accumulated_boot = ?, clock_boot_id = ?,
                    clock_boot_mark = ?, clock_last_wall = ?, clock_offline_seconds = ? WHERE user = ?
                """
        ).execute(arguments: [c.lastContact, c.accumulatedBoot, c.bootID, c.bootMark, c.lastWall, c.offlineSeconds, user])
    }
}
