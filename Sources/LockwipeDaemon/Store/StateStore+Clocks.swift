import GRDB
import LockwipeCore

extension StateStore {
    /// Moves the offline clock of every registration that is not wipe-committed to
    /// `reading` and persists it, in one transaction: a contact committed meanwhile (which
    /// restarts a clock) can never be overwritten by a checkpoint read before it. Returns
    /// each registration as it was read, with its clock's advance.
    public nonisolated(nonsending) func checkpointClocks(at reading: ClockReading) async throws -> [(registration: RegistrationRecord, advance: OfflineClock.Advance)] {
        try await perform { [self] in
            try db.write { db in
                let checkpoints = try fetchRegistrations(db).filter { !$0.state.isWipeCommitted }.map { ($0, $0.clock.advanced(to: reading)) }
                for (r, advance) in checkpoints { try Self.save(advance.clock, of: r.user, db) }
                return checkpoints
            }
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
