import Foundation
import LockwipeCore
import Synchronization
import Testing

@testable import LockwipeDaemon

/// The wake-up timer on real timerfds: it fires once when due, can be moved or disarmed,
/// wakes when the wall clock is set, and leaves no descriptor behind.
@Suite(.serialized) struct WakeTimerTests {
    final class Wakes: Sendable {
        let list = Mutex<[WakeTimer.Reason]>([])
        func record(_ r: WakeTimer.Reason) { list.withLock { $0.append(r) } }
        var all: [WakeTimer.Reason] { list.withLock { $0 } }

        /// Waits up to `seconds` for `reason`; true when it came.
        func wait(for reason: WakeTimer.Reason, seconds: Double) async -> Bool {
            let end = ContinuousClock.now + .seconds(seconds)
            while ContinuousClock.now < end {
                if all.contains(reason) { return true }
                try? await Task.sleep(for: .milliseconds(20))
            }
            return all.contains(reason)
        }
    }

    @Test func firesOnceWhenDue() async throws {
        let wakes = Wakes()
        let timer = try WakeTimer { wakes.record($0) }
        defer { timer.stop() }
        timer.schedule(in: 1)
        #expect(await wakes.wait(for: .due, seconds: 10))
        try await Task.sleep(for: .milliseconds(1500))
        #expect(wakes.all == [.due], "a one-shot wake-up fired again")
    }

    @Test func aNewScheduleReplacesTheOldAndNilDisarms() async throws {
        let wakes = Wakes()
        let timer = try WakeTimer { wakes.record($0) }
        defer { timer.stop() }
        timer.schedule(in: 1)
        timer.schedule(in: nil)
        try await Task.sleep(for: .milliseconds(2500))
        #expect(wakes.all.isEmpty, "a disarmed timer fired")
        timer.schedule(in: 600)
        timer.schedule(in: 1)
        #expect(await wakes.wait(for: .due, seconds: 10), "the later, shorter schedule did not replace the longer one")
    }

    /// Whether this process holds CAP_SYS_TIME (bit 25 of /proc/self/status's CapEff),
    /// which setting the wall clock takes.
    static var maySetTheClock: Bool {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("CapEff:") }),
            let caps = UInt64(line.dropFirst("CapEff:".count).trimmingCharacters(in: .whitespaces), radix: 16)
        else { return false }
        return caps & (1 << 25) != 0
    }

    /// Sets the wall clock to what it already is: the kernel still reports a clock set,
    /// and the time moves by microseconds at most. Needs CAP_SYS_TIME: skipped (and shown
    /// as skipped) without it.
    @Test(.enabled(if: maySetTheClock, "setting the wall clock needs CAP_SYS_TIME"))
    func settingTheWallClockWakesIt() async throws {
        let wakes = Wakes()
        let timer = try WakeTimer { wakes.record($0) }
        defer { timer.stop() }
        timer.schedule(in: 3600)
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        try #require(clock_settime(CLOCK_REALTIME, &now) == 0, "cannot set the wall clock: \(String(cString: strerror(errno)))")
        #expect(await wakes.wait(for: .clockChanged, seconds: 10), "a clock set did not wake the timer")
        #expect(!wakes.all.contains(.due))
        // Re-armed: a second set wakes it again.
        try await Task.sleep(for: .milliseconds(100))
        clock_gettime(CLOCK_REALTIME, &now)
        _ = clock_settime(CLOCK_REALTIME, &now)
        let end = ContinuousClock.now + .seconds(10)
        while wakes.all.filter({ $0 == .clockChanged }).count < 2, ContinuousClock.now < end {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(wakes.all.filter { $0 == .clockChanged }.count == 2, "the clock watch was not re-armed")
    }

    /// Armed for a BOOTTIME instant (`WakePlan`): it fires at that instant, never
    /// before (a reading taken when it fires is past the boundary), and not a whole second
    /// after it, as a timer counting whole seconds from its arming could.
    @Test func firesAtTheBoottimeInstantNotBeforeAndNotASecondLate() async throws {
        @Sendable func bootNanos() -> Int64 {
            var t = timespec()
            clock_gettime(CLOCK_BOOTTIME, &t)
            return Int64(t.tv_sec) * 1_000_000_000 + Int64(t.tv_nsec)
        }
        let fired = Mutex<Int64?>(nil)
        let wakes = Wakes()
        let timer = try WakeTimer { reason in
            fired.withLock { $0 = $0 ?? bootNanos() }
            wakes.record(reason)
        }
        defer { timer.stop() }
        // Off any whole second: 1.3 s from now on BOOTTIME.
        let instant = bootNanos() + 1_300_000_000
        timer.schedule(inNanos: WakePlan.delay(until: instant, nowBootNanos: bootNanos()))
        #expect(await wakes.wait(for: .due, seconds: 10))
        let at = try #require(fired.withLock { $0 })
        #expect(at >= instant, "fired \(instant - at) ns before the instant")
        #expect(at - instant < 500_000_000, "fired \(at - instant) ns after the instant")
        // An instant already past wakes at once (a timerfd armed with 0 would be disarmed).
        fired.withLock { $0 = nil }
        let past = bootNanos() - 200_000_000
        timer.schedule(inNanos: WakePlan.delay(until: past, nowBootNanos: bootNanos()))
        let end = ContinuousClock.now + .seconds(10)
        while fired.withLock({ $0 }) == nil, ContinuousClock.now < end {
            try await Task.sleep(for: .milliseconds(5))
        }
        let late = try #require(fired.withLock { $0 }, "an instant already past never fired")
        #expect(late - past < 700_000_000)
    }

    @Test func stopEndsTheThreadAndNothingFiresAfter() async throws {
        let wakes = Wakes()
        let timer = try WakeTimer { wakes.record($0) }
        #expect(timer.isRunning)
        timer.schedule(in: 1)
        timer.stop()
        timer.schedule(in: 1)  // after stop: ignored, never touches a closed descriptor
        let end = ContinuousClock.now + .seconds(10)
        while timer.isRunning, ContinuousClock.now < end {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(!timer.isRunning, "the timer's thread did not end and close its descriptors")
        try await Task.sleep(for: .milliseconds(1500))
        #expect(wakes.all.isEmpty, "a stopped timer fired")
    }
}
