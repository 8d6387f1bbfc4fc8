import Synchronization
import Testing

@testable import LockwipeDaemon

@Suite struct WakeAlarmTests {
    /// Records what the alarm asks of its timer.
    final class RecordingTimer: WakeScheduling {
        let scheduled = Mutex<[Int64?]>([])
        let stopped = Mutex(false)
        /// How many times the alarm made a timer (this one).
        let made = Mutex(0)
        func schedule(in seconds: Int64?) { scheduled.withLock { $0.append(seconds) } }
        func stop() { stopped.withLock { $0 = true } }
    }

    func alarm() -> (WakeAlarm, RecordingTimer) {
        let timer = RecordingTimer()
        let alarm = WakeAlarm { _ in
            timer.made.withLock { $0 += 1 }
            return timer
        }
        return (alarm, timer)
    }

    @Test func aPlanThatReadOlderStateCannotReplaceANewerOne() throws {
        let (alarm, timer) = alarm()
        let older = alarm.beginPlan()
        let newer = alarm.beginPlan()
        #expect(try alarm.arm(in: 60, plan: newer))
        // The older reschedule finishes last: its plan is dropped, the newer one stands.
        #expect(!alarm.isNewest(older))
        #expect(try !alarm.arm(in: 3600, plan: older))
        #expect(timer.scheduled.withLock { $0 } == [60])
    }

    @Test func theTimerIsMadeOnceAndOnlyWhenThereIsSomethingToWakeFor() throws {
        let (alarm, timer) = alarm()
        #expect(try alarm.arm(in: nil, plan: alarm.beginPlan()))
        #expect(timer.made.withLock { $0 } == 0)
        try alarm.arm(in: 5, plan: alarm.beginPlan())
        try alarm.arm(in: nil, plan: alarm.beginPlan())
        try alarm.arm(in: 7, plan: alarm.beginPlan())
        #expect(timer.made.withLock { $0 } == 1)
        #expect(timer.scheduled.withLock { $0 } == [5, nil, 7])
        alarm.disarm()
        #expect(timer.scheduled.withLock { $0 }.last == .some(nil))
    }

    @Test func nanosecondsReachAWholeSecondTimerRoundedUpAndAFarWakeUpDoesNotOverflow() throws {
        let (alarm, timer) = alarm()
        try alarm.arm(inNanos: 1, plan: alarm.beginPlan())
        try alarm.arm(inNanos: 2_000_000_000, plan: alarm.beginPlan())
        try alarm.arm(inNanos: 2_000_000_001, plan: alarm.beginPlan())
        try alarm.arm(in: .max, plan: alarm.beginPlan())
        try alarm.arm(inNanos: .max, plan: alarm.beginPlan())
        let far = Int64.max / 1_000_000_000 + 1
        #expect(timer.scheduled.withLock { $0 } == [1, 2, 3, far, far])
    }

    @Test func afterStopNothingIsArmed() throws {
        let (alarm, timer) = alarm()
        try alarm.arm(in: 5, plan: alarm.beginPlan())
        alarm.stop()
        #expect(timer.stopped.withLock { $0 })
        #expect(try !alarm.arm(in: 5, plan: alarm.beginPlan()))
        #expect(timer.made.withLock { $0 } == 1 && timer.scheduled.withLock { $0 } == [5])
    }

    @Test func aTimerThatCannotBeMadeIsAnError() {
        struct NoTimer: Error {}
        let alarm = WakeAlarm { _ in throw NoTimer() }
        #expect(throws: NoTimer.self) { try alarm.arm(in: 5, plan: alarm.beginPlan()) }
    }
}
