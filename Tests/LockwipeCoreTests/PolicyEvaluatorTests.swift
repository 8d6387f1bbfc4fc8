import LockwipeCore
import Testing

@Suite struct PolicyEvaluatorTests {
    let day: Int64 = 86_400

    @Test func lockOnlyLocksAtTheExactThresholdAndNeverWipes() {
        let policy = Policy(offlineDaysBeforeLock: 7, offlineDaysBeforeWipe: 0)
        #expect(
            PolicyEvaluator.evaluate(policy: policy, state: .active, offlineSeconds: 7 * day - 1)
                == Evaluation(due: nil, next: ScheduledAction(action: .lock, inSeconds: 1)))
        #expect(PolicyEvaluator.evaluate(policy: policy, state: .active, offlineSeconds: 7 * day).due == .lock)
        #expect(PolicyEvaluator.evaluate(policy: policy, state: .locked, offlineSeconds: 400 * day) == Evaluation(due: nil, next: nil))
    }

    @Test func wipeOnlyWipesActiveRegistrationsWithoutLockingFirst() {
        let policy = Policy(offlineDaysBeforeLock: 0, offlineDaysBeforeWipe: 30)
        #expect(PolicyEvaluator.evaluate(policy: policy, state: .active, offlineSeconds: 29 * day).next == ScheduledAction(action: .wipe, inSeconds: day))
        #expect(PolicyEvaluator.evaluate(policy: policy, state: .active, offlineSeconds: 30 * day).due == .wipe)
    }

    @Test func bothLockThenWipeAndWipeWinsWhenBothAreDue() {
        let policy = Policy(offlineDaysBeforeLock: 7, offlineDaysBeforeWipe: 30)
        #expect(PolicyEvaluator.evaluate(policy: policy, state: .active, offlineSeconds: 0).next == ScheduledAction(action: .lock, inSeconds: 7 * day))
        let atLock = PolicyEvaluator.evaluate(policy: policy, state: .active, offlineSeconds: 7 * day)
        #expect(atLock == Evaluation(due: .lock, next: ScheduledAction(action: .wipe, inSeconds: 23 * day)))
        #expect(PolicyEvaluator.evaluate(policy: policy, state: .locked, offlineSeconds: 10 * day).next == ScheduledAction(action: .wipe, inSeconds: 20 * day))
        // A machine that was off for a month goes straight to the wipe.
        #expect(PolicyEvaluator.evaluate(policy: policy, state: .active, offlineSeconds: 31 * day) == Evaluation(due: .wipe, next: nil))
    }

    /// A lock that failed is not decided again (the daemon retries it), and the wipe
    /// still comes when it is due: a vault renamed away does not escape its wipe.
    @Test func aFailedLockIsRetriedNotReDecidedAndTheWipeStillComes() {
        let policy = Policy(offlineDaysBeforeLock: 7, offlineDaysBeforeWipe: 30)
        #expect(
            PolicyEvaluator.evaluate(policy: policy, state: .lockFailed, offlineSeconds: 10 * day)
                == PolicyEvaluator.evaluate(policy: policy, state: .locked, offlineSeconds: 10 * day))
        #expect(PolicyEvaluator.evaluate(policy: policy, state: .lockFailed, offlineSeconds: 30 * day).due == .wipe)
    }

    @Test func neverPolicyDoesNothing() {
        #expect(PolicyEvaluator.evaluate(policy: .never, state: .active, offlineSeconds: 10_000 * day) == Evaluation(due: nil, next: nil))
    }

    @Test(arguments: [RegistrationState.wipePending, .wiping, .wiped])
    func committedWipesAreNotReDecided(state: RegistrationState) {
        let policy = Policy(offlineDaysBeforeLock: 1, offlineDaysBeforeWipe: 2)
        #expect(PolicyEvaluator.evaluate(policy: policy, state: state, offlineSeconds: 100 * day) == Evaluation(due: nil, next: nil))
    }

    @Test func invalidCombinationsAreReportedNeverFixed() {
        #expect(Policy(offlineDaysBeforeLock: 7, offlineDaysBeforeWipe: 7).problems.map(\.key) == ["offline_days_before_wipe"])
        #expect(Policy(offlineDaysBeforeLock: 7, offlineDaysBeforeWipe: 3).problems.map(\.key) == ["offline_days_before_wipe"])
        #expect(Policy(offlineDaysBeforeLock: -1, offlineDaysBeforeWipe: 0).problems.map(\.key) == ["offline_days_before_lock"])
        #expect(Policy(offlineDaysBeforeLock: 0, offlineDaysBeforeWipe: -2).problems.map(\.key) == ["offline_days_before_wipe"])
        #expect(Policy(offlineDaysBeforeLock: 7, offlineDaysBeforeWipe: 0).isValid)
        #expect(Policy(offlineDaysBeforeLock: 0, offlineDaysBeforeWipe: 7).isValid)
        #expect(Policy(offlineDaysBeforeLock: 7, offlineDaysBeforeWipe: 8).isValid)
    }
}
