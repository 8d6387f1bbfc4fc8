import Logging
import Testing

@testable import LockwipeSystemd

@Suite struct JournalFieldsTests {
    @Test(arguments: [
        ("user", "LOCKWIPE_USER"),
        ("peer-uid", "LOCKWIPE_PEER_UID"),
        ("Peer.Uid", "LOCKWIPE_PEER_UID"),
        ("offline seconds", "LOCKWIPE_OFFLINE_SECONDS"),
        ("ACTION", "LOCKWIPE_ACTION"),
        // A leading "_" is reserved for trusted fields (_PID, _SYSTEMD_UNIT): never let metadata forge one.
        ("_SYSTEMD_UNIT", "LOCKWIPE_SYSTEMD_UNIT"),
        ("__pid", "LOCKWIPE_PID"),
        // A leading digit is invalid on its own; the prefix makes it valid.
        ("2fa", "LOCKWIPE_2FA"),
        ("_9lives", "LOCKWIPE_9LIVES"),
        // Non-ASCII characters become one "_" each (no "ß" -> "SS" surprises).
        ("café", "LOCKWIPE_CAF_"),
        ("straße", "LOCKWIPE_STRA_E"),
        ("e\u{301}tat", "LOCKWIPE_TAT"),
        ("üser", "LOCKWIPE_SER"),
        ("日本", "LOCKWIPE_UNNAMED"),
        ("", "LOCKWIPE_UNNAMED"),
        ("___", "LOCKWIPE_UNNAMED"),
        // Well-known fields keep their journal meaning.
        ("message_id", "MESSAGE_ID"),
        ("MESSAGE_ID", "MESSAGE_ID"),
        ("code-file", "CODE_FILE"),
        ("code_line", "CODE_LINE"),
        ("code_func", "CODE_FUNC"),
        ("syslog_identifier", "SYSLOG_IDENTIFIER"),
        // MESSAGE and PRIORITY are not reachable from metadata.
        ("message", "LOCKWIPE_MESSAGE"),
        ("priority", "LOCKWIPE_PRIORITY"),
        // Already namespaced: no double prefix.
        ("lockwipe_action", "LOCKWIPE_ACTION"),
        ("lockwipe-peer-uid", "LOCKWIPE_PEER_UID"),
    ])
    func fieldName(key: String, expected: String) {
        #expect(JournalFields.fieldName(forMetadataKey: key) == expected)
    }

    @Test func overLongNamesAreCutTo64Characters() {
        let name = JournalFields.fieldName(forMetadataKey: String(repeating: "a", count: 100))
        #expect(name == "LOCKWIPE_" + String(repeating: "A", count: 64 - 9))
        #expect(name.count == 64)
        let namespaced = JournalFields.fieldName(forMetadataKey: "lockwipe_" + String(repeating: "b", count: 80))
        #expect(namespaced.count == 64)
        #expect(namespaced.hasPrefix("LOCKWIPE_BBB"))
    }

    @Test(arguments: ["", "\n", "\r\n", "=", "🔒 lock", "_", "0", "a=b", String(repeating: "_9", count: 50), "MESSAGE", "é"])
    func everyNameIsAValidJournalFieldName(key: String) {
        let name = JournalFields.fieldName(forMetadataKey: key)
        #expect(!name.isEmpty && name.count <= 64)
        #expect(name.utf8.allSatisfy { ($0 >= 65 && $0 <= 90) || ($0 >= 48 && $0 <= 57) || $0 == 95 })
        #expect(name.first!.isLetter)
        #expect(name != "MESSAGE" && name != "PRIORITY")
    }

    @Test func priorityMapping() {
        let expected: [Logger.Level: Int] = [
            .trace: 7, .debug: 7, .info: 6, .notice: 5, .warning: 4, .error: 3, .critical: 2,
        ]
        for level in Logger.Level.allCases {
            #expect(JournalFields.priority(for: level) == expected[level], "\(level)")
        }
    }

