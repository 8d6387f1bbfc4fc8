import NIOCore
import NIOPosix

/// Monotonic time and one-shot timers for lock on logout; tests inject a manual one.
public protocol DeadlineScheduling: Sendable {
    /// Monotonic time since an arbitrary origin.
    func now() -> Duration
    /// Runs `action` once, `delay` from now, unless cancelled first.
    func schedule(after delay: Duration, _ action: @escaping @Sendable () async -> Void) -> any ScheduledDeadline
}

public protocol ScheduledDeadline: Sendable {
    func cancel()
}

/// Event-loop timers (epoll on CLOCK_MONOTONIC), like the daemon's other wake-ups; what a
/// timer does runs through `TimerEvents` (a structured task), not a task of its own.
public struct EventLoopDeadlines: DeadlineScheduling {
    let loop: any EventLoop
    let events: TimerEvents

    public init(events: TimerEvents, loop: any EventLoop = MultiThreadedEventLoopGroup.singleton.next()) {
        self.events = events
        self.loop = loop
    }

    public func now() -> Duration { .nanoseconds(Int64(NIODeadline.now().uptimeNanoseconds)) }

    public func schedule(after delay: Duration, _ action: @escaping @Sendable () async -> Void) -> any ScheduledDeadline {
        let (seconds, attoseconds) = delay.components
        let nanos = max(0, seconds) * 1_000_000_000 + max(0, attoseconds) / 1_000_000_000
        let task = loop.scheduleTask(in: .nanoseconds(nanos)) { [events] in events.post(action) }
        return Handle(task: task)
    }

    struct Handle: ScheduledDeadline {
        let task: Scheduled<Void>
        func cancel() { task.cancel() }
    }
}
