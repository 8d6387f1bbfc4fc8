import LockwipeCore
import Testing

/// The offline policy with an offline lease (issue 30), as tables over an injected clock:
/// nothing is due before the lease ends; then the lock comes at its end and the wipe the
/// policy's lock-to-wipe gap after it; a lease that ends before a threshold changes nothing.
@Suite struct OfflineLeaseTests {
    static let day: Int64 = 86_400
    static let contact: Int64 = 1_800_000_000
    static let lock2wipe5 = Policy(offlineDaysBeforeLock: 2, offlineDaysBeforeWipe: 5)
    static let lock14wipe30 = Policy(offlineDaysBeforeLock: 14, offlineDaysBeforeWipe: 30)
    static let wipeOnly10 = Policy(offlineDaysBeforeLock: 0, offlineDaysBeforeWipe: 10)
    static let lockOnly7 = Policy(offlineDaysBeforeLock: 7, offlineDaysBeforeWipe: 0)

    /// The clock of a registration last in contact at `contact`, read `elapsed` seconds
    /// later (wall and BOOTTIME both moved, as an injected clock does).
    static func clock(elapsed: Int64) -> OfflineClock {
        let start = ClockReading(wall: contact, boot: 50, bootID: "boot-a")
        return OfflineClock.started(at: start).advanced(to: ClockReading(wall: contact + elapsed, boot: 50 + elapsed, bootID: "boot-a")).clock
    }

    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        var policy: Policy
        var state: RegistrationState
        /// Days after the contact the lease ends (nil: no lease).
        var leaseDays: Int64?
        var elapsed: Int64
        var expected: Evaluation
        var testDescription: String { name }
    }

    static let rows: [Row] = [
        Row(
            name: "no lease: the policy as it is", policy: lock2wipe5, state: .active, leaseDays: nil, elapsed: 6 * day,
            expected: Evaluation(due: .wipe, next: nil)),
        Row(
            name: "in force past lock and wipe: nothing due, the lock planned at its end", policy: lock2wipe5, state: .active, leaseDays: 10,
            elapsed: 6 * day, expected: Evaluation(due: nil, next: ScheduledAction(action: .lock, inSeconds: 4 * day, afterLease: true))),
        Row(
            name: "one second before its end", policy: lock2wipe5, state: .active, leaseDays: 10, elapsed: 10 * day - 1,
            expected: Evaluation(due: nil, next: ScheduledAction(action: .lock, inSeconds: 1, afterLease: true))),
        Row(
            name: "at its end: the lock, the wipe the gap (3 days) later", policy: lock2wipe5, state: .active, leaseDays: 10, elapsed: 10 * day,
            expected: Evaluation(due: .lock, next: ScheduledAction(action: .wipe, inSeconds: 3 * day, afterLease: true))),
        Row(
            name: "ended, locked: the wipe the gap after its end, not at once", policy: lock2wipe5, state: .locked, leaseDays: 10, elapsed: 11 * day,
            expected: Evaluation(due: nil, next: ScheduledAction(action: .wipe, inSeconds: 2 * day, afterLease: true))),
        Row(
            name: "ended long ago (machine off): the wipe, at its end plus the gap", policy: lock2wipe5, state: .active, leaseDays: 10,
            elapsed: 13 * day, expected: Evaluation(due: .wipe, next: nil)),
        Row(
            name: "ends between lock and wipe (day 20 of 14/30): lock on day 20, wipe on day 36", policy: lock14wipe30, state: .active,
            leaseDays: 20, elapsed: 15 * day, expected: Evaluation(due: nil, next: ScheduledAction(action: .lock, inSeconds: 5 * day, afterLease: true))),
        Row(
            name: "day 20 lease, locked on day 20: the wipe on day 36", policy: lock14wipe30, state: .locked, leaseDays: 20, elapsed: 20 * day,
            expected: Evaluation(due: nil, next: ScheduledAction(action: .wipe, inSeconds: 16 * day, afterLease: true))),
        Row(
            name: "ends before the lock threshold: the policy unchanged", policy: lock14wipe30, state: .active, leaseDays: 5, elapsed: 6 * day,
            expected: Evaluation(due: nil, next: ScheduledAction(action: .lock, inSeconds: 8 * day))),
        Row(
            name: "ended before the last contact (a negative end): nothing held off", policy: lock2wipe5, state: .active, leaseDays: -1,
            elapsed: 2 * day, expected: Evaluation(due: .lock, next: ScheduledAction(action: .wipe, inSeconds: 3 * day))),
        Row(
            name: "a policy that only wipes: the wipe at the lease's end", policy: wipeOnly10, state: .active, leaseDays: 12, elapsed: 11 * day,
            expected: Evaluation(due: nil, next: ScheduledAction(action: .wipe, inSeconds: day, afterLease: true))),
        Row(
            name: "a policy that only wipes, at the lease's end", policy: wipeOnly10, state: .active, leaseDays: 12, elapsed: 12 * day,
            expected: Evaluation(due: .wipe, next: nil)),
        Row(
            name: "a policy that only locks: the lock at the lease's end", policy: lockOnly7, state: .active, leaseDays: 9, elapsed: 9 * day,
            expected: Evaluation(due: .lock, next: nil)),
        Row(
            name: "never: a lease changes nothing", policy: .never, state: .active, leaseDays: 9, elapsed: 30 * day,
            expected: Evaluation(due: nil, next: nil)),
        Row(
            name: "a committed wipe is not re-decided", policy: lock2wipe5, state: .wipePending, leaseDays: 30, elapsed: 6 * day,
            expected: Evaluation(due: nil, next: nil)),
    ]

    @Test(arguments: rows)
    func evaluation(_ row: Row) {
        let clock = Self.clock(elapsed: row.elapsed)
        let lease = row.leaseDays.map { OfflineLease(until: Self.contact + $0 * Self.day, grantedAt: Self.contact, source: .server, reference: "https://p") }
        let got = PolicyEvaluator.evaluate(policy: row.policy, state: row.state, offlineSeconds: clock.offlineSeconds, leaseEndsAt: lease?.endsAtOffline(clock))
        #expect(got == row.expected)
        if let lease { #expect(lease.inForce(clock) == (row.elapsed < (row.leaseDays ?? 0) * Self.day)) }
    }

    /// A lease's end is to be recorded once: when the offline clock passed it and no end
    /// is recorded yet (the evaluation asks this before it touches the registration).
    @Test(arguments: [(days: 9, endedAt: nil, expected: false), (10, nil, true), (11, nil, true), (11, 42, false)] as [(Int64, Int64?, Bool)])
    func anEndIsRecordedOnceAfterTheLeaseEnds(days: Int64, endedAt: Int64?, expected: Bool) {
        let lease = OfflineLease(until: Self.contact + 10 * Self.day, grantedAt: Self.contact, source: .offlineCode, reference: "ABCD-EFGH", endedAt: endedAt)
        let start = OfflineClock.started(at: ClockReading(wall: Self.contact, boot: 0, bootID: "b"))
        let clock = start.advanced(to: ClockReading(wall: Self.contact + days * Self.day, boot: days * Self.day, bootID: "b")).clock
        #expect(lease.endsUnrecorded(clock) == expected)
    }

    /// Setting the wall clock back does not lengthen a lease: its end is read on the
    /// offline clock, which keeps counting BOOTTIME.
    @Test func aClockSetBackDoesNotLengthenTheLease() {
        let lease = OfflineLease(until: Self.contact + 10 * Self.day, grantedAt: Self.contact, source: .offlineCode, reference: "ABCD-EFGH")
        let start = OfflineClock.started(at: ClockReading(wall: Self.contact, boot: 0, bootID: "b"))
        let eleven = start.advanced(to: ClockReading(wall: Self.contact + 11 * Self.day, boot: 11 * Self.day, bootID: "b")).clock
        #expect(!lease.inForce(eleven))
        // Someone sets the wall clock back to day 1; BOOTTIME goes on to day 12.
        let setBack = eleven.advanced(to: ClockReading(wall: Self.contact + Self.day, boot: 12 * Self.day, bootID: "b")).clock
        #expect(!lease.inForce(setBack))
        #expect(lease.remaining(setBack) == 0)
        let e = PolicyEvaluator.evaluate(policy: Self.lock2wipe5, state: .active, offlineSeconds: setBack.offlineSeconds, leaseEndsAt: lease.endsAtOffline(setBack))
        #expect(e.due == .lock)
    }

    /// A contact restarts the offline clock; the lease is carried over to it
    /// (`OfflineLease.carried`). Rows: days since the grant on the offline clock, days the
    /// wall clock was set back, and the days of the lease left after the contact.
    @Test(
        arguments: [
            (offlineDays: 3, setBackDays: 0, leftDays: 7),  // honest clock: unchanged
            (12, 0, 0),  // ended, honest clock: stays ended
            (12, 5, 0),  // ended, clock set back: stays ended (issue 42, item 8)
            (3, 5, 7),  // in force, clock set back: what was left, no more
            (3, 2, 7),
        ] as [(Int64, Int64, Int64)])
    func aContactCarriesTheLeaseOverWithWhatWasLeftOfIt(offlineDays: Int64, setBackDays: Int64, leftDays: Int64) {
        let lease = OfflineLease(until: Self.contact + 10 * Self.day, grantedAt: Self.contact, source: .server, reference: "https://policy")
        let start = OfflineClock.started(at: ClockReading(wall: Self.contact, boot: 0, bootID: "b"))
        let at = ClockReading(wall: Self.contact + (offlineDays - setBackDays) * Self.day, boot: offlineDays * Self.day, bootID: "b")
        let old = start.advanced(to: at).clock
        let restarted = OfflineClock.started(at: at)
        let carried = lease.carried(from: old, to: restarted)
        #expect(carried.remaining(restarted) == leftDays * Self.day)
        if setBackDays == 0 { #expect(carried == lease) }
        #expect(carried.until <= lease.until)
    }

    /// The warning window opens `warn_before` ahead of the lease's end, and a new lease
    /// moves the threshold (warned about again).
    @Test func warningsArePlannedFromTheLeaseEnd() {
        let clock = Self.clock(elapsed: 6 * Self.day)
        let endsAt = 10 * Self.day
        let next = PolicyEvaluator.evaluate(policy: Self.lock2wipe5, state: .active, offlineSeconds: clock.offlineSeconds, leaseEndsAt: endsAt).next
        #expect(
            WarningWindow.decide(next: next, lastContact: clock.lastContact, offlineSeconds: clock.offlineSeconds, warnBefore: 2 * Self.day)
                == .opensIn(2 * Self.day))
        let later = Self.clock(elapsed: 9 * Self.day)
        let soon = PolicyEvaluator.evaluate(policy: Self.lock2wipe5, state: .active, offlineSeconds: later.offlineSeconds, leaseEndsAt: endsAt).next
        #expect(
            WarningWindow.decide(next: soon, lastContact: later.lastContact, offlineSeconds: later.offlineSeconds, warnBefore: 2 * Self.day)
                == .warn(OfflineWarning(action: .lock, inSeconds: Self.day, threshold: "lock@\(Self.contact)+\(endsAt)")))
    }

    struct Refusal: Sendable, CustomTestStringConvertible {
        var name: String
        var untilDays: Int64
        var maxDays: Int
        var refused: String?
        var testDescription: String { name }
    }

    static let refusals: [Refusal] = [
        Refusal(name: "within the maximum", untilDays: 20, maxDays: 30, refused: nil),
        Refusal(name: "exactly the maximum", untilDays: 30, maxDays: 30, refused: nil),
        Refusal(name: "past the maximum", untilDays: 31, maxDays: 30, refused: "past the maximum of 30 days ([offline_codes] max_lease_days)"),
        Refusal(name: "one day maximum", untilDays: 2, maxDays: 1, refused: "past the maximum of 1 day ([offline_codes] max_lease_days)"),
        Refusal(name: "already over", untilDays: 0, maxDays: 30, refused: "ends before it begins"),
        Refusal(name: "in the past", untilDays: -3, maxDays: 30, refused: "ends before it begins"),
    ]

    @Test(arguments: refusals)
    func maximum(_ row: Refusal) {
        let now = Self.contact
        let got = OfflineLease.refusal(until: now + row.untilDays * Self.day, now: now, maxDays: row.maxDays, untilText: "THEN")
        if let expected = row.refused {
            #expect(got?.contains(expected) == true, "\(got ?? "nil")")
            #expect(got?.hasPrefix("a lease until THEN") == true)
        } else {
            #expect(got == nil)
        }
    }

    @Test func unlockLeaseLongerThanTheMaximumIsAProblem() {
        var c = OfflineCodesConfiguration()
        #expect(c.problems.isEmpty && c.unlockLeaseDays == 1 && c.maxLeaseDays == 30)
        c.unlockLeaseDays = 31
        #expect(c.problems.map(\.key) == ["unlock_lease_days"])
    }
}
