import Foundation
import GRDB
import LockwipeCore
import LockwipeProtocol
import LockwipeVaultIO
import Synchronization
import Testing

@testable import LockwipeDaemon

@Suite struct StateStoreTests {
    func withStore(_ body: (StateStore, String) async throws -> Void) async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lwstate-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await body(try StateStore(directory: dir), dir)
    }

    func record(_ user: String) -> RegistrationRecord {
        var r = RegistrationRecord(
            user: user, uid: 1001, state: .active, protection: .permissions, directories: ["/srv/\(user)/a", "/srv/\(user)/b"],
            lockTrigger: nil, blocked: false, clock: .started(at: ClockReading(wall: 100, boot: 5, bootID: "x")), lastWipe: nil)
        r.id = RegistrationID(String(repeating: "0", count: 32 - user.utf8.count) + user)  // stable, so records compare equal
        // Device and inode as recorded at registration (v5-vault-identity); 64-bit values survive.
        r.identities = [.init(device: 2049, inode: 1), .init(device: UInt64.max, inode: UInt64(Int64.max) + 7)]
        return r
    }

    /// The id `record(user)` has.
    func id(_ user: String) -> RegistrationID { record(user).id }

    func ev(_ user: String, _ kind: String) -> StoredEvent { StoredEvent(time: 100, user: user, kind: EventKind(rawValue: kind)!, trigger: .admin, detail: "") }

    @Test func aCheckpointAdvancesAndPersistsEveryClockButThoseOfWipedRegistrations() async throws {
        try await withStore { store, dir in
            try await store.insert(record("alice"), event: ev("alice", "register"))
            var bob = record("bob")
            bob.state = .wiped  // as a finished wipe leaves it
            try await store.insert(bob, event: ev("bob", "register"))
            let later = ClockReading(wall: 400, boot: 305, bootID: "x")
            let checkpoints = try await store.checkpointClocks(at: later)
            #expect(checkpoints.map(\.registration.user) == ["alice"])
            #expect(checkpoints.first?.advance.clock.offlineSeconds == 300)
            // Persisted (read back through a new store, past the cache), and bob's untouched.
            let reopened = try StateStore(directory: dir)
            #expect(try await reopened.registration("alice")?.clock.offlineSeconds == 300)
            #expect(try await reopened.registration("bob")?.clock.offlineSeconds == 0)
        }
    }

    /// The threshold warned about is recorded once, with its event, and survives a restart;
    /// a moved threshold is recorded (and warned about) again.
    @Test func aWarnedThresholdIsRecordedOnceAndSurvivesReopening() async throws {
        try await withStore { store, dir in
            let alice = record("alice")
            try await store.insert(alice, event: ev("alice", "register"))
            #expect(try await store.registration("alice")?.warnedThreshold == nil)
            #expect(try await store.markWarned(registration: alice.id, threshold: "lock@100+604800", event: ev("alice", "warn-lock")))
            #expect(try await store.markWarned(registration: alice.id, threshold: "lock@100+604800", event: ev("alice", "warn-lock")) == false)
            #expect(try await store.markWarned(registration: RegistrationID("no-such-registration"), threshold: "x", event: ev("alice", "warn-lock")) == false)
            let reopened = try StateStore(directory: dir)
            #expect(try await reopened.registration("alice")?.warnedThreshold == "lock@100+604800")
            #expect(try await reopened.markWarned(registration: alice.id, threshold: "lock@900+604800", event: ev("alice", "warn-lock")))
            #expect(try await reopened.events(user: "alice", limit: 10).filter { $0.kind == .warnLock }.count == 2)
        }
    }

    @Test func registrationsSurviveReopeningAndTheFileIsPrivate() async throws {
        try await withStore { store, dir in
            try await store.insert(record("alice"), event: ev("alice", "register"))
            let reopened = try StateStore(directory: dir)
            await #expect(try reopened.registration("alice") == record("alice"))
            var st = stat()
            #expect(stat(dir + "/" + StateStore.fileName, &st) == 0 && st.st_mode & 0o077 == 0)
        }
    }

    @Test func everyRegistrationGetsItsOwnIDAndAReRegistrationANewOne() async throws {
        try await withStore { store, _ in
            let first = RegistrationRecord(
                user: "alice", uid: 1001, state: .active, protection: .permissions, directories: ["/srv/alice"],
                lockTrigger: nil, blocked: false, clock: .started(at: ClockReading(wall: 100, boot: 5, bootID: "x")), lastWipe: nil)
            #expect(first.id.rawValue.count == 32 && first.id.rawValue.allSatisfy { "0123456789abcdef".contains($0) })
            try await store.insert(first, event: ev("alice", "register"))
            await #expect(try store.registration("alice")?.id == first.id)
            try await store.delete(TurnHeld(testing: first.id), event: ev("alice", "unregister"))
            var second = first
            second.id = RegistrationID.new()
            try await store.insert(second, event: ev("alice", "register"))
            await #expect(try store.registration("alice")?.id == second.id)
            #expect(first.id != second.id)
        }
    }

    /// Issue 41: the store's operations on a registration take its id, so one meant for a
    /// registration that is gone fails, and the registration that holds its name now (the
    /// same rows, by name, in the tables beside `registrations`) is left as it was.
    @Test func anOperationMeantForARegistrationThatIsGoneDoesNotReachTheOneThatHoldsItsNameNow() async throws {
        try await withStore { store, _ in
            let old = record("alice")
            try await store.insert(old, event: ev("alice", "register"))
            try await store.delete(TurnHeld(testing: old.id), event: ev("alice", "unregister"))
            var new = old
            new.id = RegistrationID.new()
            try await store.insert(new, credentials: ServerCredentials(token: "new-token"), event: ev("alice", "register"))
            let before = try await store.registration("alice")
            let gone = RegistrationGone(id: old.id)
            await #expect(throws: gone) {
                try await store.commitLock(
                    TurnHeld(testing: old.id), records: [LockRecord(path: "/srv/alice/a", uid: 1001, gid: 1001, mode: 0o750)], trigger: .server,
                    event: ev("alice", "lock"))
            }
            await #expect(throws: gone) { try await store.commitWipeIntent(TurnHeld(testing: old.id), reason: "old order", trigger: .server, event: ev("alice", "wipe-started")) }
            await #expect(throws: gone) { try await store.setVaultError(TurnHeld(testing: old.id), "stale", lockFailed: true) }
            await #expect(throws: gone) { try await store.setCredentials(TurnHeld(testing: old.id), ServerCredentials(token: "old-token"), event: ev("alice", "credentials")) }
            await #expect(throws: gone) { try await store.credentials(registration: old.id) }
            await #expect(throws: gone) { try await store.delete(TurnHeld(testing: old.id), event: ev("alice", "unregister")) }
            // The new registration: its state, lock records, pending wipe and credentials untouched.
            await #expect(try store.registration("alice") == before)
            #expect(before?.id == new.id && before?.state == .active)
            await #expect(try store.lockRecords(registration: new.id) == [])
            await #expect(try store.pendingWipe(registration: new.id) == nil)
            await #expect(try store.credentials(registration: new.id)?.token == "new-token")
        }
    }

    @Test func registrationsFromBeforeIDsGetOneEachWhenTheStoreOpens() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lwstate-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        // A database as the version before registration ids left it: migrations up to v3.
        let path = dir + "/" + StateStore.fileName
        do {
            let queue = try DatabaseQueue(path: path)
            try StateStore.migratorForTesting.migrate(queue, upTo: "v3-vault")
            try await queue.write { db in
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
        let ids = try await StateStore(directory: dir).registrations().map(\.id)
        #expect(ids.count == 2 && Set(ids).count == 2 && ids.allSatisfy { $0.rawValue.count == 32 })
    }

    /// Stored JSON that no longer decodes (another version's, or damaged) reads as absent,
    /// and is said, never taken as absent in silence: a server's settings lost this way
    /// change the policy in force until the next contact stores them again.
    @Test func storedJSONThatDoesNotDecodeIsAbsentAndSaid() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lwstate-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await StateStore(directory: dir).insert(record("alice"), event: ev("alice", "register"))
        let queue = try DatabaseQueue(path: dir + "/" + StateStore.fileName)
        try await queue.write { db in
            try db.execute(sql: "INSERT OR REPLACE INTO server_state (user, settings) VALUES ('alice', '{\"passcode\": 7')")
            try db.execute(sql: "UPDATE registrations SET last_wipe = 'not json' WHERE user = 'alice'")
        }
        try queue.close()
        let store = try StateStore(directory: dir)
        let said = Mutex<[String]>([])
        store.onUnreadable { what in said.withLock { $0.append(what) } }
        let r = try #require(try await store.registration("alice"))
        #expect(r.server.settings == nil && r.lastWipe == nil)
        let lines = said.withLock { $0 }
        #expect(lines.count == 2, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("the server settings stored for alice cannot be read back") })
        #expect(lines.contains { $0.hasPrefix("the report of the last wipe of alice cannot be read back") })
    }

    @Test func lockRecordsKeepTheFirstOriginalOwnerOnRelock() async throws {
        try await withStore { store, _ in
            try await store.insert(record("alice"), event: ev("alice", "register"))
            try await store.commitLock(
                TurnHeld(testing: id("alice")), records: [LockRecord(path: "/srv/alice/a", uid: 1001, gid: 1001, mode: 0o750)], trigger: .admin, event: ev("alice", "lock"))
            // A re-lock after a crash sees root:root 0000; it must not replace the original.
            try await store.commitLock(
                TurnHeld(testing: id("alice")), records: [LockRecord(path: "/srv/alice/a", uid: 0, gid: 0, mode: 0)], trigger: .offline, event: ev("alice", "lock"))
            await #expect(try store.lockRecords(registration: id("alice")) == [LockRecord(path: "/srv/alice/a", uid: 1001, gid: 1001, mode: 0o750)])
            await #expect(try store.registration("alice")?.state == .locked)
        }
    }

    /// Issue 42: a rejection is forgotten once the server that answered it is no longer the
    /// one configured (another URL, or none); one from the server configured now stays.
    @Test func aRejectionIsForgottenWhenItsServerIsNoLongerConfigured() async throws {
        try await withStore { store, _ in
            for name in ["alice", "bob", "carol"] { try await store.insert(record(name), event: ev(name, "register")) }
            _ = try await store.recordRejected(TurnHeld(testing: id("alice")), at: 10, status: 401, text: "Unauthorized", failures: 1, server: "https://old")
            _ = try await store.recordRejected(TurnHeld(testing: id("bob")), at: 10, status: 403, text: "no", failures: 1, server: "https://new")
            #expect(try await store.forgetRejections(unlessFrom: "https://new") == ["alice"])
            await #expect(try store.registration("alice")?.server.rejectedStatus == nil)
            await #expect(try store.registration("bob")?.server.rejectedStatus == 403)
            #expect(try await store.forgetRejections(unlessFrom: "https://new").isEmpty)
            #expect(try await store.forgetRejections(unlessFrom: nil) == ["bob"])
            await #expect(try store.registration("bob")?.server.rejectedText == nil)
        }
    }

    /// Issue 41: a write that returns the registration returns it as a read after it gives
    /// it (read in the write's own transaction), and only that user's.
    @Test func writesThatReturnTheRegistrationReturnItAsWritten() async throws {
        try await withStore { store, _ in
            try await store.insert(record("alice"), event: ev("alice", "register"))
            try await store.insert(record("bob"), event: ev("bob", "register"))
            let attempt = try await store.recordFailedAttempt(TurnHeld(testing: id("bob")), at: 200, error: "timed out", failures: 3)
            #expect(attempt?.server.failures == 3)
            await #expect(try attempt == store.registration("bob"))
            let rejected = try await store.recordRejected(TurnHeld(testing: id("bob")), at: 210, status: 401, text: "Unauthorized", failures: 4, server: "https://policy.example")
            #expect(rejected?.server.rejectedStatus == 401)
            await #expect(try rejected == store.registration("bob"))
            let blocked = try await store.setBlocked(TurnHeld(testing: id("bob")), code: "TRAFFIC_REG_BLOCKED", at: 220, failures: 5, event: nil)
            #expect(blocked?.blocked == true)
            await #expect(try blocked == store.registration("bob"))
            let contact = try await store.commitContact(
                TurnHeld(testing: id("bob")), ContactCommit(clock: .started(at: ClockReading(wall: 230, boot: 5, bootID: "b")), time: 230, lock: .keep, events: []))
            #expect(contact?.server.failures == 0 && contact?.blocked == false)
            await #expect(try contact == store.registration("bob"))
            let intent = try await store.commitWipeIntent(TurnHeld(testing: id("bob")), reason: "test", trigger: .admin, event: ev("bob", "wipe-started"))
            #expect(intent?.user == "bob" && intent?.state == .wipePending)
            await #expect(try intent == store.registration("bob"))
            // alice: a lock handed back, then lifted; a lease; a connection's contact.
            try await store.commitLock(TurnHeld(testing: id("alice")), records: [], trigger: .server, event: ev("alice", "lock"))
            let handedBack = try await store.commitHandBack(TurnHeld(testing: id("alice")), event: ev("alice", "lock-lifted"))
            #expect(handedBack?.state == .locked && handedBack?.lockTrigger == .user)
            await #expect(try handedBack == store.registration("alice"))
            let unlocked = try await store.commitUnlock(TurnHeld(testing: id("alice")), clock: nil, event: ev("alice", "unlock"))
            #expect(unlocked?.state == .active)
            await #expect(try unlocked == store.registration("alice"))
            let leased = try await store.grantLease(
                OfflineLease(until: 900, grantedAt: 240, source: .offlineCode, reference: "ABCD"), TurnHeld(testing: id("alice")), event: ev("alice", "lease-granted"))
            #expect(leased?.lease?.until == 900)
            await #expect(try leased == store.registration("alice"))
            let connected = try await store.commitConnection(
                TurnHeld(testing: id("alice")), id: "conn-1", problem: nil,
                contact: ContactCommit(clock: .started(at: ClockReading(wall: 250, boot: 6, bootID: "b")), time: 250, lock: .keep, events: []))
            #expect(connected?.clock.lastContact == 250)
            await #expect(try connected == store.registration("alice"))
            await #expect(throws: RegistrationGone(id: id("nobody"))) {
                try await store.recordFailedAttempt(TurnHeld(testing: id("nobody")), at: 240, error: "x", failures: 1)
            }
        }
    }

    @Test func onlyACompleteWipeEndsThePendingIntent() async throws {
        try await withStore { store, _ in
            try await store.insert(record("bob"), event: ev("bob", "register"))
            try await store.commitWipeIntent(TurnHeld(testing: id("bob")), reason: "test", trigger: .admin, event: ev("bob", "wipe-started"))
            await #expect(try store.pendingWipes().map(\.user) == ["bob"])
            try await store.beginWipeAttempt(TurnHeld(testing: id("bob")), event: nil)
            let incomplete = WipeSummary(filesOverwritten: 0, bytesOverwritten: 0, entriesRemoved: 1, skipped: [.init(path: "/x", reason: "busy")], elapsedSeconds: 0)
            try await store.finishWipe(TurnHeld(testing: id("bob")), summary: incomplete, event: ev("bob", "wipe-incomplete"))
            await #expect(try store.registration("bob")?.state == .wipePending)
            await #expect(try store.pendingWipes().first?.attempts == 1)
            let done = WipeSummary(filesOverwritten: 0, bytesOverwritten: 0, entriesRemoved: 2, skipped: [], elapsedSeconds: 0)
            try await store.finishWipe(TurnHeld(testing: id("bob")), summary: done, event: ev("bob", "wipe"))
            await #expect(try store.pendingWipes().isEmpty)
            await #expect(try store.registration("bob")?.state == .wiped)
            await #expect(try store.registration("bob")?.lastWipe == done)
            await #expect(try store.events(user: "bob", limit: 10).map(\.kind.rawValue) == ["register", "wipe-started", "wipe-incomplete", "wipe"])
        }
    }

    /// Each attempt's certificate is stored with its result event, which names it; the
    /// requester committed with the intent comes back with the pending wipe.
    @Test func certificatesAreStoredWithTheirResultEvent() async throws {
        try await withStore { store, _ in
            try await store.insert(record("bob"), event: ev("bob", "register"))
            let requester = WipeRequester(peerUID: 1000, retryLimit: 3)
            try await store.commitWipeIntent(TurnHeld(testing: id("bob")), reason: "test", trigger: .retryLimit, requester: requester, event: ev("bob", "wipe-started"))
            await #expect(try store.pendingWipe(registration: id("bob"))?.requester == requester)
            try await store.beginWipeAttempt(TurnHeld(testing: id("bob")), event: nil)
            let incomplete = WipeSummary(
                filesOverwritten: 0, bytesOverwritten: 0, entriesRemoved: 1, skipped: [.init(path: "/x", reason: "busy")], elapsedSeconds: 0)
            let first = certificate("11111111-1111-4111-8111-111111111111", incomplete)
            try await store.finishWipe(TurnHeld(testing: id("bob")), summary: incomplete, certificate: first, event: ev("bob", "wipe-incomplete"))
            let done = WipeSummary(filesOverwritten: 0, bytesOverwritten: 0, entriesRemoved: 2, skipped: [], elapsedSeconds: 0)
            let second = certificate("22222222-2222-4222-8222-222222222222", done)
            try await store.finishWipe(TurnHeld(testing: id("bob")), summary: done, certificate: second, event: ev("bob", "wipe"))
            await #expect(try store.certificate(user: "bob") == second)
            await #expect(try store.certificate(user: "bob", id: first.id) == first)
            await #expect(try store.certificate(user: "alice") == nil)
            await #expect(try store.events(user: "bob", limit: 10).map(\.certificate) == [nil, nil, first.id, second.id])
            await #expect(try store.certificates(ids: [first.id, second.id]) == [first.id: first, second.id: second])
        }
    }

    /// Events and certificates belong to the uid and id of the registration their name
    /// had when they were recorded: a later registration of the same name, for another
    /// uid, owns none of the earlier one's, and the unregister event is the old one's.
    @Test func eventsAndCertificatesBelongToTheirRegistration() async throws {
        try await withStore { store, _ in
            let old = record("bob")
            try await store.insert(old, event: ev("bob", "register"))
            try await store.commitWipeIntent(TurnHeld(testing: id("bob")), reason: "test", trigger: .admin, event: ev("bob", "wipe-started"))
            try await store.beginWipeAttempt(TurnHeld(testing: id("bob")), event: nil)
            let done = WipeSummary(filesOverwritten: 0, bytesOverwritten: 0, entriesRemoved: 2, skipped: [], elapsedSeconds: 0)
            let first = certificate("11111111-1111-4111-8111-111111111111", done)
            try await store.finishWipe(TurnHeld(testing: id("bob")), summary: done, certificate: first, event: ev("bob", "wipe"))
            try await store.delete(TurnHeld(testing: id("bob")), event: ev("bob", "unregister"))
            try await store.append(ev("bob", "unlock-failed"))  // a name with no registration: nobody's

            var new = record("bob")
            new.uid = 2002
            new.id = RegistrationID.new()
            try await store.insert(new, event: ev("bob", "register"))

            let all = try await store.events(user: "bob", limit: 10)
            #expect(all.map(\.kind.rawValue) == ["register", "wipe-started", "wipe", "unregister", "unlock-failed", "register"])
            #expect(all.map(\.uid) == [1001, 1001, 1001, 1001, nil, 2002])
            #expect(all.map(\.registrationID) == [old.id, old.id, old.id, old.id, nil, new.id])
            await #expect(try store.events(user: "bob", limit: 10, owner: 2002).map(\.kind.rawValue) == ["register"])
            await #expect(try store.events(user: "bob", limit: 10, owner: 1001).map(\.kind.rawValue) == ["register", "wipe-started", "wipe", "unregister"])
            await #expect(try store.events(user: "bob", limit: 10, owner: 0).isEmpty)
            await #expect(try store.certificate(user: "bob") == first)
            await #expect(try store.certificate(user: "bob", owner: 2002) == nil)
            await #expect(try store.certificate(user: "bob", id: first.id, owner: 2002) == nil)
            await #expect(try store.certificate(user: "bob", owner: 1001) == first)
            await #expect(try store.certificate(user: "bob", id: first.id, owner: 1001) == first)
        }
    }

    /// A database from before events were attributed (v10): what can be known is kept
    /// (the current registration's events from its own `register` on, and the
    /// certificates they name); earlier registrations of the name and names no longer
    /// registered belong to nobody (administrators only).
    @Test func eventsOfAnOlderDatabaseAreAttributedWhereTheyCanBe() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lwstate-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let path = dir + "/" + StateStore.fileName
        let oldCertificate = certificate(
            "11111111-1111-4111-8111-111111111111", WipeSummary(filesOverwritten: 0, bytesOverwritten: 0, entriesRemoved: 1, skipped: [], elapsedSeconds: 0))
        let newCertificate = certificate(
            "22222222-2222-4222-8222-222222222222", WipeSummary(filesOverwritten: 0, bytesOverwritten: 0, entriesRemoved: 1, skipped: [], elapsedSeconds: 0))
        do {
            try StateStore.migrate(path: path, keyFiles: KeyFiles(stateDirectory: dir), upTo: "v10-certificates")
            let queue = try DatabaseQueue(path: path)
            try await queue.write { db in
                // bob: registered, wiped, unregistered; a new bob registered and wiped; carol: gone.
                let events: [(String, String, String?)] = [
                    ("bob", "register", nil), ("bob", "wipe", oldCertificate.id), ("bob", "unregister", nil),
                    ("carol", "register", nil), ("carol", "unregister", nil),
                    ("bob", "register", nil), ("bob", "lock", nil), ("bob", "wipe", newCertificate.id),
                ]
                for (user, kind, certificate) in events {
                    try db.execute(
                        sql: "INSERT INTO events (time, user, kind, trigger, detail, certificate) VALUES (100, ?, ?, 'admin', '', ?)",
                        arguments: [user, kind, certificate])
                }
                for c in [oldCertificate, newCertificate] {
                    try db.execute(
                        sql: "INSERT INTO certificates (id, user, finished_at, complete, body) VALUES (?, 'bob', 100, 1, ?)",
                        arguments: [c.id, String(decoding: try StateStore.certificateEncoder.encode(c), as: UTF8.self)])
                }
                try db.execute(
                    sql: """
                        INSERT INTO registrations (user, uid, state, protection, blocked, created_at, clock_last_contact,
                            clock_accumulated_boot, clock_boot_id, clock_boot_mark, clock_last_wall, clock_offline_seconds, id)
                        VALUES ('bob', 2002, 'wiped', 'permissions', 0, 100, 100, 0, 'x', 5, 100, 0, 'feedfeedfeedfeedfeedfeedfeedfeed')
                        """)
            }
            try queue.close()
        }
        let store = try StateStore(directory: dir)
        let events = try await store.events(user: nil, limit: 20)
        #expect(events.map(\.kind.rawValue) == ["register", "wipe", "unregister", "register", "unregister", "register", "lock", "wipe"])
        #expect(events.map(\.uid) == [nil, nil, nil, nil, nil, 2002, 2002, 2002])
        #expect(events.map(\.registrationID).compactMap { $0 } == Array(repeating: RegistrationID("feedfeedfeedfeedfeedfeedfeedfeed"), count: 3))
        await #expect(try store.events(user: "bob", limit: 20, owner: 2002).map(\.kind.rawValue) == ["register", "lock", "wipe"])
        await #expect(try store.events(user: "carol", limit: 20, owner: 2002).isEmpty)
        await #expect(try store.certificate(user: "bob", owner: 2002) == newCertificate)
        await #expect(try store.certificate(user: "bob", id: oldCertificate.id, owner: 2002) == nil)
        await #expect(try store.certificate(user: "bob", id: oldCertificate.id) == oldCertificate)
    }

    private func certificate(_ id: String, _ s: WipeSummary) -> SanitizationCertificate {
        .make(
            id: id, host: .init(hostname: "h", machineID: nil), subject: .init(user: "bob", uid: 1000, directories: ["/x"], protection: "permissions"),
            trigger: .retryLimit, reason: "test", requestedAt: "2027-01-01T00:00:00Z", requester: WipeRequester(), attempt: 1, summary: s,
            started: "2027-01-01T00:00:00Z", finished: "2027-01-01T00:00:01Z", verification: [], toolVersion: "0")
    }

    /// An event of a kind this lockwiped does not know (a newer one wrote it) fails the read
    /// with words that say so: history is not shown with it renamed or left out.
    @Test func anEventOfAnUnknownKindFailsTheReadAndSaysSo() async throws {
        try await withStore { store, dir in
            try await store.insert(record("alice"), event: ev("alice", "register"))
            let queue = try DatabaseQueue(path: dir + "/" + StateStore.fileName)
            try await queue.write { db in
                try db.execute(sql: "INSERT INTO events (time, user, kind, trigger, detail) VALUES (200, 'alice', 'from-the-future', 'admin', '')")
            }
            try queue.close()
            let error = await #expect(throws: UnknownEventKind.self) { try await store.events(user: "alice", limit: 10) }
            #expect(error?.kind == "from-the-future")
            #expect(error.map { "\($0)".contains("a newer version") } == true)
        }
    }

    @Test func aDirectoryCannotBelongToTwoRegistrations() async throws {
        try await withStore { store, _ in
            try await store.insert(record("alice"), event: ev("alice", "register"))
            var other = record("carol")
            other.directories = ["/srv/alice/a"]
            await #expect(throws: (any Error).self) { try await store.insert(other, event: ev("carol", "register")) }
            await #expect(try store.registration("carol") == nil)  // the transaction rolled back whole
            await #expect(try store.events(user: "carol", limit: 10).isEmpty)
        }
    }

    // MARK: Damage: never start afresh over a database that was there

    func damage(_ body: () async throws -> Void) async -> StateStoreDamage? {
        do {
            try await body()
            return nil
        } catch let d as StateStoreDamage {
            return d
        } catch {
            Issue.record("expected StateStoreDamage, got \(error)")
            return nil
        }
    }

    @Test func aMissingDatabaseIsNotReplacedByAnEmptyOne() async throws {
        try await withStore { store, dir in
            try await store.insert(record("alice"), event: ev("alice", "register"))
            #expect(FileManager.default.fileExists(atPath: dir + "/" + StateStore.markerName))
            for suffix in ["", "-wal", "-shm"] { unlink(dir + "/" + StateStore.fileName + suffix) }
            #expect(await damage { _ = try StateStore(directory: dir) } == .missing(path: dir + "/" + StateStore.fileName))
            #expect(!FileManager.default.fileExists(atPath: dir + "/" + StateStore.fileName), "an empty database was created")
        }
    }

    @Test func aDamagedDatabaseIsRefusedAtOpen() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lwstate-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        do {  // closed at the end of this scope: the WAL is checkpointed into the file
            let store = try StateStore(directory: dir)
            try await store.insert(record("alice"), event: ev("alice", "register"))
        }
        let path = dir + "/" + StateStore.fileName
        let fd = open(path, O_WRONLY)
        #expect(fd >= 0)
        let junk = [UInt8](repeating: 0xa5, count: 100)
        #expect(pwrite(fd, junk, junk.count, 0) == 100)
        close(fd)
        let found = await damage { _ = try StateStore(directory: dir) }
        guard case .damaged(let p, _) = found else {
            Issue.record("expected .damaged, got \(String(describing: found))")
            return
        }
        #expect(p == path)
    }

    @Test func deletionWhileOpenIsNoticedAtTheNextAccessAndLatched() async throws {
        try await withStore { store, dir in
            try await store.insert(record("alice"), event: ev("alice", "register"))
            let seen = Mutex<[StateStoreDamage]>([])
            store.onDamage { d in seen.withLock { $0.append(d) } }
            #expect(store.damage == nil)
            let path = dir + "/" + StateStore.fileName
            for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) }
            #expect(await damage { _ = try await store.registrations() } == .replaced(path: path))
            // Latched: a database that reappears does not make the store trusted again.
            _ = try StateStore(directory: dir + "-other")
            FileManager.default.createFile(atPath: path, contents: Data())
            #expect(await damage { try await store.insert(record("bob"), event: ev("bob", "register")) } == .replaced(path: path))
            #expect(seen.withLock { $0 } == [.replaced(path: path)], "the damage was reported more or less than once")
            try? FileManager.default.removeItem(atPath: dir + "-other")
        }
    }

    @Test func aFirstStartWithoutMarkerCreatesIt() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lwstate-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        _ = try StateStore(directory: dir)
        unlink(dir + "/" + StateStore.markerName)  // a database from before the marker existed
        _ = try StateStore(directory: dir)
        #expect(FileManager.default.fileExists(atPath: dir + "/" + StateStore.markerName))
    }

    /// Issue 40, finding 6: the write observer is called at the same stack depth on the
    /// 100,000th write as on the first. It used to be stored back wrapped in two more
    /// reabstraction thunks at every call, so each write ran two frames deeper and slower
    /// until the store's thread overflowed its stack (about 124,000 writes). Any user can
    /// cause writes (each offline-code challenge is one). The depth is read from the
    /// address of a local in the observer; the loop stops at the first drift it sees.
    @Test func theWriteObserverRunsAtTheSameDepthAfter100000Writes() async throws {
        try await withStore { store, _ in
            let seen = Mutex<(calls: Int, first: Int?, last: Int)>((0, nil, 0))
            store.onWrite {
                var marker = 0
                let address = withUnsafeMutablePointer(to: &marker) { Int(bitPattern: $0) }
                seen.withLock { s in
                    s.calls += 1
                    if s.first == nil { s.first = address }
                    s.last = address
                }
            }
            var drift = 0
            for i in 1...100_000 {
                try store.db.writeWithoutTransaction { _ in }
                if i % 1_000 == 0 {
                    drift = seen.withLock { s in abs(s.last - (s.first ?? s.last)) }
                    if drift > 4_096 { break }
                }
            }
            let s = seen.withLock { $0 }
            #expect(drift <= 4_096, "the observer ran \(drift) bytes deeper after \(s.calls) writes")
            #expect(s.calls == 100_000)
        }
    }

    /// Issue 40, finding 1: a counter is never issued twice under one key. The counter
    /// used to wrap after 2^20 challenges, so the challenge came back byte for byte and
    /// its old response was accepted again. Now the last counter of the epoch is issued,
    /// then challenges are refused until provisioning moves to the next epoch, which
    /// counts from 1 under another machine field (and so another key).
    @Test func theCountersOfAnEpochAreUsedUpNotWrappedAndTheNextEpochCountsAgain() async throws {
        try await withStore { store, _ in
            try await store.insert(record("alice"), event: ev("alice", "register"))
            let id = try #require(try await store.registration("alice")).id
            try store.db.write { db in
                try db.execute(sql: "INSERT INTO offline_code_counter (id, next, epoch) VALUES (1, ?, 0)", arguments: [OfflineCode.countersPerEpoch])
            }
            let event: @Sendable (UInt32) -> StoredEvent = { _ in StoredEvent(time: 100, user: "alice", kind: .offlineCodeChallenge, trigger: .user, detail: "") }
            #expect(
                try await store.issueOfflineChallenge(TurnHeld(testing: id), days: 0, epoch: 0, at: 100, event: event)
                    == .issued(counter: UInt32(OfflineCode.countersPerEpoch)))
            #expect(try await store.offlineCodeEpoch() == (0, true))
            #expect(try await store.issueOfflineChallenge(TurnHeld(testing: id), days: 0, epoch: 0, at: 101, event: event) == .usedUp(epoch: 0))
            // Provisioning moves on one epoch at a time; the outstanding challenge goes with the old key.
            #expect(try await store.advanceOfflineCodeEpoch(to: 2, event: nil) == false)
            #expect(try await store.advanceOfflineCodeEpoch(to: 1, event: nil))
            #expect(try await store.offlineChallenge(registration: id)?.counter == nil)
            #expect(try await store.issueOfflineChallenge(TurnHeld(testing: id), days: 0, epoch: 0, at: 102, event: event) == .epochChanged(now: 1))
            #expect(try await store.issueOfflineChallenge(TurnHeld(testing: id), days: 0, epoch: 1, at: 103, event: event) == .issued(counter: 1))
        }
    }

    /// Challenges are counted per registration in `OfflineChallengeRate`'s window, and a
    /// refused one takes no counter.
    @Test func aRegistrationAsksAtMostTenChallengesAnHour() async throws {
        try await withStore { store, _ in
            try await store.insert(record("alice"), event: ev("alice", "register"))
            try await store.insert(record("bob"), event: ev("bob", "register"))
            let alice = try #require(try await store.registration("alice")).id
            let bob = try #require(try await store.registration("bob")).id
            let event: @Sendable (UInt32) -> StoredEvent = { _ in StoredEvent(time: 100, user: "alice", kind: .offlineCodeChallenge, trigger: .user, detail: "") }
            for i in 1...10 {
                #expect(try await store.issueOfflineChallenge(TurnHeld(testing: alice), days: 0, epoch: 0, at: 1_000 + Int64(i), event: event) == .issued(counter: UInt32(i)))
            }
            #expect(try await store.issueOfflineChallenge(TurnHeld(testing: alice), days: 0, epoch: 0, at: 2_000, event: event) == .tooSoon(until: 4_601))
            #expect(try await store.issueOfflineChallenge(TurnHeld(testing: bob), days: 0, epoch: 0, at: 2_000, event: event) == .issued(counter: 11))
            #expect(try await store.issueOfflineChallenge(TurnHeld(testing: alice), days: 0, epoch: 0, at: 4_601, event: event) == .issued(counter: 12))
        }
    }
}
