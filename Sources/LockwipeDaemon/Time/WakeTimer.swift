import CLockwipeFS
import Foundation
import LockwipeBase

/// The daemon's one sleep until the next threshold crossing. An event-loop timer would
/// miss two things the offline policy needs (README.md, "Configuration"):
/// - it runs on CLOCK_MONOTONIC, which stops while the machine is suspended. This timer
///   runs on CLOCK_BOOTTIME, which counts suspended time: a laptop that slept through its
///   lock threshold locks when it wakes, not days later;
/// - offline time also counts wall-clock time, so a wall clock set forward can make an
///   action due at once. A CLOCK_REALTIME timerfd armed with `TFD_TIMER_CANCEL_ON_SET`
///   wakes when the clock is set, and the kernel cancels it on resume from suspend too.
///
/// One thread blocks in poll(2) on the two timerfds and an eventfd that stops it: no
/// periodic wake-ups.
final class WakeTimer: @unchecked Sendable {
    enum Reason: Sendable, Equatable {
        /// The time given to `schedule` has passed (suspended time included).
        case due
        /// The wall clock was set, or the machine resumed from suspend.
        case clockChanged
    }

    private let dueFD: Int32
    private let clockFD: Int32
    private let stopFD: Int32
    /// Guards `stopped` and the descriptors' lifetime against `schedule` after `stop`.
    private let lock = NSLock()
    private var stopped = false
    private var closed = false

    /// False once the thread has ended and closed its descriptors.
    var isRunning: Bool { lock.withLock { !closed } }
    private let onWake: @Sendable (Reason) -> Void

    init(onWake: @escaping @Sendable (Reason) -> Void) throws(FileSystemError) {
        self.onWake = onWake
        let due = lockwipe_timerfd_create(CLOCK_BOOTTIME)
        guard due >= 0 else { throw FileSystemError("timerfd_create(CLOCK_BOOTTIME)", "") }
        let clock = lockwipe_timerfd_create(CLOCK_REALTIME)
        guard clock >= 0 else {
            let e = errno
            close(due)
            throw FileSystemError("timerfd_create(CLOCK_REALTIME)", "", code: e)
        }
        let stop = lockwipe_eventfd()
        guard stop >= 0 else {
            let e = errno
            close(due)
            close(clock)
            throw FileSystemError("eventfd", "", code: e)
        }
        (dueFD, clockFD, stopFD) = (due, clock, stop)
        armClockWatch()
        NamedThread.start("lockwiped-wake") { [self] in run() }
    }

    /// Wakes once, `seconds` (at least 1) from now on CLOCK_BOOTTIME; nil disarms.
    /// Replaces what was scheduled before.
    func schedule(in seconds: Int64?) {
        lock.withLock {
            guard !stopped else { return }
            _ = lockwipe_timerfd_arm_relative(dueFD, seconds.map { max(1, $0) } ?? 0)
        }
    }

    /// Wakes once, `nanos` (at least 1) nanoseconds from now on CLOCK_BOOTTIME; nil
    /// disarms. Replaces what was scheduled before. The caller reads the clock, then arms:
    /// the timer starts counting after that read, so it never fires before the instant
    /// planned from it (`WakePlan.delay`). Relative, not `TFD_TIMER_ABSTIME`: libfaketime,
    /// which the benchmarks and system tests preload, rewrites absolute timerfd expiries as
    /// if they were on its faked wall clock.
    func schedule(inNanos nanos: Int64?) {
        lock.withLock {
            guard !stopped else { return }
            if let nanos {
                _ = lockwipe_timerfd_arm_relative_nanos(dueFD, max(1, nanos))
            } else {
                _ = lockwipe_timerfd_arm_relative(dueFD, 0)
            }
        }
    }

    /// Ends the thread; the descriptors are closed by it. Nothing wakes after this returns.
    func stop() {
        lock.withLock {
            guard !stopped else { return }
            stopped = true
            var one: UInt64 = 1
            _ = write(stopFD, &one, 8)
        }
    }

    deinit { stop() }

    /// An absolute CLOCK_REALTIME expiry far in the future: it never expires, it only gets
    /// cancelled (read fails with ECANCELED) when the clock is set. Re-armed after each.
    private func armClockWatch() {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        _ = lockwipe_timerfd_arm_cancel_on_set(clockFD, Int64(now.tv_sec) + 10 * 365 * 86_400)
    }

    private func run() {
        var fds = [
            pollfd(fd: dueFD, events: Int16(POLLIN), revents: 0),
            pollfd(fd: clockFD, events: Int16(POLLIN), revents: 0),
            pollfd(fd: stopFD, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            if poll(&fds, nfds_t(fds.count), -1) < 0 {
                if errno == EINTR { continue }
                break
            }
            if fds[2].revents != 0 { break }
            var expirations: UInt64 = 0
            if fds[0].revents != 0, read(dueFD, &expirations, 8) == 8 {
                onWake(.due)
            }
            if fds[1].revents != 0 {
                let n = read(clockFD, &expirations, 8)
                if n < 0 && errno == ECANCELED {
                    armClockWatch()
                    onWake(.clockChanged)
                } else if n == 8 {
                    armClockWatch()  // ten years of uptime: arm again
                }
            }
        }
        lock.withLock {
            stopped = true
            close(dueFD)
            close(clockFD)
            close(stopFD)
            closed = true
        }
    }
}
