import Foundation
import LockwipeCore
import LockwipeProtocol
import Synchronization
import Testing

@testable import LockwipeDaemon

@Suite struct ReplyMemoTests {
    private func report(offline: Int64, state: String = "active") -> StatusReport {
        let info = RegistrationInfo(
            user: "alice", uid: 1000, state: RegistrationState(rawValue: state)!, protection: .permissions, directories: ["/srv/alice"],
            blocked: false, lastContact: "2026-11-23T00:00:00Z", offlineSeconds: offline, nextAction: nil, lockTrigger: nil, wipe: nil, wipeProgress: nil)
        return StatusReport(
            version: "1", server: ServerInfo(configured: false, url: nil, insecureHttp: false),
            policy: PolicyInfo(policy: .never, source: "local"), registrations: [info], warnings: [])
    }

    @Test func anUnchangedReportIsNotEncodedAgainAndGetsTheEncodersBytes() throws {
        let encodings = Atomic(0)
        let memo = ReplyMemo<StatusReport> {
            encodings.add(1, ordering: .relaxed)
            return try VarlinkMessage.encodeReply($0)
        }
        let first = try memo.reply(report(offline: 5))
        #expect(try memo.reply(report(offline: 5)) == first)
        #expect(encodings.load(ordering: .relaxed) == 1, "an unchanged report was encoded again")
        #expect(first == (try VarlinkMessage.encodeReply(report(offline: 5))))
    }

    @Test func anyChangeIsEncodedAfresh() throws {
        let memo = ReplyMemo<StatusReport> { try VarlinkMessage.encodeReply($0) }
        let before = try memo.reply(report(offline: 5))
        let later = try memo.reply(report(offline: 6))
        let locked = try memo.reply(report(offline: 6, state: "locked"))
        #expect(later != before)
        #expect(later == (try VarlinkMessage.encodeReply(report(offline: 6))))
        #expect(locked == (try VarlinkMessage.encodeReply(report(offline: 6, state: "locked"))))
        #expect(try memo.reply(report(offline: 5)) == before, "going back to an older report gave stale bytes")
    }

    @Test func anEntryKeptForAWhileIsLetGoThenAndEncodedAgain() async throws {
        let encodings = Atomic(0)
        let drops = Atomic(0)
        let memo = ReplyMemo<StatusReport>(keep: .seconds(1), dropped: { drops.add(1, ordering: .relaxed) }) {
            encodings.add(1, ordering: .relaxed)
            return try VarlinkMessage.encodeReply($0)
        }
        let first = try memo.reply(report(offline: 5))
        #expect(try memo.reply(report(offline: 5)) == first)
        #expect(encodings.load(ordering: .relaxed) == 1)
        let deadline = ContinuousClock.now + .seconds(10)
        while drops.load(ordering: .relaxed) == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(drops.load(ordering: .relaxed) == 1, "the entry was not let go after its time")
        #expect(try memo.reply(report(offline: 5)) == first, "the reply after the entry was let go is not the encoder's")
        #expect(encodings.load(ordering: .relaxed) == 2, "the entry was still used after its time")
    }

    @Test func anEntryReplacedMeanwhileIsNotLetGoByTheOldOnesTime() async throws {
        let droppedAt = Mutex<[ContinuousClock.Instant]>([])
        let memo = ReplyMemo<StatusReport>(keep: .seconds(2), dropped: { droppedAt.withLock { $0.append(.now) } }) {
            try VarlinkMessage.encodeReply($0)
        }
        _ = try memo.reply(report(offline: 5))
        try await Task.sleep(for: .milliseconds(100))
        let replaced = ContinuousClock.now
        _ = try memo.reply(report(offline: 6))
        // (On a loaded machine the sleep may outlast the first entry's time: that drop, before
        // the replacement, is right and not counted.)
        let deadline = ContinuousClock.now + .seconds(10)
        while droppedAt.withLock({ !$0.contains { $0 > replaced } }), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        try await Task.sleep(for: .milliseconds(100))
        let drops = droppedAt.withLock { $0 }.filter { $0 > replaced }
        #expect(drops.count == 1)
        // A timer never fires early: the one drop is the new entry's, its whole time after it.
        #expect(try #require(drops.first) - replaced >= .seconds(2), "the old entry's time let the new one go")
    }
}
