// The words several verbs print for the same reply: the processes a lock ends, a running
// wipe's progress, what a wipe dry run would do.

import LockwipeCore
import LockwipeProtocol

/// "alice: will end 3 processes: 1201 bash, 1250 vim, 1302 sleep" (the first 10, then a count).
func processLines(_ p: ActionResult) -> [String] {
    guard let list = p.processes, !list.isEmpty else { return [] }
    let shown = list.prefix(10).map { "\($0.pid) \($0.comm)" }.joined(separator: ", ")
    let more = list.count > 10 ? " and \(list.count - 10) more" : ""
    return ["\(p.user): will end \(list.count) process\(list.count == 1 ? "" : "es"): \(shown)\(more)"]
}

/// A running wipe's progress, the same words in `status` and on `wipe`'s progress line,
/// most telling first so that a line cut to the terminal's width keeps the ETA:
/// "wiping: 1200/10000 files, 120 MiB of 1.0 GiB, ETA 2s, 410 MiB/s, 1100 entries removed";
/// "wiping: 900 entries removed, ETA 3s, 300 entries/s" when nothing is overwritten.
func describe(_ p: WipeProgressInfo) -> String {
    if p.phase == "counting" { return "wiping: counting what to overwrite (\(TextFormat.fixed(p.elapsedSeconds, decimals: 0)) s)" }
    let eta = p.etaSeconds.map { "ETA \(RelativeTime.format(seconds: Int64($0.rounded(.up))))" }
    var parts: [String?]
    if let total = p.bytesTotal {
        let files = p.filesTotal.map { "\(p.filesOverwritten)/\($0) files" } ?? "\(p.filesOverwritten) files"
        parts = [
            "wiping: \(files)", "\(TextFormat.bytes(p.bytesOverwritten)) of \(TextFormat.bytes(total))", eta,
            p.bytesPerSecond > 0 ? "\(TextFormat.bytes(Int64(p.bytesPerSecond)))/s" : nil, TextFormat.count(p.entriesRemoved, "entry", "entries") + " removed",
        ]
    } else {
        parts = [
            "wiping: " + TextFormat.count(p.entriesRemoved, "entry", "entries") + " removed", eta,
            p.entriesPerSecond > 0 ? TextFormat.fixed(p.entriesPerSecond, decimals: 0) + " entries/s" : nil,
        ]
    }
    if p.skipped > 0 { parts.append("\(p.skipped) skipped") }
    return parts.compactMap { $0 }.joined(separator: ", ")
}

/// What `wipe --dry-run` prints for one vault.
func previewLines(_ p: WipePreview) -> [String] {
    let at = "\(p.user): \(p.path)"
    if let problem = p.problem { return ["\(at): \(problem); a wipe would not touch it and would stay pending"] }
    let entries = p.files + p.directories + p.otherEntries
    let floor = p.partial ? "at least " : ""
    var lines: [String] = []
    switch p.method {
    case .cryptoErase:
        lines.append("\(at): would crypto-erase: destroy the vault key, then unlink \(floor)\(TextFormat.count(entries, "entry", "entries")) (ciphertext)")
    case .overwrite:
        lines.append(
            "\(at): would overwrite \(floor)\(p.files) files (\(TextFormat.bytes(p.bytes)), \(p.passes) \(p.pattern) pass\(p.passes == 1 ? "" : "es"))"
                + " and unlink \(floor)\(TextFormat.count(entries, "entry", "entries")) (\(p.directories) director\(p.directories == 1 ? "y" : "ies"), \(p.otherEntries) other)")
    case .unlink:
        lines.append("\(at): would unlink \(floor)\(TextFormat.count(entries, "entry", "entries")) without overwriting ([wipe] passes = 0)")
    }
    if let m = p.media {
        var media = "on \(m.filesystem)" + (m.filesystemUUID.map { " (UUID \($0))" } ?? "")
        for d in m.devices {
            var facts = [d.model, d.serial.map { "serial \($0)" }, d.rotational.map { $0 ? "rotational" : "non-rotational" }].compactMap { $0 }
            if let file = d.backingFile { facts.append("backed by \(file)") }
            media += ", device \(d.partition ?? d.name)" + (facts.isEmpty ? "" : " (" + facts.joined(separator: ", ") + ")")
        }
        lines.append("\(at): \(media)")
    }
    lines += p.mountPoints.map { "\(at): would NOT enter \($0) (a mount point of another file system): the wipe would be incomplete" }
    lines += p.caveats.map { "\(at): caveat (\($0.kind.rawValue)): \($0.detail)" }
    return lines
}
