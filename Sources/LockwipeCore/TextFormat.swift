#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The few text operations the core, the wire protocol and `lockwipectl` need from
/// outside the standard library, without full Foundation: `String(format:)`,
/// `trimmingCharacters(in:)` and `padding(toLength:)` live in Foundation proper, which
/// links ICU's data (about 30 MB) into every binary that imports it. These give the same
/// results for what lockwipe formats.
public enum TextFormat {
    /// `value` with exactly `decimals` digits after the point, rounded as C's `printf`
    /// (`%.1f`) and Foundation's `String(format:)` round: the same text as before.
    public static func fixed(_ value: Double, decimals: Int) -> String {
        precondition((0...17).contains(decimals))
        var buffer = [CChar](repeating: 0, count: 352)  // %.17f of Double.greatestFiniteMagnitude fits
        let format = "%.\(decimals)f"
        let written = withVaList([value]) { args in
            buffer.withUnsafeMutableBufferPointer { vsnprintf($0.baseAddress, $0.count, format, args) }
        }
        guard written >= 0 else { return "\(value)" }
        return buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    /// `n` and the noun in the number it takes: "1 entry", "3 entries", "0 files".
    public static func count(_ n: some BinaryInteger, _ singular: String, _ plural: String) -> String {
        "\(n) \(n == 1 ? singular : plural)"
    }

    /// `text` followed by spaces up to `width` characters; text as long or longer is
    /// returned unchanged.
    public static func padded(_ text: String, to width: Int) -> String {
        let count = text.count
        return count >= width ? text : text + String(repeating: " ", count: width - count)
    }
}

extension StringProtocol {
    /// Without leading and trailing blanks (spaces, tabs, Unicode space separators; not
    /// line breaks): Foundation's `trimmingCharacters(in: .whitespaces)`.
    public func trimmingBlanks() -> String {
        trimming { $0.isWhitespace && !$0.isNewline }
    }

    /// Without leading and trailing white space and line breaks: Foundation's
    /// `trimmingCharacters(in: .whitespacesAndNewlines)`.
    public func trimmingWhitespace() -> String {
        trimming(\.isWhitespace)
    }

    /// Without leading and trailing characters for which `drop` is true.
    public func trimming(_ drop: (Character) -> Bool) -> String {
        guard let first = firstIndex(where: { !drop($0) }) else { return "" }
        let last = lastIndex(where: { !drop($0) })!
        return String(self[first...last])
    }
}
