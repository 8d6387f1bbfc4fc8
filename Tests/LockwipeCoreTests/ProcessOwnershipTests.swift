import LockwipeCore
import Testing

@Suite struct ProcessOwnershipTests {
    struct Row: Sendable, CustomTestStringConvertible {
        var uidLine: String
        var uid: UInt32
        var hers: Bool
        var testDescription: String { "\(uidLine) for \(uid)" }
    }

    static let rows: [Row] = [
        Row(uidLine: "Uid:\t1000\t1000\t1000\t1000", uid: 1000, hers: true),
        Row(uidLine: "Uid:\t1001\t1001\t1001\t1001", uid: 1000, hers: false),
        // Any one of the four is enough: real, effective, saved, filesystem.
        Row(uidLine: "Uid:\t1000\t0\t0\t0", uid: 1000, hers: true),
        Row(uidLine: "Uid:\t0\t1000\t0\t0", uid: 1000, hers: true),
        Row(uidLine: "Uid:\t0\t0\t1000\t0", uid: 1000, hers: true),
        Row(uidLine: "Uid:\t0\t0\t0\t1000", uid: 1000, hers: true),
        // Root's processes are never ended by a user's lock.
        Row(uidLine: "Uid:\t0\t0\t0\t0", uid: 0, hers: false),
        // A prefix of another uid is not the uid.
        Row(uidLine: "Uid:\t10000\t10000\t10000\t10000", uid: 1000, hers: false),
        // A malformed line counts for nobody.
        Row(uidLine: "Uid:\t1000\t1000", uid: 1000, hers: false),
        Row(uidLine: "Uid:\t1000\tx\t1000\t1000", uid: 1000, hers: false),
        Row(uidLine: "Gid:\t1000\t1000\t1000\t1000", uid: 1000, hers: false),
    ]

    @Test(arguments: rows) func ownership(_ row: Row) {
        let status = "Name:\tsh\nState:\tS (sleeping)\n\(row.uidLine)\nGid:\t5\t5\t5\t5\n"
        #expect(ProcessOwnership.belongs(status: status, to: row.uid) == row.hers)
    }

    @Test func stateIsReadAfterTheLastParenthesis() {
        #expect(ProcessOwnership.state(stat: "42 (a) b) Z 1 2 3") == "Z")
        #expect(ProcessOwnership.state(stat: "42 (sleep) S 1 2 3") == "S")
        #expect(ProcessOwnership.state(stat: "garbage") == nil)
        #expect(!ProcessOwnership.isRunning(state: "Z"))
        #expect(ProcessOwnership.isRunning(state: "T"))
    }
}
