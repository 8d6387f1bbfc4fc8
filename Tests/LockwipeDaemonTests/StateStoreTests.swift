import Foundation
import LockwipeCore
import LockwipeProtocol
@testable import LockwipeDaemon
import Testing

@Suite struct StateStoreTests {
    func withStore(_ body: (StateStore, String) throws -> Void) throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lwstate-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try body(try StateStore(directory: dir), dir)
    }

    func record(_ user: String) -> RegistrationRecord {
        RegistrationRecord(user: user, uid: 1001, state: .active, protection: .permissions, directories: ["/srv/\(user)/a", "/srv/\(user)/b"],
                           lockTrigger: nil, blocked: false, clock: .started(at: ClockReading(wall: 100, boot: 5, bootID: "x")), lastWipe: nil)
    }

    func ev(_ user: String, _ kind: String) -> StoredEvent { StoredEvent(time: 100, user: user, kind: kind, trigger: .admin, detail: "") }

    @Test func registrationsSurviveReopeningAndTheFileIsPrivate() throws {
        try withStore { store, dir in
            try store.insert(record("alice"), event: ev("alice", "register"))
            let reopened = try StateStore(directory: dir)
            #expect(try reopened.registration("alice") == record("alice"))
            var st = stat()
            #expect(stat(dir + "/" + StateStore.fileName, &st) == 0 && st.st_mode & 0o077 == 0)
        }
    }

    @Test func lockRecordsKeepTheFirstOriginalOwnerOnRelock() throws {
        try withStore { store, _ in
            try store.insert(record("alice"), event: ev("alice", "register"))
            try store.commitLock("alice", records: [LockRecord(path: "/srv/alice/a", uid: 1001, gid: 1001, mode: 0o750)], trigger: .admin, event: ev("alice", "lock"))
            // A re-lock after a crash sees root:root 0000; it must not replace the original.
            try store.commitLock("alice", records: [LockRecord(path: "/srv/alice/a", uid: 0, gid: 0, mode: 0)], trigger: .offline, event: ev("alice", "lock"))
            #expect(try store.lockRecords("alice") == [LockRecord(path: "/srv/alice/a", uid: 1001, gid: 1001, mode: 0o750)])
            #expect(try store.registration("alice")?.state == .locked)
        }
    }

    @Test func onlyACompleteWipeEndsThePendingIntent() throws {
        try withStore { store, _ in
            try store.insert(record("bob"), event: ev("bob", "register"))
            try store.commitWipeIntent("bob", reason: "test", trigger: .admin, event: ev("bob", "wipe-started"))
            #expect(try store.pendingWipes().map(\.user) == ["bob"])
            try store.beginWipeAttempt("bob", event: nil)
            let incomplete = WipeSummary(filesOverwritten: 0, bytesOverwritten: 0, entriesRemoved: 1, skipped: [.init(path: "/x", reason: "busy")], elapsedSeconds: 0)
            try store.finishWipe("bob", summary: incomplete, event: ev("bob", "wipe-incomplete"))
            #expect(try store.registration("bob")?.state == .wipePending)
            #expect(try store.pendingWipes().first?.attempts == 1)
            let done = WipeSummary(filesOverwritten: 0, bytesOverwritten: 0, entriesRemoved: 2, skipped: [], elapsedSeconds: 0)
            try store.finishWipe("bob", summary: done, event: ev("bob", "wipe"))
            #expect(try store.pendingWipes().isEmpty)
            #expect(try store.registration("bob")?.state == .wiped)
            #expect(try store.registration("bob")?.lastWipe == done)
            #expect(try store.events(user: "bob", limit: 10).map(\.kind) == ["register", "wipe-started", "wipe-incomplete", "wipe"])
        }
    }

    @Test func aDirectoryCannotBelongToTwoRegistrations() throws {
        try withStore { store, _ in
            try store.insert(record("alice"), event: ev("alice", "register"))
            var other = record("carol")
            other.directories = ["/srv/alice/a"]
            #expect(throws: (any Error).self) { try store.insert(other, event: ev("carol", "register")) }
            #expect(try store.registration("carol") == nil)  // the transaction rolled back whole
            #expect(try store.events(user: "carol", limit: 10).isEmpty)
        }
    }
}
