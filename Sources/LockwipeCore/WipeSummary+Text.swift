/// The one place a wipe report is put into words: the history and journal line, the
/// action's result, and the lines `lockwipectl` prints under it. Three texts for three
/// readers, worded together so they never disagree.
extension WipeSummary {
    /// A crypto-erase in one sentence.
    public var cryptoEraseText: String {
        var after = ""
        if let seconds = keyDestroyedSeconds { after = " (" + TextFormat.fixed(seconds, decimals: 3) + " s after the wipe request)" }
        return "crypto-erased: key destroyed at \(keyDestroyedAt ?? "?")\(after), \(TextFormat.count(entriesRemoved, "entry", "entries")) removed, no overwrite pass needed"
    }

    /// The history event and journal line of one finished attempt.
    public func recordText(resumed: Bool) -> String {
        let overwritten =
            passes == 0
            ? "unlink only (passes = 0)"
            : "\(TextFormat.count(filesOverwritten, "file", "files")) overwritten (\(bytesOverwritten) bytes, \(passes) \(pattern) pass\(passes == 1 ? "" : "es"))"
        let again = resumed ? " (resumed)" : ""
        // The caveats' kinds only: their sentences are in the report and the certificate.
        let caveated = caveats.isEmpty ? "" : "; caveats: " + Set(caveats.map(\.kind.rawValue)).sorted().joined(separator: ", ")
        if complete && cryptoErased { return cryptoEraseText + again + caveated }
        if complete {
            return "\(TextFormat.count(entriesRemoved, "entry", "entries")) removed, \(overwritten) in \(TextFormat.fixed(elapsedSeconds, decimals: 2)) s\(again)\(caveated)"
        }
        return "incomplete: " + skipped.prefix(20).map { "\($0.path): \($0.reason)" }.joined(separator: "; ") + caveated
    }

    /// The result of the wipe request (the first line `lockwipectl` prints for the user).
    public var resultText: String {
        guard complete else {
            return "INCOMPLETE: \(TextFormat.count(entriesRemoved, "entry", "entries")) removed, \(skipped.count) could not be removed; the wipe stays pending"
        }
        return cryptoErased ? "wiped: " + cryptoEraseText : "wiped: \(TextFormat.count(entriesRemoved, "entry", "entries")) removed"
    }

    /// The report lines `lockwipectl` prints under the result.
    public var reportLines: [String] {
        var lines: [String] = []
        let took = "in \(TextFormat.fixed(elapsedSeconds, decimals: 2)) s"
        if cryptoErased {
            let after = keyDestroyedSeconds.map { " (" + TextFormat.fixed($0, decimals: 3) + " s after the request)" } ?? ""
            lines.append(
                "crypto-erased: key destroyed at \(keyDestroyedAt ?? "?")\(after); \(TextFormat.count(entriesRemoved, "entry", "entries")) (ciphertext) removed, no overwrite pass needed, \(took)"
            )
        } else {
            let how = passes == 0 ? "no overwrite (passes = 0)" : "\(passes) \(pattern) pass\(passes == 1 ? "" : "es")"
            lines.append(
                "removed \(TextFormat.count(entriesRemoved, "entry", "entries")), overwrote \(TextFormat.count(filesOverwritten, "file", "files")) (\(TextFormat.bytes(bytesOverwritten)), \(how)) \(took)"
            )
            if attributesCleared > 0 { lines.append("cleared the immutable/append-only attribute of \(TextFormat.count(attributesCleared, "entry", "entries"))") }
        }
        lines += skipped.map { "not removed: \($0.path): \($0.reason)" }
        lines += caveats.map { "caveat (\($0.kind.rawValue)): \($0.path): \($0.detail)" }
        return lines
    }
}

extension TextFormat {
    /// A byte count for people: "512 B", "1.5 KiB", "3.0 GiB".
    public static func bytes(_ n: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(n)
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(n) B" : fixed(value, decimals: 1) + " " + units[unit]
    }
}
