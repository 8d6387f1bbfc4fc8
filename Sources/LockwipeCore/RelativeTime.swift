/// Human durations for operators: the two largest units, e.g. "2d 4h", "3h", "45s".
public enum RelativeTime {
    private static let units: [(size: Int64, name: String)] = [(86_400, "d"), (3_600, "h"), (60, "m"), (1, "s")]

    public static func format(seconds: Int64) -> String {
        let s = max(0, seconds)
        guard let first = units.firstIndex(where: { s >= $0.size }) else { return "0s" }
        let major = s / units[first].size
        var text = "\(major)\(units[first].name)"
        if first + 1 < units.count {
            let minor = (s % units[first].size) / units[first + 1].size
            if minor > 0 { text += " \(minor)\(units[first + 1].name)" }
        }
        return text
    }
}
