import LockwipeCore
import Testing

/// The wake-up is planned for the exact BOOTTIME instant at which the offline count
/// reaches the threshold: a reading taken there says "reached", one taken a few
/// microseconds before says one second short (and plans the same instant again, not one a
/// second later), whatever the sub-second phase of the wall/boot offset or of BOOTTIME.
@Suite struct WakePlanTests {
    static let second = WakePlan.second
    static let day: Int64 = 86_400

    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        /// Sub-second part of the wall/boot offset (wall - boot), ns.
        var wallPhase: Int64
        /// Sub-second part of BOOTTIME at the contact, ns.
        var bootPhase: Int64
        /// Time from the contact to the reading the plan is made from, ns.
        var planAfter: Int64
        /// How far the wall clock is set at the plan's reading (negative: back), ns.
        var wallShift: Int64 = 0
        /// How long before the boot read the wall clock is read, ns (two clock_gettime calls).
        var wallReadEarly: Int64 = 0
        var testDescription: String { name }
    }

    static let rows: [Row] = [
        Row(name: "phase 0", wallPhase: 0, bootPhase: 0, planAfter: (day - 3) * second + 1_000_000),
        Row(name: "phase 0.3 s", wallPhase: 300_000_000, bootPhase: 0, planAfter: (day - 3) * second + 1_000_000),
        Row(name: "phase 0.999 s", wallPhase: 999_000_000, bootPhase: 0, planAfter: (day - 3) * second + 1_000_000),
        Row(name: "phase 0.3 s, boot phase 0.7 s", wallPhase: 300_000_000, bootPhase: 700_000_000, planAfter: (day - 3) * second + 250_000_000),
        Row(name: "planned 1 us before its boundary", wallPhase: 300_000_000, bootPhase: 0, planAfter: (day - 1) * second - 1_000),
        Row(name: "phase 0, wall read 2 us before boot", wallPhase: 0, bootPhase: 0, planAfter: (day - 2) * second + 900_000_000, wallReadEarly: 2_000),
        Row(name: "wall set back 10.5 s at the plan", wallPhase: 300_000_000, bootPhase: 0, planAfter: (day - 3) * second, wallShift: -10_500_000_000),
        Row(name: "wall set forward 0.6 s at the plan", wallPhase: 999_000_000, bootPhase: 0, planAfter: (day - 3) * second, wallShift: 600_000_000),
    ]

    @Test(arguments: rows)
    func theCountReachesTheThresholdAtTheWakeUpAndNotBefore(_ row: Row) {
        let wall0: Int64 = 1_800_000_000 * Self.second + row.wallPhase
        let boot0: Int64 = 1_000 * Self.second + row.bootPhase
        // A reading `nanos` after the contact (BOOTTIME), with the wall clock shifted by
        // `shift` from the contact's offset.
        func reading(_ nanos: Int64, shift: Int64) -> ClockReading {
            .aligned(wallNanos: wall0 + nanos + shift - row.wallReadEarly, bootNanos: boot0 + nanos, bootID: "boot-a")
        }
        let contact = OfflineClock.started(at: reading(0, shift: 0))
        // The checkpoint the plan is made from: the daemon's evaluation.
        let atPlan = reading(row.planAfter, shift: row.wallShift)
        let checkpoint = contact.advanced(to: atPlan).clock
        let short = Self.day - checkpoint.offlineSeconds
        #expect(short > 0, "the plan's reading is already past the threshold")

        let wake = WakePlan.instant(inSeconds: short, after: atPlan)
        #expect(wake % Self.second == 0, "the wake-up is on a BOOTTIME second boundary")
        #expect(wake > boot0 + row.planAfter && wake - (boot0 + row.planAfter) <= short * Self.second)
        func offline(atBoot nanos: Int64) -> Int64 {
            checkpoint.advanced(to: reading(nanos - boot0, shift: row.wallShift)).clock.offlineSeconds
        }
        #expect(offline(atBoot: wake) == Self.day, "the reading at the wake-up says the threshold is reached")
        #expect(offline(atBoot: wake + 1) == Self.day)
        let early = wake - 3_000
        #expect(offline(atBoot: early) == Self.day - 1, "a reading microseconds before says one second short")
        // Planned again from that early reading: the same instant, not a second later.
        let earlyReading = reading(early - boot0, shift: row.wallShift)
        let again = checkpoint.advanced(to: earlyReading).clock
        #expect(WakePlan.instant(inSeconds: Self.day - again.offlineSeconds, after: earlyReading) == wake)
        #expect(WakePlan.delay(until: wake, nowBootNanos: early) == 3_000)
    }

    @Test func aThresholdAlreadyReachedWakesAtTheNextSecondNotAtOnceAgain() {
        let r = ClockReading(wall: 1_800_000_000, boot: 500, bootID: "b")
        #expect(WakePlan.instant(inSeconds: 0, after: r) == 501 * Self.second)
        #expect(WakePlan.instant(inSeconds: -20, after: r) == 501 * Self.second)
        #expect(WakePlan.instant(inSeconds: 1, after: r) == 501 * Self.second)
        #expect(WakePlan.instant(inSeconds: 3_600, after: r) == 4_100 * Self.second)
    }

    @Test(arguments: [
        // instant, now -> delay (ns)
        (Int64(501_000_000_000), Int64(500_999_997_000), Int64(3_000)),
        (501_000_000_000, 500_000_000_001, 999_999_999),
        (501_000_000_000, 501_000_000_000, 1),  // due now: at once, never 0 (disarmed)
        (501_000_000_000, 501_200_000_000, 1),  // the plan took longer than its second
    ])
    func theDelayIsFromTheClockReadJustBeforeArming(instant: Int64, now: Int64, delay: Int64) {
        #expect(WakePlan.delay(until: instant, nowBootNanos: now) == delay)
    }

    @Test func aFarInstantDoesNotOverflow() {
        let r = ClockReading(wall: 0, boot: Int64.max / WakePlan.second - 2, bootID: "b")
        #expect(WakePlan.instant(inSeconds: 10, after: r) == Int64.max)
    }
}
