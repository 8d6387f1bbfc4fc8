import Logging

/// Pure mapping from swift-log entries to journal fields and to the plain stderr line.
///
/// Invariant: every field name produced here is a valid journal field name that an
/// unprivileged sender may set (`[A-Z0-9_]`, not starting with `_` or a digit, at most
/// 64 characters), and metadata can never replace `MESSAGE` or `PRIORITY`: only the
/// well-known fields below keep their name, everything else lands under `LOCKWIPE_`.
public enum JournalFields {
    /// One journal field; `name` is already sanitized.
    public struct Field: Sendable, Hashable {
        public var name: String
        public var value: String

        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// Metadata keys that keep their journal meaning instead of being namespaced.
    public static let wellKnownFields: Set<String> = [
        "MESSAGE_ID", "CODE_FILE", "CODE_LINE", "CODE_FUNC", "SYSLOG_IDENTIFIER",
    ]

    /// The namespace of the daemon's own fields, so `journalctl LOCKWIPE_ACTION=wipe` works.
    public static let prefix = "LOCKWIPE_"

    /// journald rejects longer field names.
    public static let maximumNameLength = 64

    /// Metadata key -> valid journal field name (see the type's invariant).
    ///
    /// Each character that is not an ASCII letter, digit or `_` becomes one `_`; leading
    /// underscores are stripped (a `_` prefix is reserved for trusted fields such as `_PID`);
    /// the `LOCKWIPE_` prefix also makes a leading digit valid.
    public static func fieldName(forMetadataKey key: String) -> String {
        var name = ""
        name.reserveCapacity(key.utf8.count)
        for character in key {
            guard let ascii = character.asciiValue, character.unicodeScalars.count == 1 else {
                name.append("_")
                continue
            }
            switch ascii {
            case UInt8(ascii: "a")...UInt8(ascii: "z"):
                name.unicodeScalars.append(Unicode.Scalar(ascii - 32))
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"):
                name.unicodeScalars.append(Unicode.Scalar(ascii))
            default:
                name.append("_")
            }
        }
        let stripped = name.drop(while: { $0 == "_" })
        let result: String
        if wellKnownFields.contains(String(stripped)) || stripped.hasPrefix(prefix) {
            result = String(stripped)
        } else {
            result = prefix + (stripped.isEmpty ? "UNNAMED" : stripped)
        }
        return String(result.prefix(maximumNameLength))
    }

    /// A duration as journal fields spell it: whole microseconds, in a field whose name ends
    /// in `_USEC` (as systemd's own `_SOURCE_REALTIME_TIMESTAMP`, `WATCHDOG_USEC` do), so
    /// every elapsed time in the journal has one unit. Rounded to the nearest; never negative.
    public static func microseconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0, duration > .zero else { return "0" }
        return String(seconds * 1_000_000 + (attoseconds + 500_000_000_000) / 1_000_000_000_000)
    }

    /// ``microseconds(_:)`` of a time in seconds.
    public static func microseconds(seconds: Double) -> String {
        guard seconds.isFinite, seconds > 0 else { return "0" }
        return String(Int64((seconds * 1_000_000).rounded()))
    }

    /// swift-log level -> syslog priority (`PRIORITY=`); trace has no syslog level below debug.
    public static func priority(for level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }

    /// Metadata flattened to journal fields, sorted by name (ties keep a deterministic order).
    ///
    /// A nested dictionary contributes `PARENT_CHILD` fields; an array contributes one field
    /// per element under the same name (the journal allows repeated fields, and
    /// `journalctl FIELD=value` then matches any element).
    public static func fields(forMetadata metadata: Logger.Metadata) -> [Field] {
        var fields: [Field] = []
        for key in metadata.keys.sorted() {
            flatten(path: key, value: metadata[key]!, into: &fields)
        }
        return fields.enumerated()
            .sorted { lhs, rhs in
                lhs.element.name != rhs.element.name ? lhs.element.name < rhs.element.name : lhs.offset < rhs.offset
            }
            .map(\.element)
    }

