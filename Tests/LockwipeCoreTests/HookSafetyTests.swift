import LockwipeCore
import Testing

@Suite struct HookSafetyTests {
    struct Row: Sendable, CustomTestStringConvertible {
        var owner: UInt32
        var mode: UInt32
        var isDirectory: Bool
        var refused: String?  // a word the reason must contain; nil: trusted
        var testDescription: String { "owner \(owner) mode \(String(mode, radix: 8)) dir \(isDirectory)" }
    }

    static let rows: [Row] = [
        Row(owner: 0, mode: 0o100755, isDirectory: false, refused: nil),
        Row(owner: 0, mode: 0o100700, isDirectory: false, refused: nil),
        Row(owner: 1000, mode: 0o100755, isDirectory: false, refused: "uid 1000"),
        Row(owner: 0, mode: 0o100775, isDirectory: false, refused: "group"),
        Row(owner: 0, mode: 0o100757, isDirectory: false, refused: "others"),
        Row(owner: 0, mode: 0o120777, isDirectory: false, refused: "symlink"),
        Row(owner: 0, mode: 0o040755, isDirectory: true, refused: nil),
        Row(owner: 0, mode: 0o041777, isDirectory: true, refused: "others"),
        Row(owner: 1000, mode: 0o040700, isDirectory: true, refused: "uid 1000"),
        Row(owner: 0, mode: 0o100755, isDirectory: true, refused: "not a directory"),
    ]

    @Test(arguments: rows) func onlyFilesNoOneElseCanChangeAreTrusted(_ row: Row) {
        let problem = HookSafety.problem(owner: row.owner, mode: row.mode, expectedOwner: 0, isDirectory: row.isDirectory)
        if let word = row.refused {
            #expect(problem?.contains(word) == true, "\(problem ?? "nil")")
        } else {
            #expect(problem == nil)
        }
    }

    @Test func anUnprivilegedDaemonTrustsItsOwnFiles() {
        #expect(HookSafety.problem(owner: 1000, mode: 0o100755, expectedOwner: 1000, isDirectory: false) == nil)
        #expect(HookSafety.problem(owner: 0, mode: 0o100755, expectedOwner: 1000, isDirectory: false) == nil)
        #expect(HookSafety.problem(owner: 1001, mode: 0o100755, expectedOwner: 1000, isDirectory: false) != nil)
    }
}
