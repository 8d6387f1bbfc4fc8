import LockwipeCore

/// What the wake-up alarm needs of a timer: `WakeTimer` in the daemon, a fake in tests.
protocol WakeScheduling: AnyObject, Sendable {
    /// Wakes once, `seconds` from now; nil disarms. Replaces what was scheduled before.
    func schedule(in seconds: Int64?)
    /// Wakes once, `nanos` from now; nil disarms. Replaces what was scheduled before.
    func schedule(inNanos nanos: Int64?)
    /// Nothing wakes after this returns.
    func stop()
}

extension WakeScheduling {
    /// A timer that counts whole seconds only: rounded up (never before the instant).
    func schedule(inNanos nanos: Int64?) {
        schedule(in: nanos.map { $0 / WakePlan.second + ($0 % WakePlan.second > 0 ? 1 : 0) })
    }
}

extension WakeTimer: WakeScheduling {}

/// The Manager's one wake-up at the next threshold crossing, and which plan may set it.
///
/// A reschedule reads the store before it knows when to wake, and the Manager is free
/// while it reads: two reschedules can overlap, and the one that read older state can
/// finish last. So each takes a plan number before it reads, and only the newest plan is
/// applied; an older one finds out with `isNewest` and does nothing. The timer is created
/// at the first plan that arms it; after `stop` nothing is armed again.
final class WakeAlarm {
    typealias MakeTimer = (@escaping @Sendable (WakeTimer.Reason) -> Void) throws -> any WakeScheduling

    private var timer: (any WakeScheduling)?
    private var issued: UInt64 = 0
    private var stopped = false
    private let make: MakeTimer
    /// What a wake-up does; set before the first plan.
    var onWake: @Sendable (WakeTimer.Reason) -> Void = { _ in }

    init(make: @escaping MakeTimer = { try WakeTimer(onWake: $0) }) {
        self.make = make
    }

    /// A new plan number, taken before reading what to plan.
    func beginPlan() -> UInt64 {
        issued += 1
        return issued
    }

    /// No plan was begun after `plan`.
    func isNewest(_ plan: UInt64) -> Bool { plan == issued }

    /// Wakes `seconds` from now (nil: not at all) if `plan` is the newest; returns whether
    /// it was applied. Throws when the timer cannot be created.
    @discardableResult
    func arm(in seconds: Int64?, plan: UInt64) throws -> Bool {
        try arm(inNanos: seconds.map { $0.multipliedReportingOverflow(by: WakePlan.second).overflow ? .max : $0 * WakePlan.second }, plan: plan)
    }

    /// Wakes `nanos` from now (`WakePlan.delay` to the planned instant, from a clock read
    /// just before; nil: not at all) if `plan` is the newest; returns whether it was
    /// applied. Throws when the timer cannot be created.
    @discardableResult
    func arm(inNanos nanos: Int64?, plan: UInt64) throws -> Bool {
        guard isNewest(plan), !stopped else { return false }
        if timer == nil {
            guard nanos != nil else { return true }
            timer = try make(onWake)
        }
        timer?.schedule(inNanos: nanos)
        return true
    }

    /// Disarms whatever was planned (a damaged store: nothing can be enforced).
    func disarm() { timer?.schedule(in: nil) }

    func stop() {
        stopped = true
        timer?.stop()
        timer = nil
    }

    /// The timer's thread holds the timer, not the alarm: the owner going away stops it.
    deinit { timer?.stop() }
}
