import Foundation
import GRDB
import LockwipeCore
import Testing

@testable import LockwipeDaemon

/// `RegistrationID` changes no stored byte: it is the plain string in JSON and the same
/// TEXT in the database as the bare `String` it replaced.
@Suite struct RegistrationIDTests {
    let id = RegistrationID("0123456789abcdef0123456789abcdef")

    @Test func encodesAsThePlainStringInJSON() throws {
        let encoded = try JSONEncoder().encode(id)
        #expect(String(decoding: encoded, as: UTF8.self) == #""0123456789abcdef0123456789abcdef""#)
        #expect(try JSONDecoder().decode(RegistrationID.self, from: encoded) == id)
        // Inside a document too: a key's value is the string, not an object around it.
        struct Holder: Codable, Equatable { var registrationID: RegistrationID? }
        let document = try JSONEncoder().encode(Holder(registrationID: id))
        #expect(String(decoding: document, as: UTF8.self) == #"{"registrationID":"0123456789abcdef0123456789abcdef"}"#)
        #expect(try JSONDecoder().decode(Holder.self, from: document) == Holder(registrationID: id))
        #expect(id.description == id.rawValue && "\(id)" == id.rawValue)
    }

    @Test func isStoredAsTheSameTextInARow() throws {
        let queue = try DatabaseQueue()
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE t (id TEXT)")
            try db.execute(sql: "INSERT INTO t (id) VALUES (?)", arguments: [id])
            #expect(try String.fetchOne(db, sql: "SELECT id FROM t") == id.rawValue)
            #expect(try String.fetchOne(db, sql: "SELECT typeof(id) FROM t") == "text")
            #expect(try RegistrationID.fetchOne(db, sql: "SELECT id FROM t") == id)
            let row = try #require(try Row.fetchOne(db, sql: "SELECT id FROM t WHERE id = ?", arguments: [id]))
            #expect(row["id"] as RegistrationID == id)
            #expect(try RegistrationID.fetchOne(db, sql: "SELECT NULL") == nil)
        }
    }

    @Test func roundTripsThroughTheStore() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lwstate-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try StateStore(directory: dir)
        var r = RegistrationRecord(
            user: "alice", uid: 1001, state: .active, protection: .permissions, directories: ["/srv/alice"],
            lockTrigger: nil, blocked: false, clock: .started(at: ClockReading(wall: 100, boot: 5, bootID: "x")), lastWipe: nil)
        r.id = id
        try await store.insert(r, event: StoredEvent(time: 100, user: "alice", kind: .register, trigger: .admin, detail: ""))
        #expect(try await store.registration("alice")?.id == id)
        #expect(try await store.events(user: "alice", limit: 1).first?.registrationID == id)
        // The raw column holds the plain text, as before the type.
        let raw = try DatabaseQueue(path: dir + "/" + StateStore.fileName)
        #expect(try await raw.read { db in try String.fetchOne(db, sql: "SELECT id FROM registrations WHERE user = 'alice'") } == id.rawValue)
        try raw.close()
    }

    @Test func twoNewIDsDifferAndAre128BitsOfHex() {
        let (a, b) = (RegistrationID.new(), RegistrationID.new())
        #expect(a != b)
        for made in [a, b] {
            #expect(made.rawValue.count == 32 && made.rawValue.allSatisfy { "0123456789abcdef".contains($0) })
        }
    }
}
