import Foundation
import LockwipeCore
import Testing

@testable import LockwipeDaemon

/// The history's bounds in the store (issue 40, finding 5; `HistoryRetention`): runs of
/// refusals aggregated, counts and age pruned per registration, kept kinds kept, details
/// bounded, and a read that stops at its byte bound.
@Suite struct StateStoreHistoryTests {
    func withStore(_ body: (StateStore) async throws -> Void) async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lwhistory-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try StateStore(directory: dir)
        var r = RegistrationRecord(
            user: "alice", uid: 1001, state: .active, protection: .permissions, directories: ["/srv/alice"], lockTrigger: nil, blocked: false,
            clock: .started(at: ClockReading(wall: 100, boot: 5, bootID: "x")), lastWipe: nil)
        r.id = RegistrationID(String(repeating: "a", count: 32))
        try await store.insert(r, event: event(.register, at: 100))
        try await body(store)
    }

    func event(_ kind: EventKind, at time: Int64, detail: String = "d", by uid: UInt32? = 1001) -> StoredEvent {
        var e = StoredEvent(time: time, user: "alice", kind: kind, trigger: .user, detail: detail)
        e.requester = uid.map { StoredEvent.Requester(uid: $0, pid: 7, comm: "lockwipectl") }
        return e
    }

    @Test func aRunOfRefusalsIsOneEventWithItsCountAndItsLastDetail() async throws {
        try await withStore { store in
            for i in 0..<500 { try await store.appendRepeatable(event(.offlineCodeRefused, at: 1_000 + Int64(i), detail: "refused \(i)")) }
            var events = try await store.events(user: "alice", limit: 100)
            #expect(events.map(\.kind) == [.register, .offlineCodeRefused])
            #expect(events.last?.repeats == 500 && events.last?.time == 1_000 && events.last?.lastTime == 1_499)
            #expect(events.last?.detail == "refused 499")
            // Another requester, something else in between, or the hour over: a new run.
            try await store.appendRepeatable(event(.offlineCodeRefused, at: 1_500, by: 0))
            try await store.append(event(.lock, at: 1_501))
            try await store.appendRepeatable(event(.offlineCodeRefused, at: 1_502))
            try await store.appendRepeatable(event(.offlineCodeRefused, at: 1_502 + HistoryRetention.repeatWindow))
            events = try await store.events(user: "alice", limit: 100)
            #expect(events.map(\.repeats) == [nil, 500, 1, nil, 1, 1])
        }
    }

    @Test func eachRuleIsPrunedToItsCountAndKeptEventsAreNot() async throws {
        try await withStore { store in
            // A refusal at a time, each its own event (another requester each time).
            let n = HistoryRetention.maxRepeatableEvents + 20
            for i in 0..<n { try await store.appendRepeatable(event(.offlineCodeRefused, at: 2_000 + Int64(i), by: UInt32(i))) }
            try await store.append(event(.lock, at: 9_000))
            let events = try await store.events(user: "alice", limit: 10_000)
            let refused = events.filter { $0.kind == .offlineCodeRefused }
            #expect(refused.count == HistoryRetention.maxRepeatableEvents)
            #expect(refused.first?.time == 2_020)  // the oldest went
            #expect(events.first?.kind == .register)  // kept, and not counted against them
            #expect(events.last?.kind == .lock)
        }
    }

    @Test func eventsOlderThanTheMaximumAgeArePrunedButKeptKindsStay() async throws {
        try await withStore { store in
            try await store.append(event(.lock, at: 200))
            try await store.append(event(.unlock, at: 300))
            try await store.append(event(.lock, at: 300 + HistoryRetention.maxAge))
            let kinds = try await store.events(user: "alice", limit: 100).map(\.kind)
            #expect(kinds == [.register, .unlock, .lock])
        }
    }

    @Test func theStartUpPrunesARegistrationThatRecordsNothingMore() async throws {
        try await withStore { store in
            try await store.append(event(.lock, at: 200))
            try await store.append(event(.unlock, at: 300))
            #expect(try await store.pruneHistory(now: 250 + HistoryRetention.maxAge) == 1)
            #expect(try await store.events(user: "alice", limit: 100).map(\.kind) == [.register, .unlock])
            #expect(try await store.pruneHistory(now: 250 + HistoryRetention.maxAge) == 0)
        }
    }

    @Test func detailsAreBoundedAndAReadStopsAtItsBytes() async throws {
        try await withStore { store in
            for i in 0..<50 { try await store.append(event(.lock, at: 1_000 + Int64(i), detail: String(repeating: "x", count: 60_000))) }
            let all = try await store.events(user: "alice", limit: 100)
            #expect(all.count == 51 && all.allSatisfy { $0.detail.utf8.count <= HistoryRetention.maxDetailBytes })
            let (events, truncated) = try await store.history(user: "alice", limit: 100, maxBytes: 10 * (HistoryRetention.maxDetailBytes + 600))
            #expect(truncated && events.count == 10 && events.last?.time == 1_049)  // the newest, oldest first
            let (whole, cut) = try await store.history(user: "alice", limit: 100, maxBytes: 1 << 30)
            #expect(!cut && whole.count == 51)
        }
    }
}
