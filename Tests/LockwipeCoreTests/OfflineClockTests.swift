import LockwipeCore
import Testing

@Suite struct OfflineClockTests {
    let day: Int64 = 86_400
    let start = ClockReading(wall: 1_800_000_000, boot: 1_000, bootID: "boot-a")

    @Test func countsWallTimeWhileRunning() {
        let clock = OfflineClock.started(at: start)
        let later = clock.advanced(to: ClockReading(wall: start.wall + 3 * day, boot: start.boot + 3 * day, bootID: "boot-a"))
        #expect(later.clock.offlineSeconds == 3 * day)
        #expect(later.rollbackSeconds == nil)
        #expect(!later.rebooted)
    }

    @Test func clockSetBackNeverShortensOfflineTimeAndIsReported() {
        var clock = OfflineClock.started(at: start).advanced(to: ClockReading(wall: start.wall + 5 * day, boot: start.boot + 5 * day, bootID: "boot-a")).clock
        // Someone sets the clock back 10 days while one more hour passes.
        let back = clock.advanced(to: ClockReading(wall: start.wall - 5 * day, boot: start.boot + 5 * day + 3_600, bootID: "boot-a"))
        #expect(back.rollbackSeconds == 10 * day)
        #expect(back.clock.offlineSeconds == 5 * day + 3_600)  // BOOTTIME kept counting
        clock = back.clock
        // Reported once: the next checkpoint compares with the new wall time.
        #expect(clock.advanced(to: ClockReading(wall: start.wall - 5 * day + 60, boot: start.boot + 5 * day + 3_660, bootID: "boot-a")).rollbackSeconds == nil)
    }

    /// Powered off for 5 of 6 offline days (BOOTTIME counted only 1), then the clock is set
    /// back: the count must go on from 6 days at real speed, not wait for BOOTTIME to catch up.
    @Test func afterAPowerOffAClockSetBackDoesNotPauseTheCount() {
        var clock = OfflineClock.started(at: start)
        clock = clock.advanced(to: ClockReading(wall: start.wall + day, boot: start.boot + day, bootID: "boot-a")).clock
        clock = clock.advanced(to: ClockReading(wall: start.wall + 6 * day, boot: 60, bootID: "boot-b")).clock
        #expect(clock.offlineSeconds == 6 * day)
        let back = clock.advanced(to: ClockReading(wall: start.wall - 30 * day, boot: 60 + 3_600, bootID: "boot-b"))
        #expect(back.rollbackSeconds == 36 * day)
        #expect(back.clock.offlineSeconds == 6 * day + 3_600)
    }

    @Test func clockJumpingForwardCountsAtOnce() {
        let clock = OfflineClock.started(at: start)
        let jumped = clock.advanced(to: ClockReading(wall: start.wall + 40 * day, boot: start.boot + 10, bootID: "boot-a"))
        #expect(jumped.clock.offlineSeconds == 40 * day)
    }

    @Test func rebootResetsBoottimeButAccumulatesAcrossBoots() {
        var clock = OfflineClock.started(at: start)
        clock = clock.advanced(to: ClockReading(wall: start.wall + 2 * day, boot: start.boot + 2 * day, bootID: "boot-a")).clock
        // Reboot with the wall clock reset to the registration time (dead RTC battery):
        // BOOTTIME of the new boot adds to what was counted before.
        let afterReboot = clock.advanced(to: ClockReading(wall: start.wall, boot: day, bootID: "boot-b"))
        #expect(afterReboot.rebooted)
        #expect(afterReboot.clock.accumulatedBoot == 3 * day)
        #expect(afterReboot.clock.offlineSeconds == 3 * day)
    }

    @Test func boottimeGoingBackWithinOneBootCountsNothingAndLosesNothing() {
        var clock = OfflineClock.started(at: start)
        clock = clock.advanced(to: ClockReading(wall: start.wall + day, boot: start.boot + day, bootID: "boot-a")).clock
        let odd = clock.advanced(to: ClockReading(wall: start.wall + day, boot: 10, bootID: "boot-a"))
        #expect(!odd.rebooted)
        #expect(odd.clock.accumulatedBoot == day)
        #expect(odd.clock.offlineSeconds == day)
    }

