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