    private static func flatten(path: String, value: Logger.MetadataValue, into fields: inout [Field]) {
        switch value {
        case .string(let string):
            fields.append(Field(name: fieldName(forMetadataKey: path), value: string))
        case .stringConvertible(let convertible):
            fields.append(Field(name: fieldName(forMetadataKey: path), value: convertible.description))
        case .dictionary(let dictionary):
            for key in dictionary.keys.sorted() {
                flatten(path: path + "_" + key, value: dictionary[key]!, into: &fields)
            }
        case .array(let array):
            for element in array {
                flatten(path: path, value: element, into: &fields)
            }
        }
    }

    /// All `FIELD=value` strings of one journal entry, values passed through unchanged.
    ///
    /// Order: MESSAGE, PRIORITY, SYSLOG_IDENTIFIER, CODE_FILE, CODE_LINE, CODE_FUNC, then the
    /// metadata fields sorted by name. A metadata field with one of those well-known names
    /// (other than MESSAGE/PRIORITY, which metadata cannot reach) replaces the default.
    public static func entry(
        message: String,
        level: Logger.Level,
        metadata: Logger.Metadata,
        file: String,
        function: String,
        line: UInt,
        syslogIdentifier: String
    ) -> [String] {
        let metadataFields = fields(forMetadata: metadata)
        let overridden = Set(metadataFields.map(\.name))
        var all: [Field] = [
            Field(name: "MESSAGE", value: message),
            Field(name: "PRIORITY", value: String(priority(for: level))),
        ]
        let defaults = [
            Field(name: "SYSLOG_IDENTIFIER", value: syslogIdentifier),
            Field(name: "CODE_FILE", value: file),
            Field(name: "CODE_LINE", value: String(line)),
            Field(name: "CODE_FUNC", value: function),
        ]
        all += defaults.filter { !overridden.contains($0.name) }
        all += metadataFields
        return all.map { $0.name + "=" + $0.value }
    }

    /// The plain one-line form: `<level> <message> [FIELD=value ...]`.
    ///
    /// Only metadata fields are listed (journal-name form, sorted by name). A value that is
    /// empty or holds whitespace, `=`, `"`, `\` or a control character is double-quoted with
    /// C-style escapes, so the line never breaks and stays unambiguous to grep and to split.
    /// Newlines and other control characters in the message are escaped the same way.
    public static func stderrLine(message: String, level: Logger.Level, metadata: Logger.Metadata) -> String {
        var line = level.rawValue
        if !message.isEmpty {
            line += " " + escaped(message, escapeQuotes: false)
        }
        for field in fields(forMetadata: metadata) {
            line += " " + field.name + "=" + quotedIfNeeded(field.value)
        }
        return line
    }

    static func quotedIfNeeded(_ value: String) -> String {
        let needsQuotes =
            value.isEmpty
            || value.unicodeScalars.contains { scalar in
                scalar.properties.isWhitespace || scalar == "=" || scalar == "\"" || scalar == "\\"
                    || isControl(scalar)
            }
        return needsQuotes ? "\"" + escaped(value, escapeQuotes: true) + "\"" : value
    }

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || scalar.value == 0x7F
    }

    /// Escapes control characters (tab kept in messages); with `escapeQuotes`, also `"` and `\`.
    private static func escaped(_ text: String, escapeQuotes: Bool) -> String {
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": out.append(contentsOf: #"\n"#.unicodeScalars)
            case "\r": out.append(contentsOf: #"\r"#.unicodeScalars)
            case "\t" where escapeQuotes: out.append(contentsOf: #"\t"#.unicodeScalars)
            case "\t": out.append(scalar)
            case "\"" where escapeQuotes: out.append(contentsOf: #"\""#.unicodeScalars)
            case "\\" where escapeQuotes: out.append(contentsOf: #"\\"#.unicodeScalars)
            case _ where isControl(scalar):
                let hex = String(scalar.value, radix: 16, uppercase: true)
                out.append(contentsOf: ("\\x" + (hex.count < 2 ? "0" + hex : hex)).unicodeScalars)
            default: out.append(scalar)
            }
        }
        return String(out)
    }
}
