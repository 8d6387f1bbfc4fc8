import CSystemd
import Logging

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

/// swift-log handler writing structured entries to the systemd journal (`sd_journal_sendv`),
/// or one plain line per entry to stderr when there is no journal socket.
///
/// A value type with only `Sendable` stored state: every `Logger` copy owns its level and
/// metadata, and emitting is a single syscall (one datagram to journald, or one write(2) to
/// stderr), so concurrent entries never interleave and no lock is needed.
public struct JournalLogHandler: LogHandler {
    public enum Sink: Sendable {
        case journal
        case stderr
    }

    /// Where journald listens for native-protocol entries.
    public static let journalSocketPath = "/run/systemd/journal/socket"

    /// `.journal` when /run/systemd/journal/socket exists and LOCKWIPE_LOG != "stderr", else `.stderr`.
    public static func defaultSink() -> Sink {
        defaultSink(
            environment: ProcessInfo.processInfo.environment,
            journalSocketExists: access(journalSocketPath, F_OK) == 0
        )
    }

    /// The decision of ``defaultSink()`` without reading the process state.
    public static func defaultSink(environment: [String: String], journalSocketExists: Bool) -> Sink {
        if environment["LOCKWIPE_LOG"] == "stderr" { return .stderr }
        return journalSocketExists ? .journal : .stderr
    }

    /// Whether stderr is connected to the journal: `JOURNAL_STREAM` (set by systemd for a
    /// service whose stdout or stderr is a journal stream) holds the device and inode of
    /// file descriptor 2. Then stderr lines carry sd-daemon(3) `<N>` priority prefixes,
    /// which journald reads as the entry's priority (and strips); on a terminal, in a file
    /// or a pipe they would only be noise, and systemd itself prefixes only in this case.
    public static func stderrIsJournalStream() -> Bool {
        var st = stat()
        guard fstat(STDERR_FILENO, &st) == 0 else { return false }
        return stderrIsJournalStream(journalStream: ProcessInfo.processInfo.environment["JOURNAL_STREAM"], device: UInt64(st.st_dev), inode: UInt64(st.st_ino))
    }

    /// The decision of ``stderrIsJournalStream()`` without reading the process state:
    /// `journalStream` is `JOURNAL_STREAM` ("DEVICE:INODE", decimal), `device` and `inode`
    /// are stderr's.
    public static func stderrIsJournalStream(journalStream: String?, device: UInt64, inode: UInt64) -> Bool {
        guard let parts = journalStream?.split(separator: ":", omittingEmptySubsequences: false), parts.count == 2,
            let d = UInt64(parts[0]), let i = UInt64(parts[1])
        else { return false }
        return d == device && i == inode
    }

    /// The sd-daemon(3) prefix of a level: `<3>` for error, `<6>` for info.
    public static func priorityPrefix(for level: Logger.Level) -> String { "<\(JournalFields.priority(for: level))>" }

    public let label: String
    public let sink: Sink
    /// Stderr lines start with `<N>` (see ``stderrIsJournalStream()``).
    public let prefixesPriority: Bool
    public let syslogIdentifier: String
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?

    /// Where `.stderr` lines (and journal fallbacks) go; a test seam.
    var stderrDescriptor: CInt = STDERR_FILENO

    public init(label: String, sink: Sink, syslogIdentifier: String = "lockwiped", prefixesPriority: Bool = false) {
        self.label = label
        self.sink = sink
        self.prefixesPriority = prefixesPriority
        self.syslogIdentifier = syslogIdentifier
        self.metadataProvider = LoggingSystem.metadataProvider
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let merged = mergedMetadata(event)
        let message = event.message.description
        switch sink {
        case .journal:
            let fields = JournalFields.entry(
                message: message, level: event.level, metadata: merged,
                file: event.file, function: event.function, line: event.line,
                syslogIdentifier: syslogIdentifier
            )
            // If journald went away, the entry still reaches someone: under systemd,
            // stderr is itself connected to the journal.
            if Self.sendToJournal(fields) < 0 {
                Self.writeLine(stderrLine(message: message, level: event.level, metadata: merged), to: stderrDescriptor)
            }
        case .stderr:
            Self.writeLine(stderrLine(message: message, level: event.level, metadata: merged), to: stderrDescriptor)
        }
    }

    /// The stderr line, with its `<N>` prefix when stderr is a journal stream.
    func stderrLine(message: String, level: Logger.Level, metadata: Logger.Metadata) -> String {
        let line = JournalFields.stderrLine(message: message, level: level, metadata: metadata)
        return prefixesPriority ? Self.priorityPrefix(for: level) + line : line
    }

    /// Handler metadata, then the metadata provider, then the call's own metadata (later wins),
    /// plus the event's error under `error` unless the call already set that key.
    func mergedMetadata(_ event: LogEvent) -> Logger.Metadata {
        var merged = metadata
        if let provided = metadataProvider?.get(), !provided.isEmpty {
            merged.merge(provided) { _, new in new }
        }
        if let explicit = event.metadata, !explicit.isEmpty {
            merged.merge(explicit) { _, new in new }
        }
        if let error = event.error, merged["error"] == nil {
            merged["error"] = .string(String(describing: error))
        }
        return merged
    }

    /// Sends one entry; returns 0 or -errno from `sd_journal_sendv`.
    @discardableResult
    static func sendToJournal(_ fields: [String]) -> CInt {
        withIOVecs(fields) { iovecs in
            sd_journal_sendv(iovecs.baseAddress, CInt(iovecs.count))
        }
    }

    /// One iovec per field over a single contiguous buffer that lives for the call, so values
    /// are passed byte for byte (newlines included: sd_journal_sendv length-prefixes them).
    static func withIOVecs<R>(_ fields: [String], _ body: (UnsafeBufferPointer<iovec>) -> R) -> R {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(fields.reduce(0) { $0 + $1.utf8.count })
        var ranges: [Range<Int>] = []
        ranges.reserveCapacity(fields.count)
        for field in fields {
            let start = bytes.count
            bytes.append(contentsOf: field.utf8)
            ranges.append(start..<bytes.count)
        }
        return bytes.withUnsafeMutableBytes { raw in
            let iovecs = ranges.map { range in
                iovec(iov_base: raw.baseAddress.map { $0 + range.lowerBound }, iov_len: range.count)
            }
            return iovecs.withUnsafeBufferPointer(body)
        }
    }

    /// Writes `line` plus a newline with one write(2) (retried only for EINTR or a short write),
    /// so lines from concurrent tasks do not interleave.
    static func writeLine(_ line: String, to fd: CInt) {
        var data = Array(line.utf8)
        data.append(UInt8(ascii: "\n"))
        data.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return
                }
                offset += written
            }
        }
    }
}
