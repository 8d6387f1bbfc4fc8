import LockwipeCore
import Testing

@Suite struct DirectoryRulesTests {
    struct Row: Sendable, CustomTestStringConvertible {
        var path: String
        var allowedUnder: [String] = []
        var refused: String?  // a phrase the problem must contain; nil: accepted
        var testDescription: String { path + (allowedUnder.isEmpty ? "" : " allowing \(allowedUnder)") }
    }

    static let rows: [Row] = [
        Row(path: "/srv/field/alice", refused: nil),
        Row(path: "/home/alice/field", refused: nil),
        Row(path: "/tmp/x/alice", refused: nil),
        Row(path: "relative/alice", refused: "absolute path"),
        Row(path: "/srv/../etc/alice", refused: "absolute path"),
        Row(path: "/etc/alice", refused: "system directory /etc"),
        Row(path: "/usr/local/data", refused: "system directory /usr"),
        Row(path: "/srv", refused: "is a system directory"),
        Row(path: "/var/spool", refused: "is a system directory"),
        // Where other programs and root keep their data: refused unless allowed.
        Row(path: "/var/lib/postgresql", refused: "lies in /var/lib"),
        Row(path: "/var/spool/mail/alice", refused: "lies in /var/spool"),
        Row(path: "/var/cache/app", refused: "lies in /var/cache"),
        Row(path: "/var/log/app", refused: "lies in /var/log"),
        Row(path: "/root/secrets", refused: "lies in /root"),
        Row(path: "/opt/fieldapp/data/alice", refused: "allow_under"),
        Row(path: "/opt/fieldapp/data/alice", allowedUnder: ["/opt/fieldapp/data"], refused: nil),
        Row(path: "/opt/fieldapp/data", allowedUnder: ["/opt/fieldapp/data"], refused: nil),
        Row(path: "/opt/fieldapp/database", allowedUnder: ["/opt/fieldapp/data"], refused: "lies in /opt"),
        Row(path: "/var/lib/app", allowedUnder: ["/opt/fieldapp"], refused: "lies in /var/lib"),
        Row(path: "/var/tmp/alice", refused: nil),
        // Control characters: refused alone, the path shown escaped (issue 27).
        Row(path: "/srv/field/a\nb", refused: #"directory "/srv/field/a\nb" contains a control character (a newline, U+000A)"#),
        Row(path: "/etc/x\ty", refused: #"directory "/etc/x\ty" contains a control character (a tab, U+0009)"#),
        Row(path: "/srv/field/\u{1B}[31mred", refused: #"\u{1B}[31mred" contains a control character (U+001B)"#),
        Row(path: "/srv/field/del\u{7F}", refused: "(U+007F)"),
        Row(path: "/srv/field/csi\u{9B}", refused: "(U+009B)"),
        Row(path: "/srv/field/nul\u{0}", refused: "(U+0000)"),
        Row(path: "/srv/field/é-ü-日本", refused: nil),
        Row(path: "/srv/field/nbsp\u{A0}", refused: nil),
    ]

    struct TextRow: Sendable, CustomTestStringConvertible {
        var text: String
        var visible: String
        var control: Bool
        var testDescription: String { visible }
    }

    static let texts: [TextRow] = [
        TextRow(text: "alice", visible: "alice", control: false),
        TextRow(text: "a\nb", visible: #"a\nb"#, control: true),
        TextRow(text: "a\r\tb", visible: #"a\r\tb"#, control: true),
        TextRow(text: "\u{1F}", visible: #"\u{1F}"#, control: true),
        TextRow(text: "\u{7F}", visible: #"\u{7F}"#, control: true),
        TextRow(text: "\u{80}x\u{9F}", visible: #"\u{80}x\u{9F}"#, control: true),
        TextRow(text: "\u{A0}ß\u{202E}", visible: "\u{A0}ß\u{202E}", control: false),
    ]

    @Test(arguments: texts) func controlCharactersAreNamedEscaped(_ row: TextRow) {
        #expect(DirectoryRules.visible(row.text) == row.visible)
        let problem = DirectoryRules.controlCharacterProblem(field: "user name", row.text)
        #expect((problem != nil) == row.control)
        if let problem {
            #expect(problem.hasPrefix("user name \"\(row.visible)\""))
            #expect(!problem.unicodeScalars.contains(where: DirectoryRules.isControl))
        }
    }

    @Test(arguments: rows) func aVaultMayLieOnlyWhereNothingElseKeepsData(_ row: Row) {
        let problems = DirectoryRules.problems(path: row.path, taken: [], allowedUnder: row.allowedUnder)
        if let phrase = row.refused {
            #expect(problems.count == 1 && problems[0].contains(phrase), "\(problems)")
        } else {
            #expect(problems.isEmpty, "\(problems)")
        }
    }

    @Test func vaultsMayNeitherContainNorLieInOneAnother() {
        let taken = [(owner: "bob", path: "/srv/field/bob")]
        #expect(DirectoryRules.problems(path: "/srv/field/bob/inner", taken: taken) == ["/srv/field/bob/inner: overlaps /srv/field/bob of bob"])
        #expect(DirectoryRules.problems(path: "/srv/field", taken: taken) == ["/srv/field: overlaps /srv/field/bob of bob"])
        #expect(DirectoryRules.problems(path: "/srv/field/bobby", taken: taken).isEmpty)
    }

    @Test(
        arguments: [
            ("/opt/fieldapp/data", nil),
            ("/var/lib/fieldapp/", nil),
            ("opt/fieldapp", "absolute path"),
            ("/opt/../etc", "absolute path"),
            ("/opt//fieldapp", "absolute path"),
            ("/etc/fieldapp", "system directory /etc"),
            ("/opt", "is a system directory"),
            ("/srv/fieldapp", "vaults there need no allowance"),
        ] as [(String, String?)])
    func allowancesNameADirectoryInsideAGuardedArea(_ path: String, _ refused: String?) {
        let problem = DirectoryRules.allowanceProblem(path)
        if let refused {
            #expect(problem?.contains(refused) == true, "\(problem ?? "nil")")
        } else {
            #expect(problem == nil, "\(problem ?? "")")
        }
    }

    // From the first version of the rules.
    @Test func refusesRootSystemDirectoriesAndTheirInsides() {
        #expect(!DirectoryRules.problems(path: "/", taken: []).isEmpty)
        #expect(!DirectoryRules.problems(path: "/etc", taken: []).isEmpty)
        #expect(!DirectoryRules.problems(path: "/usr/local/data", taken: []).isEmpty)
        #expect(!DirectoryRules.problems(path: "/home", taken: []).isEmpty)
        #expect(!DirectoryRules.problems(path: "/home/../etc", taken: []).isEmpty)
        #expect(!DirectoryRules.problems(path: "relative/dir", taken: []).isEmpty)
        #expect(DirectoryRules.problems(path: "/srv/field/alice", taken: []).isEmpty)
        #expect(DirectoryRules.problems(path: "/home/alice/work/", taken: []).isEmpty)
    }

    @Test func refusesOverlapInBothDirectionsButNotPrefixSiblings() {
        let taken = [(owner: "bob", path: "/srv/field/bob")]
        #expect(!DirectoryRules.problems(path: "/srv/field/bob/sub", taken: taken).isEmpty)
        #expect(!DirectoryRules.problems(path: "/srv/field", taken: taken).isEmpty)
        #expect(!DirectoryRules.problems(path: "/srv/field/bob/", taken: taken).isEmpty)
        #expect(DirectoryRules.problems(path: "/srv/field/bobby", taken: taken).isEmpty)
    }

    @Test func normalizes() {
        #expect(DirectoryRules.normalize("/srv//a/./b/") == "/srv/a/b")
        #expect(DirectoryRules.normalize("/srv/a/../b") == nil)
    }
}

/// An existing directory at registration: kept, given to the user, or refused with the reason.
@Suite struct ExistingVaultTests {
    struct Row: Sendable, CustomTestStringConvertible {
        var owner: UInt32
        var mode: UInt32
        var isEmpty: Bool
        var expected: ExistingVault
        var testDescription: String { "owner \(owner) mode \(String(mode, radix: 8)) \(isEmpty ? "empty" : "not empty")" }
    }

    static let rows: [Row] = [
        Row(owner: 1001, mode: 0o750, isEmpty: false, expected: .keep),
        Row(owner: 1001, mode: 0o700, isEmpty: true, expected: .keep),
        Row(owner: 1001, mode: 0o40755, isEmpty: true, expected: .keep),  // type bits ignored
        Row(owner: 1001, mode: 0o000, isEmpty: false, expected: .take(mode: 0o700)),
        Row(owner: 1001, mode: 0o055, isEmpty: false, expected: .take(mode: 0o755)),
        // What a permission-mode wipe leaves: root:root 0000, empty.
        Row(owner: 0, mode: 0o000, isEmpty: true, expected: .take(mode: 0o700)),
        Row(owner: 0, mode: 0o755, isEmpty: true, expected: .take(mode: 0o700)),
        // Root's with content: the directory alone becomes hers, its mode kept.
        Row(owner: 0, mode: 0o755, isEmpty: false, expected: .take(mode: 0o755)),
        Row(owner: 0, mode: 0o2750, isEmpty: false, expected: .take(mode: 0o2750)),
        Row(owner: 0, mode: 0o000, isEmpty: false, expected: .take(mode: 0o700)),
        Row(owner: 1002, mode: 0o700, isEmpty: true, expected: .refuse("belongs to uid 1002, not to alice (uid 1001)")),
        Row(owner: 1002, mode: 0o777, isEmpty: false, expected: .refuse("belongs to uid 1002")),
    ]

    @Test(arguments: rows) func decide(_ row: Row) {
        let got = ExistingVault.decide(path: "/srv/field/alice", owner: row.owner, mode: row.mode, isEmpty: row.isEmpty, user: "alice", uid: 1001)
        switch (got, row.expected) {
        case (.refuse(let reason), .refuse(let phrase)):
            #expect(reason.hasPrefix("/srv/field/alice: ") && reason.contains(phrase), "\(reason)")
        default:
            #expect(got == row.expected)
        }
    }
}