    @Test func entryHasMessagePriorityIdentifierCodeLocationThenSortedMetadata() {
        let entry = JournalFields.entry(
            message: "vault wiped", level: .notice,
            metadata: ["user": "alice", "action": "wipe", "offline_seconds": .stringConvertible(86_401)],
            file: "LockwipeDaemon/Wiper.swift", function: "wipe(user:)", line: 42,
            syslogIdentifier: "lockwiped"
        )
        #expect(
            entry == [
                "MESSAGE=vault wiped",
                "PRIORITY=5",
                "SYSLOG_IDENTIFIER=lockwiped",
                "CODE_FILE=LockwipeDaemon/Wiper.swift",
                "CODE_LINE=42",
                "CODE_FUNC=wipe(user:)",
                "LOCKWIPE_ACTION=wipe",
                "LOCKWIPE_OFFLINE_SECONDS=86401",
                "LOCKWIPE_USER=alice",
            ])
    }

    @Test func entryPassesValuesThroughExactly() {
        let entry = JournalFields.entry(
            message: "line one\nline two = \"x\"", level: .error,
            metadata: ["reason": "a\nb\tc=d"], file: "f", function: "g", line: 1, syslogIdentifier: "id"
        )
        #expect(entry.first == "MESSAGE=line one\nline two = \"x\"")
        #expect(entry.contains("LOCKWIPE_REASON=a\nb\tc=d"))
        #expect(entry.contains("PRIORITY=3"))
    }

    @Test func entryFlattensNestedMetadata() {
        let entry = JournalFields.entry(
            message: "m", level: .info,
            metadata: [
                "message_id": "4f1e2d3c4b5a69788796a5b4c3d2e1f0",
                "peer": ["uid": "1000", "pid": .stringConvertible(Int32(77))],
                "groups": ["wheel", "users"],
                "empty": [:],
                "none": [],
            ],
            file: "f", function: "g", line: 9, syslogIdentifier: "lockwiped"
        )
        #expect(
            Array(entry.dropFirst(6)) == [
                "LOCKWIPE_GROUPS=wheel",
                "LOCKWIPE_GROUPS=users",
                "LOCKWIPE_PEER_PID=77",
                "LOCKWIPE_PEER_UID=1000",
                "MESSAGE_ID=4f1e2d3c4b5a69788796a5b4c3d2e1f0",
            ])
    }

    @Test func wellKnownMetadataReplacesDefaultsButNeverMessageOrPriority() {
        let entry = JournalFields.entry(
            message: "real", level: .warning,
            metadata: ["code_file": "Hook.swift", "message": "fake", "priority": "0"],
            file: "f", function: "g", line: 3, syslogIdentifier: "lockwiped"
        )
        #expect(entry.filter { $0.hasPrefix("CODE_FILE=") } == ["CODE_FILE=Hook.swift"])
        #expect(entry.filter { $0.hasPrefix("MESSAGE=") } == ["MESSAGE=real"])
        #expect(entry.filter { $0.hasPrefix("PRIORITY=") } == ["PRIORITY=4"])
        #expect(entry.contains("LOCKWIPE_MESSAGE=fake"))
        #expect(entry.contains("LOCKWIPE_PRIORITY=0"))
    }

    @Test func stderrLineListsMetadataFieldsSortedByName() {
        let line = JournalFields.stderrLine(
            message: "lock refused", level: .warning, metadata: ["peer-uid": "65534", "peer_pid": "123"]
        )
        #expect(line == "warning lock refused LOCKWIPE_PEER_PID=123 LOCKWIPE_PEER_UID=65534")
    }

    @Test func stderrLineQuotesValuesWithWhitespaceOrEquals() {
        let line = JournalFields.stderrLine(
            message: "hook failed", level: .error,
            metadata: [
                "reason": "exit status 3",
                "command": "a=b",
                "quote": "say \"hi\"",
                "path": #"C:\x"#,
                "multi": "one\ntwo",
                "empty": "",
                "plain": "ok",
            ]
        )
        #expect(
            line
                == #"error hook failed LOCKWIPE_COMMAND="a=b" LOCKWIPE_EMPTY="" LOCKWIPE_MULTI="one\ntwo" LOCKWIPE_PATH="C:\\x" LOCKWIPE_PLAIN=ok LOCKWIPE_QUOTE="say \"hi\"" LOCKWIPE_REASON="exit status 3""#
        )
    }

    @Test func stderrLineStaysOneLine() {
        let line = JournalFields.stderrLine(message: "a\nb\r\u{1}c", level: .critical, metadata: [:])
        #expect(line == #"critical a\nb\r\x01c"#)
        #expect(!line.contains("\n"))
        #expect(JournalFields.stderrLine(message: "", level: .info, metadata: ["user": "bob"]) == "info LOCKWIPE_USER=bob")
    }

    @Test func stderrLineUsesLowerCaseLevelWords() {
        let words = Logger.Level.allCases.map { JournalFields.stderrLine(message: "x", level: $0, metadata: [:]) }
        #expect(words == ["trace x", "debug x", "info x", "notice x", "warning x", "error x", "critical x"])
    }
}

/// Elapsed times have one spelling in the journal: whole microseconds (`_USEC`).
@Suite struct JournalMicrosecondsTests {
    @Test(arguments: [
        (Duration.zero, "0"),
        (Duration.microseconds(1), "1"),
        (Duration.nanoseconds(499), "0"),
        (Duration.nanoseconds(500), "1"),
        (Duration.milliseconds(1_500), "1500000"),
        (Duration.seconds(90_061), "90061000000"),
        (Duration.seconds(-3), "0"),
    ])
    func duration(_ d: Duration, _ expected: String) {
        #expect(JournalFields.microseconds(d) == expected)
    }

    @Test(arguments: [
        (0.0, "0"),
        (0.000_001, "1"),
        (0.123_456_4, "123456"),
        (2.5, "2500000"),
        (-1.0, "0"),
        (Double.nan, "0"),
        (Double.infinity, "0"),
    ])
    func seconds(_ s: Double, _ expected: String) {
        #expect(JournalFields.microseconds(seconds: s) == expected)
    }
}
