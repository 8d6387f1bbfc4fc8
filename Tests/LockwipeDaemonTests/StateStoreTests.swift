import Foundation
import GRDB
import LockwipeCore
import LockwipeProtocol
import Synchronization
import Testing

@testable import LockwipeDaemon

@Suite struct StateStoreTests {
    func withStore(_ body: (StateStore, String) throws -> Void) throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lwstate-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try body(try StateStore(directory: dir), dir)
    }

    func record(_ user: String) -> RegistrationRecord {
        var r = RegistrationRecord(
            user: user, uid: 1001, state: .active, protection: .permissions, directories: ["/srv/\(user)/a", "/srv/\(user)/b"],
            lockTrigger: nil, blocked: false, clock: .started(at: ClockReading(wall: 100, boot: 5, bootID: "x")), lastWipe: nil)
        r.id = String(repeating: "0", count: 32 - user.utf8.count) + user  // stable, so records compare equal
        // Device and inode as recorded at registration (v5-vault-identity); 64-bit values survive.
        r.identities = [.init(device: 2049, inode: 1), .init(device: UInt64.max, inode: UInt64(Int64.max) + 7)]
        return r
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

    @Test func everyRegistrationGetsItsOwnIDAndAReRegistrationANewOne() throws {
        try withStore { store, _ in
            let first = RegistrationRecord(
                user: "alice", uid: 1001, state: .active, protection: .permissions, directories: ["/srv/alice"],
                lockTrigger: nil, blocked: false, clock: .started(at: ClockReading(wall: 100, boot: 5, bootID: "x")), lastWipe: nil)
            #expect(first.id.count == 32 && first.id.allSatisfy { "0123456789abcdef".contains($0) })
            try store.insert(first, event: ev("alice", "register"))
            #expect(try store.registration("alice")?.id == first.id)
            try store.delete("alice", event: ev("alice", "unregister"))
            var second = first
            second.id = RegistrationRecord.newID()
            try store.insert(second, event: ev("alice", "register"))
            #expect(try store.registration("alice")?.id == second.id)
            #expect(first.id != second.id)
        }
    }

    @Test func registrationsFromBeforeIDsGetOneEachWhenTheStoreOpens() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lwstate-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        // A database as the version before registration ids left it: migrations up to v3.
        let path = dir + "/" + StateStore.fileName
        do {
            let queue = try DatabaseQueue(path: path)
            try StateStore.migratorForTesting.migrate(queue, upTo: "v3-vault")
            try queue.write { db in
                for user in ["alice", "bob"] {
                    try db.execute(
                        sql: """
                            INSERT INTO registrations (user, uid, state, protection, blocked, created_at, clock_last_contact,
                                clock_accumulated_boot, clock_boot_id, clock_boot_mark, clock_last_wall, clock_offline_seconds)
                            VALUES (?, 1001, 'active', 'permissions', 0, 100, 100, 0, 'x', 5, 100, 0)
                            """, arguments: [user])
                }
            }
        }
        let ids = try StateStore(directory: dir).registrations().map(\.id)
        #expect(ids.count == 2 && Set(ids).count == 2 && ids.allSatisfy { $0.count == 32 })
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

    // MARK: Damage: never start afresh over a database that was there

    func damage(_ body: () throws -> Void) -> StateStoreDamage? {
        do {
            try body()
            return nil
        } catch let d as StateStoreDamage {
            return d
        } catch {
            Issue.record("expected StateStoreDamage, got \(error)")
            return nil
        }
    }

    @Test func aMissingDatabaseIsNotReplacedByAnEmptyOne() throws {
        try withStore { store, dir in
            try store.insert(record("alice"), event: ev("alice", "register"))
            #expect(FileManager.default.fileExists(atPath: dir + "/" + StateStore.markerName))
            for suffix in ["", "-wal", "-shm"] { unlink(dir + "/" + StateStore.fileName + suffix) }
            #expect(damage { _ = try StateStore(directory: dir) } == .missing(path: dir + "/" + StateStore.fileName))
            #expect(!FileManager.default.fileExists(atPath: dir + "/" + StateStore.fileName), "an empty database was created")
        }
    }

    @Test func aDamagedDatabaseIsRefusedAtOpen() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lwstate-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        do {  // closed at the end of this scope: the WAL is checkpointed into the file
            let store = try StateStore(directory: dir)
            try store.insert(record("alice"), event: ev("alice", "register"))
        }
        let path = dir + "/" + StateStore.fileName
        let fd = open(path, O_WRONLY)
        #expect(fd >= 0)
        let junk = [UInt8](repeating: 0xa5, count: 100)
        #expect(pwrite(fd, junk, junk.count, 0) == 100)
        close(fd)
        let found = damage { _ = try StateStore(directory: dir) }
        guard case .damaged(let p, _) = found else {
            Issue.record("expected .damaged, got \(String(describing: found))")
            return
        }
        #expect(p == path)
    }

    @Test func deletionWhileOpenIsNoticedAtTheNextAccessAndLatched() throws {
        try withStore { store, dir in
            try store.insert(record("alice"), event: ev("alice", "register"))
            let seen = Mutex<[StateStoreDamage]>([])
            store.onDamage { d in seen.withLock { $0.append(d) } }
            #expect(store.damage == nil)
            let path = dir + "/" + StateStore.fileName
            for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) }
            #expect(damage { _ = try store.registrations() } == .replaced(path: path))
            // Latched: a database that reappears does not make the store trusted again.
            _ = try StateStore(directory: dir + "-other")
            FileManager.default.createFile(atPath: path, contents: Data())
            #expect(damage { try store.insert(record("bob"), event: ev("bob", "register")) } == .replaced(path: path))
            #expect(seen.withLock { $0 } == [.replaced(path: path)], "the damage was reported more or less than once")
            try? FileManager.default.removeItem(atPath: dir + "-other")
        }
    }

    @Test func aFirstStartWithoutMarkerCreatesIt() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lwstate-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        _ = try StateStore(directory: dir)
        unlink(dir + "/" + StateStore.markerName)  // a database from before the marker existed
        _ = try StateStore(directory: dir)
        #expect(FileManager.default.fileExists(atPath: dir + "/" + StateStore.markerName))
    }
}
