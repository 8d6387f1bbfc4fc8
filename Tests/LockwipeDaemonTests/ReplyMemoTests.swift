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
}
