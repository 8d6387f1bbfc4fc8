/// The seconds since the epoch of a timestamp as lockwiped writes it, `2026-11-23T20:31:05Z`
/// (`text`), and back, without Foundation: the first `Date.ISO8601FormatStyle`
/// of a process builds a Gregorian calendar and reads the time zone, 1.4 million
/// instructions of `lockwipectl status` (docs/benchmarks.md). Anything else is nil: the
/// caller falls back to Foundation's parser for it.
public enum ISOTimestamp {
    public static func seconds(_ text: String) -> Int64? {
        let b = Array(text.utf8)
        guard b.count == 20, b[4] == 0x2D, b[7] == 0x2D, b[10] == 0x54, b[13] == 0x3A, b[16] == 0x3A, b[19] == 0x5A else { return nil }
        func number(_ from: Int, _ count: Int) -> Int64? {
            var value: Int64 = 0
            for i in from..<from + count {
                guard b[i] >= 0x30, b[i] <= 0x39 else { return nil }
                value = value * 10 + Int64(b[i] - 0x30)
            }
            return value
        }
        guard let year = number(0, 4), let month = number(5, 2), let day = number(8, 2), let hour = number(11, 2),
            let minute = number(14, 2), let second = number(17, 2)
        else { return nil }
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let monthDays: [Int64] = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        guard year >= 1970, (1...12).contains(month), day >= 1, day <= monthDays[Int(month - 1)], hour < 24, minute < 60, second < 60 else {
            return nil
        }
        // Days from the civil date (Howard Hinnant's days_from_civil), for years from 1970.
        let y = month <= 2 ? year - 1 : year
        let era = y / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        return days * 86_400 + hour * 3_600 + minute * 60 + second
    }

    /// `2026-11-23T20:31:05Z`: ISO 8601 in UTC, as the JSON contract shows times. Built
    /// from the digits: Foundation's `String(format:)` cost more than the rest of a status
    /// report together.
    public static func text(_ seconds: Int64) -> String {
        let inDay = (seconds % 86_400 + 86_400) % 86_400
        let days = (seconds - inDay) / 86_400
        // The civil date of a day count (Howard Hinnant's civil_from_days).
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        var text = ""
        text.reserveCapacity(20)
        func digits(_ value: Int64, _ width: Int) {
            let s = String(value)
            if s.count < width { text.append(String(repeating: "0", count: width - s.count)) }
            text.append(s)
        }
        digits(year, 4)
        text.append("-")
        digits(month, 2)
        text.append("-")
        digits(day, 2)
        text.append("T")
        digits(inDay / 3_600, 2)
        text.append(":")
        digits(inDay % 3_600 / 60, 2)
        text.append(":")
        digits(inDay % 60, 2)
        text.append("Z")
        return text
    }
}
