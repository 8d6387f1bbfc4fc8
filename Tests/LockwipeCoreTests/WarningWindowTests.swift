import LockwipeCore
import Testing

@Suite struct WarningWindowTests {
    static let day: Int64 = 86_400
    static let contact: Int64 = 1_700_000_000

    /// The decision for a registration last in contact at `contact`, read `elapsed` seconds
    /// later by an injected clock (wall and BOOTTIME both moved), under `policy`.
    static func decide(
        _ policy: Policy, _ state: RegistrationState = .active, elapsed: Int64, warnBefore: Int64, contact: Int64 = contact
    ) -> WarningWindow.Decision {
        let start = ClockReading(wall: contact, boot: 100, bootID: "boot-a")
        let clock = OfflineClock.started(at: start).advanced(to: ClockReading(wall: contact + elapsed, boot: 100 + elapsed, bootID: "boot-a")).clock
        let next = PolicyEvaluator.evaluate(policy: policy, state: state, offlineSeconds: clock.offlineSeconds).next
        return WarningWindow.decide(next: next, lastContact: clock.lastContact, offlineSeconds: clock.offlineSeconds, warnBefore: warnBefore)
    }

    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        var policy: Policy
        var state: RegistrationState
        var elapsed: Int64
        var warnBefore: Int64
        var expected: WarningWindow.Decision
        var testDescription: String { name }
    }

    static let lock7wipe30 = Policy(offlineDaysBeforeLock: 7, offlineDaysBeforeWipe: 30)
    static let rows: [Row] = [
        Row(
            name: "just after contact: the window opens 2 days before the lock", policy: lock7wipe30, state: .active,
            elapsed: 0, warnBefore: 2 * day, expected: .opensIn(5 * day)),
        Row(
            name: "one second before the window", policy: lock7wipe30, state: .active,
            elapsed: 5 * day - 1, warnBefore: 2 * day, expected: .opensIn(1)),
        Row(
            name: "at the window's start (inclusive)", policy: lock7wipe30, state: .active,
            elapsed: 5 * day, warnBefore: 2 * day,
            expected: .warn(OfflineWarning(action: .lock, inSeconds: 2 * day, threshold: "lock@\(contact)+\(7 * day)"))),
        Row(
            name: "one second before the lock", policy: lock7wipe30, state: .active,
            elapsed: 7 * day - 1, warnBefore: 2 * day,
            expected: .warn(OfflineWarning(action: .lock, inSeconds: 1, threshold: "lock@\(contact)+\(7 * day)"))),
        Row(
            name: "locked: the wipe is next, its window not open yet", policy: lock7wipe30, state: .locked,
            elapsed: 8 * day, warnBefore: 2 * day, expected: .opensIn(20 * day)),
        Row(
            name: "locked: the wipe's window", policy: lock7wipe30, state: .locked,
            elapsed: 29 * day, warnBefore: 2 * day,
            expected: .warn(OfflineWarning(action: .wipe, inSeconds: day, threshold: "wipe@\(contact)+\(30 * day)"))),
        Row(
            name: "lock-failed counts as locked: the wipe is warned about", policy: lock7wipe30, state: .lockFailed,
            elapsed: 29 * day, warnBefore: 2 * day,
            expected: .warn(OfflineWarning(action: .wipe, inSeconds: day, threshold: "wipe@\(contact)+\(30 * day)"))),
        Row(
            name: "wipe only", policy: Policy(offlineDaysBeforeLock: 0, offlineDaysBeforeWipe: 3), state: .active,
            elapsed: 2 * day, warnBefore: 2 * day,
            expected: .warn(OfflineWarning(action: .wipe, inSeconds: day, threshold: "wipe@\(contact)+\(3 * day)"))),
        Row(
            name: "a window longer than the threshold warns from the contact on", policy: Policy(offlineDaysBeforeLock: 1, offlineDaysBeforeWipe: 0),
            state: .active, elapsed: 0, warnBefore: 2 * day,
            expected: .warn(OfflineWarning(action: .lock, inSeconds: day, threshold: "lock@\(contact)+\(day)"))),
        Row(
            name: "warn_before = 0 never warns, even a second before the lock", policy: lock7wipe30, state: .active,
            elapsed: 7 * day - 1, warnBefore: 0, expected: .none),
        Row(
            name: "never lock, never wipe: nothing to warn about", policy: .never, state: .active,
            elapsed: 400 * day, warnBefore: 2 * day, expected: .none),
        Row(
            name: "wipe committed: nothing", policy: lock7wipe30, state: .wipePending,
            elapsed: 29 * day, warnBefore: 2 * day, expected: .none),
        Row(
            name: "wiped: nothing", policy: lock7wipe30, state: .wiped,
            elapsed: 29 * day, warnBefore: 2 * day, expected: .none),
        Row(
            name: "past the wipe (due now, not ahead): no warning", policy: lock7wipe30, state: .locked,
            elapsed: 31 * day, warnBefore: 2 * day, expected: .none),
    ]

    @Test(arguments: rows)
    func decision(_ row: Row) {
        #expect(Self.decide(row.policy, row.state, elapsed: row.elapsed, warnBefore: row.warnBefore) == row.expected)
    }

    /// The threshold names one crossing: moving further inside the window keeps it (warned
    /// once), a new contact moves it (warned again).
    @Test func theThresholdStaysInsideTheWindowAndMovesWithAContact() throws {
        func threshold(_ d: WarningWindow.Decision) -> String? {
            if case .warn(let w) = d { return w.threshold }
            return nil
        }
        let early = threshold(Self.decide(Self.lock7wipe30, elapsed: 5 * Self.day + 10, warnBefore: 2 * Self.day))
        let late = threshold(Self.decide(Self.lock7wipe30, elapsed: 6 * Self.day + 3_600, warnBefore: 2 * Self.day))
        #expect(early != nil && early == late)
        let newContact = Self.contact + 6 * Self.day
        let afterContact = threshold(Self.decide(Self.lock7wipe30, elapsed: 5 * Self.day + 10, warnBefore: 2 * Self.day, contact: newContact))
        #expect(afterContact != nil && afterContact != early)
    }

    /// A wall clock set forward makes the action nearer; the window follows offline time.
    @Test func theWallClockSetForwardOpensTheWindowSooner() {
        let start = ClockReading(wall: Self.contact, boot: 100, bootID: "b")
        let clock = OfflineClock.started(at: start).advanced(to: ClockReading(wall: Self.contact + 6 * Self.day, boot: 160, bootID: "b")).clock
        let next = PolicyEvaluator.evaluate(policy: Self.lock7wipe30, state: .active, offlineSeconds: clock.offlineSeconds).next
        let d = WarningWindow.decide(next: next, lastContact: clock.lastContact, offlineSeconds: clock.offlineSeconds, warnBefore: 2 * Self.day)
        #expect(d == .warn(OfflineWarning(action: .lock, inSeconds: Self.day, threshold: "lock@\(Self.contact)+\(7 * Self.day)")))
    }

    @Test func theNoticeSaysWhatWhenAndWhatToDo() {
        let text = WarningWindow.notice(user: "alice", action: .wipe, at: "2026-11-25T10:00:00Z", inSeconds: 86_400 + 7_200)
        #expect(text.contains("WIPED"))
        #expect(text.contains("in 1d 2h (at 2026-11-25T10:00:00Z)"))
        #expect(text.contains("Connect this machine to the network; `lockwipectl check-in --user alice` checks in now."))
    }
}
