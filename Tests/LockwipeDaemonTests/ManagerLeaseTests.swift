import Foundation
import LockwipeCore
import LockwipeProtocol
import LockwipeTestSupport
import Testing

@testable import LockwipeDaemon

/// `Manager.grantLease` (issue 30) with an injected clock: the maximum, the history and
/// journal of a grant, a refusal and an end, and the policy held off until the lease ends.
@Suite struct ManagerLeaseTests {
    let day: Int64 = 86_400
    var root: Caller { ManagerFixture.root }

    func kinds(_ f: ManagerFixture) async throws -> [String] {
        try await f.manager.history(user: "root", owner: nil, limit: 100).events.map(\.kind)
    }

    @Test func aLeaseHoldsTheOfflineLockOffUntilItsEndThenTheLockComes() async throws {
        var config = Configuration()
        config.policy = Policy(offlineDaysBeforeLock: 2, offlineDaysBeforeWipe: 5)
        try await ManagerFixture.run(config) { f in
            _ = try await f.manager.register(user: "root", directories: [f.directory + "/data/vault"], by: root)
            let start = f.clock.now().wall
            let lease = try await f.manager.grantLease(
                user: "root", until: start + 10 * day, source: .offlineCode, reference: "K7QM-2XPA-9RTD", requester: "root (uid 0)")
            #expect(lease == OfflineLease(until: start + 10 * day, grantedAt: start, source: .offlineCode, reference: "K7QM-2XPA-9RTD"))
            let granted = f.logs.with(messageID: MessageID.leaseGranted.rawValue)
            #expect(granted.count == 1)
            #expect(granted.first?.metadata["lease_reference"] == "K7QM-2XPA-9RTD")
            #expect(granted.first?.metadata["lease_requester"] == "root (uid 0)")
            #expect(try await kinds(f).contains("lease-granted"))

            f.clock.advance(seconds: 6 * day)
            await f.manager.evaluate()
            var info = try #require(try await f.manager.status(for: root, user: "root").registrations.first)
            #expect(info.state == .active)
            #expect(info.lease?.inForce == true && info.lease?.source == "offline-code" && info.lease?.remainingSeconds == 4 * day)
            #expect(info.nextAction == NextAction(action: .lock, at: Timestamp.iso(start + 10 * day)))

            f.clock.advance(seconds: 4 * day)
            await f.manager.evaluate()
            info = try #require(try await f.manager.status(for: root, user: "root").registrations.first)
            #expect(info.state == .locked && info.lockTrigger == .offline)
            #expect(info.lease?.inForce == false && info.lease?.endedAt == Timestamp.iso(start + 10 * day))
            #expect(info.nextAction == NextAction(action: .wipe, at: Timestamp.iso(start + 13 * day)))
            let history = try await kinds(f)
            #expect(history.filter { $0 == "lease-ended" }.count == 1)
            #expect(history.firstIndex(of: "lease-ended")! < history.lastIndex(of: "lock")!)
            await f.manager.evaluate()
            #expect(try await kinds(f).filter { $0 == "lease-ended" }.count == 1, "the end is recorded once")
            #expect(f.logs.with(messageID: MessageID.leaseEnded.rawValue).count == 1)
        }
    }

    @Test func aLeasePastTheMaximumIsRefusedAndChangesNothing() async throws {
        var config = Configuration()
        config.policy = Policy(offlineDaysBeforeLock: 2, offlineDaysBeforeWipe: 5)
        config.offlineCodes.maxLeaseDays = 7
        try await ManagerFixture.run(config) { f in
            _ = try await f.manager.register(user: "root", directories: [f.directory + "/data/vault"], by: root)
            let now = f.clock.now().wall
            await #expect {
                try await f.manager.grantLease(user: "root", until: now + 8 * day, source: .offlineCode, reference: "ABCD", requester: "root (uid 0)")
            } throws: { error in
                guard case ManagerError.invalidParameter("until", let reason) = error else { return false }
                return reason.contains("past the maximum of 7 days ([offline_codes] max_lease_days)") && reason.contains("nothing was granted")
            }
            await #expect(throws: ManagerError.self) {
                try await f.manager.grantLease(user: "root", until: now - 1, source: .offlineCode, reference: "ABCD", requester: "root (uid 0)")
            }
            #expect(try await f.manager.status(for: root, user: "root").registrations.first?.lease == nil)
            #expect(try await kinds(f).filter { $0 == "lease-refused" }.count == 2)
            #expect(f.logs.with(messageID: MessageID.leaseRefused.rawValue).count == 2)
            // Exactly the maximum is granted.
            _ = try await f.manager.grantLease(user: "root", until: now + 7 * day, source: .offlineCode, reference: "ABCD", requester: "root (uid 0)")
            #expect(try await f.manager.status(for: root, user: "root").registrations.first?.lease?.inForce == true)
        }
    }
}
