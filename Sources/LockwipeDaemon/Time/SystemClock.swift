import Foundation
import LockwipeCore

/// Where the daemon reads time from; tests inject their own.
public protocol ClockSource: Sendable {
    func now() -> ClockReading
    /// CLOCK_BOOTTIME now, in nanoseconds, on the clock `now()` reads: the wake-up is
    /// planned for an instant on it (`WakePlan`) and the timer armed for the time left.
    func bootNanos() -> Int64
}

extension ClockSource {
    /// A clock that only has whole seconds: the start of its current second.
    public func bootNanos() -> Int64 { now().boot * WakePlan.second }
}

/// CLOCK_REALTIME, CLOCK_BOOTTIME and the kernel's boot id.
public struct SystemClock: ClockSource {
    private let bootID: String

    public init() {
        let raw = (try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8)) ?? "unknown"
        bootID = raw.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    public func now() -> ClockReading {
        var wall = timespec()
        var boot = timespec()
        clock_gettime(CLOCK_REALTIME, &wall)
        clock_gettime(CLOCK_BOOTTIME, &boot)
        func nanos(_ t: timespec) -> Int64 { Int64(t.tv_sec) * 1_000_000_000 + Int64(t.tv_nsec) }
        return ClockReading.aligned(wallNanos: nanos(wall), bootNanos: nanos(boot), bootID: bootID)
    }

    public func bootNanos() -> Int64 {
        var boot = timespec()
        clock_gettime(CLOCK_BOOTTIME, &boot)
        return Int64(boot.tv_sec) * WakePlan.second + Int64(boot.tv_nsec)
    }
}

/// ISO 8601 in UTC, as the JSON contract shows times (`ISOTimestamp.text`).
enum Timestamp {
    static func iso(_ seconds: Int64) -> String { ISOTimestamp.text(seconds) }
}
