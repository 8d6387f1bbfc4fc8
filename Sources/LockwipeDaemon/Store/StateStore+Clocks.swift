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

    /// Restarts the offline clock of `user` (a contact, or an administrator's unlock) with
    /// `restarted` (`OfflineClock.started(at:)`), and carries its lease over to the new
    /// clock (`OfflineLease.carried`), inside the caller's transaction: an ended lease stays
    /// ended after the wall clock was set back, and a lease in force is not lengthened.
    static func restartClock(_ restarted: OfflineClock, of user: String, _ db: Database) throws {
        let reading = ClockReading(wall: restarted.lastWall, boot: restarted.bootMark, bootID: restarted.bootID)
        if let row = try Row.fetchOne(
            db,
            sql: """
                SELECT clock_last_contact, clock_accumulated_boot, clock_boot_id, clock_boot_mark, clock_last_wall, clock_offline_seconds,
                    lease_until, lease_granted_at, lease_source, lease_reference, lease_ended_at
                FROM registrations WHERE user = ?
                """, arguments: [user]),
            let lease = lease(from: row)
        {
            let carried = lease.carried(from: clock(from: row).advanced(to: reading).clock, to: restarted)
            if carried.until != lease.until {
                try db.execute(sql: "UPDATE registrations SET lease_until = ? WHERE user = ?", arguments: [carried.until, user])
            }
        }
        try save(restarted, of: user, db)
    }

    /// A registration's offline clock, from a row with its `clock_*` columns.
    static func clock(from row: Row) -> OfflineClock {
        OfflineClock(
            lastContact: row["clock_last_contact"], accumulatedBoot: row["clock_accumulated_boot"], bootID: row["clock_boot_id"],
            bootMark: row["clock_boot_mark"], lastWall: row["clock_last_wall"], offlineSeconds: row["clock_offline_seconds"])
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
