import LockwipeCore
import LockwipeProtocol

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// `history --since TIME`, in the forms journalctl takes that matter here.
enum SinceTime {
    /// Seconds since the epoch, or nil when `text` is no time.
    static func parse(_ text: String, now: Int64 = Int64(time(nil))) -> Int64? {
        let t = text.trimmingWhitespace().lowercased()
        switch t {
        case "now": return now
        case "today": return localMidnight(now)
        case "yesterday": return localMidnight(now - 86_400)
        case "tomorrow": return localMidnight(now + 86_400)
        default: break
        }
        if t.hasPrefix("@") { return Int64(t.dropFirst()) }
        if let ago = relative(t) { return now - ago }
        if let date = try? Date(text, strategy: .iso8601) { return Int64(date.timeIntervalSince1970) }
        return local(t)
    }

    /// "-2h", "2h ago", "90min ago", "3d ago", "1w ago": seconds back.
    private static func relative(_ t: String) -> Int64? {
        var s = Substring(t)
        if s.hasPrefix("-") {
            s = s.dropFirst()
        } else if s.hasSuffix(" ago") {
            s = s.dropLast(4)
        } else {
            return nil
        }
        s = Substring(s.trimmingWhitespace())
        let digits = s.prefix { $0.isNumber }
        guard let n = Int64(digits) else { return nil }
        let units: [String: Int64] = [
            "s": 1, "sec": 1, "second": 1, "seconds": 1, "m": 60, "min": 60, "minute": 60, "minutes": 60, "h": 3600, "hour": 3600,
            "hours": 3600, "d": 86_400, "day": 86_400, "days": 86_400, "w": 604_800, "week": 604_800, "weeks": 604_800,
        ]
        let unit = s.dropFirst(digits.count).trimmingWhitespace()
        guard let factor = units[unit.isEmpty ? "s" : unit] else { return nil }
        return n * factor
    }

    /// "2026-11-26", "2026-11-26 10:00", "2026-11-26 10:00:30" in local time.
    private static func local(_ t: String) -> Int64? {
        let halves = t.split(separator: " ", omittingEmptySubsequences: true)
        guard halves.count == 1 || halves.count == 2 else { return nil }
        let date = halves[0].split(separator: "-").map { Int32($0) }
        let clock = halves.count == 2 ? halves[1].split(separator: ":").map { Int32($0) } : [0, 0]
        guard date.count == 3, (2...3).contains(clock.count), !date.contains(nil), !clock.contains(nil) else { return nil }
        var parts = tm()
        parts.tm_year = date[0]! - 1900
        parts.tm_mon = date[1]! - 1
        parts.tm_mday = date[2]!
        parts.tm_hour = clock[0]!
        parts.tm_min = clock[1]!
        parts.tm_sec = clock.count == 3 ? clock[2]! : 0
        parts.tm_isdst = -1
        guard (1...12).contains(date[1]!), (1...31).contains(date[2]!), (0...23).contains(clock[0]!), (0...59).contains(clock[1]!) else { return nil }
        let seconds = mktime(&parts)
        return seconds == -1 ? nil : Int64(seconds)
    }

    private static func localMidnight(_ at: Int64) -> Int64 {
        var t = time_t(at)
        var parts = tm()
        localtime_r(&t, &parts)
        parts.tm_hour = 0
        parts.tm_min = 0
        parts.tm_sec = 0
        parts.tm_isdst = -1
        return Int64(mktime(&parts))
    }
}

/// `history --follow`: asks again from the newest time printed (whole seconds), and
/// drops what was printed already at that second.
enum HistoryFollowing {
    nonisolated(unsafe) static var last: Int64? = nil
    nonisolated(unsafe) private static var printedAtLast: Set<String> = []

    static func new(_ events: [HistoryEvent]) -> [HistoryEvent] {
        var fresh: [HistoryEvent] = []
        for e in events {
            let key = self.key(e)
            if printedAtLast.contains(key) { continue }
            fresh.append(e)
        }
        let now = Int64(time(nil))
        let newest = events.compactMap { try? Date($0.time, strategy: .iso8601) }.map { Int64($0.timeIntervalSince1970) }.max()
        if let newest, newest != last {
            last = newest
            printedAtLast = []
        }
        if last == nil { last = now }
        for e in events where (try? Date(e.time, strategy: .iso8601)).map({ Int64($0.timeIntervalSince1970) }) == last {
            printedAtLast.insert(key(e))
        }
        return fresh
    }

    private static func key(_ e: HistoryEvent) -> String {
        let encoder = VarlinkCoding.encoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? encoder.encode(e)).map { String(decoding: $0, as: UTF8.self) } ?? "\(e.time) \(e.user) \(e.kind) \(e.detail)"
    }
}
