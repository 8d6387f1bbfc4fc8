import Foundation
import LockwipeCore

/// Where the daemon reads time from; tests inject their own.
public protocol ClockSource: Sendable {
    func now() -> ClockReading
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
        return ClockReading(wall: Int64(wall.tv_sec), boot: Int64(boot.tv_sec), bootID: bootID)
    }
}

/// ISO 8601 in UTC, as the JSON contract shows times.
enum Timestamp {
    static func iso(_ seconds: Int64) -> String {
        var t = time_t(seconds)
        var parts = tm()
        gmtime_r(&t, &parts)
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02dZ",
            Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday),
            Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec))
    }
}
