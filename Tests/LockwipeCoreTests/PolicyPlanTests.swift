import LockwipeCore
import Testing

/// `lockwipectl policy --plan` (issue 42): the steps the daemon's planner takes, as a table.
@Suite struct PolicyPlanTests {
    static let day: Int64 = 86_400

    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        var policy: Policy
        var state: RegistrationState
        var leaseDays: Int64?
        var warnDays: Int64
        var expected: [(PolicyPlan.Step, Int64)]
        var testDescription: String { name }
    }

    static let rows: [Row] = [
        Row(
            name: "lock 2, wipe 5, warnings 2 days ahead", policy: Policy(offlineDaysBeforeLock: 2, offlineDaysBeforeWipe: 5), state: .active,
            leaseDays: nil, warnDays: 2, expected: [(.warnLock, 0), (.lock, 2), (.warnWipe, 3), (.wipe, 5)]),
        Row(
            name: "a wipe close behind the lock is warned about once the lock is done", policy: Policy(offlineDaysBeforeLock: 2, offlineDaysBeforeWipe: 3),
            state: .active, leaseDays: nil, warnDays: 2, expected: [(.warnLock, 0), (.lock, 2), (.warnWipe, 2), (.wipe, 3)]),
        Row(
            name: "locked already: the wipe alone", policy: Policy(offlineDaysBeforeLock: 2, offlineDaysBeforeWipe: 5), state: .locked,
            leaseDays: nil, warnDays: 0, expected: [(.wipe, 5)]),
        Row(
            name: "a lease to day 10 moves the lock to its end and the wipe the gap after", policy: Policy(offlineDaysBeforeLock: 2, offlineDaysBeforeWipe: 5),
            state: .active, leaseDays: 10, warnDays: 1, expected: [(.warnLock, 9), (.leaseEnds, 10), (.lock, 10), (.warnWipe, 12), (.wipe, 13)]),
        Row(name: "never lock, never wipe", policy: Policy(offlineDaysBeforeLock: 0, offlineDaysBeforeWipe: 0), state: .active, leaseDays: nil, warnDays: 2, expected: []),
        Row(
            name: "a wipe committed has nothing ahead", policy: Policy(offlineDaysBeforeLock: 2, offlineDaysBeforeWipe: 5), state: .wipePending,
            leaseDays: nil, warnDays: 2, expected: []),
    ]

    @Test(arguments: rows)
    func theStepsComeWhenTheDaemonPlansThem(_ row: Row) {
        let steps = PolicyPlan.steps(
            policy: row.policy, state: row.state, leaseEndsAt: row.leaseDays.map { $0 * Self.day }, warnBefore: row.warnDays * Self.day)
        #expect(steps.map(\.step) == row.expected.map(\.0))
        #expect(steps.map(\.atOffline) == row.expected.map { $0.1 * Self.day })
    }

    /// "What if offline N more days": the daemon's own evaluation at that offline time.
    @Test(arguments: [(1, RegistrationState.active), (2, .locked), (4, .locked), (5, .wiped), (9, .wiped)] as [(Int64, RegistrationState)])
    func theStateAfterSomeDaysOfflineIsTheEvaluations(days: Int64, expected: RegistrationState) {
        let policy = Policy(offlineDaysBeforeLock: 2, offlineDaysBeforeWipe: 5)
        #expect(PolicyPlan.state(after: days * Self.day, policy: policy, state: .active, leaseEndsAt: nil) == expected)
        // A lease to day 6 holds both off: locked at its end, wiped three days later.
        let leased = PolicyPlan.state(after: days * Self.day, policy: policy, state: .active, leaseEndsAt: 6 * Self.day)
        #expect(leased == (days < 6 ? .active : days < 9 ? .locked : .wiped))
    }
}
