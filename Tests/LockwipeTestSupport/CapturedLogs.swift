import Logging
import Synchronization

/// What a Manager logged, kept for a test to read: each entry's level, message and
/// metadata (its `message_id` above all: the journal's key for what happened).
public final class CapturedLogs: Sendable {
    public struct Entry: Sendable {
        public var level: Logger.Level
        public var message: String
        public var metadata: Logger.Metadata
        /// The entry's `MESSAGE_ID`, if it has one.
        public var messageID: String? {
            if case .string(let id) = metadata["message_id"] { return id }
            return nil
        }
    }

    private let entries = Mutex<[Entry]>([])

    public init() {}

    /// Every entry so far, oldest first.
    public var all: [Entry] { entries.withLock { $0 } }

    /// The entries with this `MESSAGE_ID` (the raw 32 hex digits).
    public func with(messageID: String) -> [Entry] { all.filter { $0.messageID == messageID } }

    /// A logger that records here (every level).
    public var logger: Logger {
        var logger = Logger(label: "test") { _ in Handler(logs: self) }
        logger.logLevel = .trace
        return logger
    }

    fileprivate func append(_ entry: Entry) { entries.withLock { $0.append(entry) } }

    private struct Handler: LogHandler {
        let logs: CapturedLogs
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?, source: String, file: String, function: String, line: UInt) {
            var merged = self.metadata
            merged.merge(metadata ?? [:]) { _, new in new }
            logs.append(Entry(level: level, message: "\(message)", metadata: merged))
        }
    }
}
