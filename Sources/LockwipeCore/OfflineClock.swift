/// One reading of the machine's clocks, taken by the daemon and handed to the pure core.
public struct ClockReading: Sendable, Equatable {
    /// Wall-clock time (CLOCK_REALTIME), seconds since the Unix epoch. Anyone can set it.
    public var wall: Int64
    /// Time since boot including suspend (CLOCK_BOOTTIME), seconds. Cannot be set, but
    /// restarts at every boot.
    public var boot: Int64
    /// The kernel's boot id (`/proc/sys/kernel/random/boot_id`): tells a reboot apart from
    /// a BOOTTIME that merely looks small.
    public var bootID: String

    public init(wall: Int64, boot: Int64, bootID: String) {
        self.wall = wall
        self.boot = boot
        self.bootID = bootID
    }

    /// A reading from the two clocks in nanoseconds, cut to whole seconds on one phase.
    ///
    /// Cutting each clock at its own second boundary lets the two whole-second counts
    /// disagree by one over the same interval: a status read a fraction of a second after a
    /// checkpoint could show one wall second more than BOOTTIME would count by the next
    /// checkpoint, and after the wall clock is set back the count would seem to shrink by
    /// that second. Here BOOTTIME is cut at its own second and the wall time is that plus the
    /// whole seconds of their offset, so while nobody sets the clock both advance together,
    /// second for second. The wall time read this way is at most one second behind the usual
    /// whole-second reading.
    public static func aligned(wallNanos: Int64, bootNanos: Int64, bootID: String) -> ClockReading {
        let second: Int64 = 1_000_000_000
        func floorDiv(_ a: Int64, _ b: Int64) -> Int64 { a >= 0 ? a / b : -((-a + b - 1) / b) }
        let boot = floorDiv(bootNanos, second)
        return ClockReading(wall: boot + floorDiv(wallNanos - bootNanos, second), boot: boot, bootID: bootID)
    }
}

/// The persisted bookkeeping of one registration's offline time.
///
/// Offline time is `max(wall-clock time since the last contact, accumulated CLOCK_BOOTTIME
/// time since the last contact)` and it only ever grows until the next contact: setting the
/// clock back shortens neither term (BOOTTIME cannot be set, and the stored high-water mark
/// keeps what was already counted, and keeps growing by real BOOTTIME time from there).
/// BOOTTIME restarts at boot, so it is accumulated across boots through checkpoints; time
/// the machine was powered off is counted only by the wall clock, which is why both terms
/// are needed.
public struct OfflineClock: Sendable, Equatable, Codable {
    /// Wall time of the last successful contact (or registration, or admin unlock).
    public var lastContact: Int64
    /// BOOTTIME seconds counted since the last contact, summed over all boots up to `bootMark`.
    public var accumulatedBoot: Int64
    /// Boot in which the last checkpoint was taken.
    public var bootID: String
    /// BOOTTIME at the last checkpoint.
    public var bootMark: Int64
    /// Wall time at the last checkpoint, to notice the clock being set back.
    public var lastWall: Int64
    /// The offline time as of the last checkpoint: the high-water mark it never falls below.
    public var offlineSeconds: Int64

    public init(lastContact: Int64, accumulatedBoot: Int64, bootID: String, bootMark: Int64, lastWall: Int64, offlineSeconds: Int64) {
        self.lastContact = lastContact
        self.accumulatedBoot = accumulatedBoot
        self.bootID = bootID
        self.bootMark = bootMark
        self.lastWall = lastWall
        self.offlineSeconds = offlineSeconds
    }

    /// A clock that starts now: the moment of a contact, registration or admin unlock.
    public static func started(at reading: ClockReading) -> OfflineClock {
        OfflineClock(
            lastContact: reading.wall, accumulatedBoot: 0, bootID: reading.bootID,
            bootMark: reading.boot, lastWall: reading.wall, offlineSeconds: 0
        )
    }

    /// Wall-clock steps backwards smaller than this are NTP slew noise, not a rollback.
    public static let rollbackTolerance: Int64 = 2

    /// The result of moving the clock to a new reading.
    public struct Advance: Sendable, Equatable {
        public var clock: OfflineClock
        /// Seconds the wall clock went back since the last checkpoint, when it did.
        public var rollbackSeconds: Int64?
        /// True when this reading is from a different boot than the last checkpoint.
        public var rebooted: Bool
    }

    /// Takes a checkpoint at `reading`. Pure: the caller persists the returned clock.
    public func advanced(to reading: ClockReading) -> Advance {
        var next = self
        let rebooted = reading.bootID != bootID
        // In a new boot, BOOTTIME since that boot is a lower bound of the time elapsed since
        // the last checkpoint (the machine was off for an unknown time in between). Within
        // one boot BOOTTIME never goes back; if it seems to, nothing is counted for this
        // step (the high-water mark keeps what was already counted).
        let bootElapsed = rebooted ? max(0, reading.boot) : max(0, reading.boot - bootMark)
        next.accumulatedBoot += bootElapsed
        next.bootID = reading.bootID
        next.bootMark = reading.boot

        var rollback: Int64?
        if reading.wall < lastWall - Self.rollbackTolerance {
            rollback = lastWall - reading.wall
        }
        next.lastWall = reading.wall

        // The last offline time plus the real time since that checkpoint is a lower bound of
        // the time since the contact, whatever the wall clock says now: a clock set back
        // neither shortens nor pauses the count.
        let wallElapsed = max(0, reading.wall - lastContact)
        next.offlineSeconds = max(offlineSeconds + bootElapsed, wallElapsed, next.accumulatedBoot)
        return Advance(clock: next, rollbackSeconds: rollback, rebooted: rebooted)
    }
}
