import LockwipeCore
import Testing

struct OwnershipTests {
    @Test(arguments: [
        (registrationUID: UInt32(1000), callerUID: UInt32(1000), own: true),
        (registrationUID: 1000, callerUID: 1001, own: false),
        // root is no one's owner by uid: administrators pass by being administrators.
        (registrationUID: 1000, callerUID: 0, own: false),
    ])
    func aRegistrationIsItsUIDsOwn(registrationUID: UInt32, callerUID: UInt32, own: Bool) {
        #expect(Ownership.isOwn(registrationUID: registrationUID, callerUID: callerUID) == own)
    }

    struct HistoryRow: Sendable, CustomTestStringConvertible {
        var user: String
        var registrationUID: UInt32?
        var callerUID: UInt32
        var callerName: String?
        var may: Bool
        var why: String
        var testDescription: String { why }
    }

    @Test(arguments: [
        HistoryRow(user: "alice", registrationUID: 1000, callerUID: 1000, callerName: "alice", may: true, why: "her registration"),
        HistoryRow(user: "alice", registrationUID: 1000, callerUID: 1000, callerName: "alice2", may: true, why: "her uid under another name"),
        HistoryRow(user: "alice", registrationUID: 1000, callerUID: 1001, callerName: "bob", may: false, why: "someone else's registration"),
        HistoryRow(
            user: "alice", registrationUID: 1000, callerUID: 1001, callerName: "alice", may: false,
            why: "her name, but the registration is another uid's (a reused name)"),
        HistoryRow(user: "alice", registrationUID: nil, callerUID: 1000, callerName: "alice", may: true, why: "her name, unregistered"),
        HistoryRow(user: "alice", registrationUID: nil, callerUID: 1001, callerName: "bob", may: false, why: "another name, unregistered"),
        HistoryRow(user: "alice", registrationUID: nil, callerUID: 1000, callerName: nil, may: false, why: "a caller without a name"),
    ])
    func historyIsReadByItsOwner(_ row: HistoryRow) {
        #expect(
            Ownership.mayReadHistory(
                of: row.user, registrationUID: row.registrationUID, callerUID: row.callerUID,
                callerName: row.callerName) == row.may)
    }

    struct RecordRow: Sendable, CustomTestStringConvertible {
        var uid: UInt32?
        var registrationID: RegistrationID?
        var callerUID: UInt32
        var owns: Bool
        var why: String
        var testDescription: String { why }
    }

    /// History events and certificates belong to the uid and registration they were
    /// recorded for; what belongs to no registration is nobody's (administrators only).
    @Test(arguments: [
        RecordRow(uid: 1000, registrationID: RegistrationID("r1"), callerUID: 1000, owns: true, why: "her registration's"),
        RecordRow(uid: 1000, registrationID: RegistrationID("r1"), callerUID: 1001, owns: false, why: "another uid's, whatever the names"),
        RecordRow(uid: 1000, registrationID: nil, callerUID: 1000, owns: false, why: "no registration: not attributable"),
        RecordRow(uid: 1000, registrationID: RegistrationID(""), callerUID: 1000, owns: false, why: "an empty registration id"),
        RecordRow(uid: nil, registrationID: RegistrationID("r1"), callerUID: 1000, owns: false, why: "no uid"),
        RecordRow(uid: nil, registrationID: nil, callerUID: 0, owns: false, why: "root owns nothing by uid: administrators pass as administrators"),
    ])
    func aRecordIsItsRegistrationUIDsOwn(_ row: RecordRow) {
        #expect(Ownership.ownsRecord(uid: row.uid, registrationID: row.registrationID, callerUID: row.callerUID) == row.owns)
    }
}