    /// The CI failure this guards: a checkpoint, a status a fraction of a second later that
    /// had crossed a wall second, then a restart with the clock set back 11 days before
    /// BOOTTIME had crossed a second: the count went 86401 -> 86400. Over every phase of the
    /// two clocks and every short delay, what a status shows is never more than what the
    /// next checkpoint counts, whatever the wall clock says by then.
    @Test func aStatusNeverShowsMoreThanALaterCheckpointAfterARollback() {
        let second: Int64 = 1_000_000_000
        let contactWall: Int64 = 1_800_000_000 * second
        for wallPhase in stride(from: Int64(0), to: second, by: Int(second / 10)) {
            for bootPhase in stride(from: Int64(0), to: second, by: Int(second / 10)) {
                let wall0 = contactWall + wallPhase
                let boot0 = 1_000 * second + bootPhase
                func reading(after nanos: Int64, wallShift: Int64 = 0) -> ClockReading {
                    .aligned(wallNanos: wall0 + nanos + wallShift, bootNanos: boot0 + nanos, bootID: "boot-a")
                }
                let contact = OfflineClock.started(at: reading(after: 0))
                for delay in stride(from: Int64(0), to: 2 * second, by: Int(second / 10)) {
                    let checkpoint = contact.advanced(to: reading(after: day * second)).clock
                    let shown = checkpoint.advanced(to: reading(after: day * second + delay)).clock.offlineSeconds
                    let later = checkpoint.advanced(to: reading(after: day * second + delay + second / 100, wallShift: -11 * day * second))
                    #expect(later.rollbackSeconds != nil)
                    #expect(shown <= later.clock.offlineSeconds, "phases \(wallPhase) \(bootPhase), delay \(delay)")
                }
            }
        }
    }

    @Test(arguments: [
        // wall ns, boot ns -> wall s, boot s
        (Int64(1_800_000_000_900_000_000), Int64(100_100_000_000), Int64(1_800_000_000), Int64(100)),
        (1_800_000_001_000_000_000, 100_200_000_000, 1_800_000_000, 100),  // wall crossed its second, boot did not
        (1_800_000_001_800_000_000, 101_000_000_000, 1_800_000_001, 101),  // both tick together
        (-1_500_000_000, 500_000_000, -2, 0),
    ])
    func readingsCutBothClocksOnOnePhase(wallNanos: Int64, bootNanos: Int64, wall: Int64, boot: Int64) {
        let r = ClockReading.aligned(wallNanos: wallNanos, bootNanos: bootNanos, bootID: "b")
        #expect(r.wall == wall)
        #expect(r.boot == boot)
        #expect(r.wall * 1_000_000_000 <= wallNanos && wallNanos - r.wall * 1_000_000_000 < 2_000_000_000)
    }

    @Test func offlineTimeIsMonotonicOverAnySequenceOfReadings() {
        var clock = OfflineClock.started(at: start)
        var previous: Int64 = 0
        var generator = SystemRandomNumberGenerator()
        var boot = start.boot
        var bootID = "b0"
        for i in 0..<2_000 {
            if i % 97 == 0 {
                boot = Int64.random(in: 0...100, using: &generator)
                bootID = "b\(i)"
            }
            boot += Int64.random(in: 0...5_000, using: &generator)
            let wall = start.wall + Int64.random(in: -30 * day...60 * day, using: &generator)
            clock = clock.advanced(to: ClockReading(wall: wall, boot: boot, bootID: bootID)).clock
            #expect(clock.offlineSeconds >= previous)
            previous = clock.offlineSeconds
        }
    }
}

@Suite struct RelativeTimeTests {
    static let cases: [(Int64, String)] = [
        (0, "0s"), (45, "45s"), (60, "1m"), (61, "1m 1s"), (3_600, "1h"), (3_660, "1h 1m"),
        (187_259, "2d 4h"), (777_600, "9d"), (-5, "0s"),
    ]

    @Test(arguments: cases)
    func formatsTwoLargestUnits(seconds: Int64, text: String) {
        #expect(RelativeTime.format(seconds: seconds) == text)
    }
}

@Suite struct StatusSummaryTests {
    @Test func summarizesUsersLockedAndTheSoonestAction() {
        let line = StatusSummary.line([
            .init(user: "alice", state: .active, next: ScheduledAction(action: .lock, inSeconds: 2 * 86_400 + 4 * 3_600)),
            .init(user: "bob", state: .locked, next: ScheduledAction(action: .wipe, inSeconds: 9 * 86_400)),
            .init(user: "carol", state: .active, next: nil),
        ])
        #expect(line == "3 users, 1 locked; next: lock alice in 2d 4h")
        #expect(StatusSummary.line([]) == "0 users; nothing due")
    }

    /// systemd's STATUS= says when someone is within the warning window.
    @Test func countsTheWarned() {
        let line = StatusSummary.line([
            .init(user: "alice", state: .active, next: ScheduledAction(action: .lock, inSeconds: 3_600), warned: true),
            .init(user: "bob", state: .locked, next: ScheduledAction(action: .wipe, inSeconds: 86_400), warned: true),
            .init(user: "carol", state: .active, next: nil),
        ])
        #expect(line == "3 users, 1 locked, 2 warned; next: lock alice in 1h")
    }
}
