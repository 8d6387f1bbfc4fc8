import Foundation
import LockwipeCore
import LockwipeProtocol
import LockwipeSystemd
import LockwipeTestSupport
import Logging
import NIOCore
import Synchronization
import Testing

@testable import LockwipeDaemon

/// Issue 12, finding 5: an answer is applied only to the registration (by id) that asked.
@Suite struct CheckInGenerationTests {
    var root: Caller { ManagerFixture.root }

    @Test func aStaleWipeOrderReachesNoNewRegistrationOfTheSameUser() async throws {
        var config = Configuration()
        config.server = ServerConfiguration(url: "https://127.0.0.1:9", intervalSeconds: 100_000, timeoutSeconds: 1)
        let fetcher = HeldFetcher(answer: .wipe)
        try await ManagerFixture.run(config, fetcher: fetcher) { f in
            let m = f.manager, dir = f.directory
            try FileManager.default.createDirectory(atPath: dir + "/data/new", withIntermediateDirectories: true)
            try "new registration's data\n".write(toFile: dir + "/data/new/canary.txt", atomically: true, encoding: .utf8)
            _ = try await m.register(user: "root", directories: [dir + "/data/old"], by: root)
            _ = try #require(try await m.status(for: root, user: "root").registrations.first)

            let pending = Task { try await m.checkIn(users: ["root"]) }
            while fetcher.calls == 0 { try await Task.sleep(for: .milliseconds(10)) }
            _ = try await m.unregister(user: "root", by: root)
            _ = try await m.register(user: "root", directories: [dir + "/data/new"], by: root)
            fetcher.release()  // the old registration's TRAFFIC_REG_WIPED arrives now
            let result = try #require(try await pending.value.first)

            #expect(result.failed == true)
            #expect(result.reason.contains("dropped"))
            let now = try #require(try await m.status(for: root, user: "root").registrations.first)
            #expect(now.state == .active)
            #expect(FileManager.default.fileExists(atPath: dir + "/data/new/canary.txt"))
            let events = try await m.history(user: "root", owner: nil, limit: 100).events
            #expect(events.contains { $0.kind == "check-in-dropped" && $0.detail.contains("TRAFFIC_REG_WIPED") })
            #expect(!events.contains { $0.kind == "wipe" })
        }
    }

    /// Issue 41: a check-in planned for one registration (the schedule, the pass before an
    /// offline action) is made for that registration or for none, never for another one
    /// that has the name by then (a wipe order meant for the old one could reach it).
    @Test func aCheckInPlannedForAnOldRegistrationIsNotMadeForTheNewOne() async throws {
        var config = Configuration()
        config.server = ServerConfiguration(url: "https://127.0.0.1:9", intervalSeconds: 100_000, timeoutSeconds: 1)
        let fetcher = ScriptedFetcher()
        try await ManagerFixture.run(config, fetcher: fetcher) { f in
            let m = f.manager, dir = f.directory
            _ = try await m.register(user: "root", directories: [dir + "/data/old"], by: root)
            let old = try #require(try await m.context.store.registration("root")).id
            _ = try await m.unregister(user: "root", by: root)
            _ = try await m.register(user: "root", directories: [dir + "/data/new"], by: root)
            let new = try #require(try await m.context.store.registration("root")).id
            // The fixture runs no start-up pass, so no check-in is planned or started meanwhile.
            #expect(try await m.statusSnapshot(for: root, user: "root").registrations.first?.nextCheckIn == nil)
            let before = fetcher.calls.count
            fetcher.answer(.wipe)

            let stale = await m.checkIn(user: "root", id: old, purpose: .scheduled)
            #expect(stale.failed == true)
            #expect(fetcher.calls.count == before, "no request is sent for a registration that is gone")
            let now = try #require(try await m.context.store.registration("root"))
            #expect(now.id == new && now.state == .active)

            // The new registration's own planned check-in is made, and its answer applies to it.
            let own = await m.checkIn(user: "root", id: new, purpose: .scheduled)
            #expect(fetcher.calls.count == before + 1)
            #expect(own.state == .wiped, "\(own.reason)")
        }
    }
}
