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

@Suite struct ManagerCheckInTests {
    let day: Int64 = 86_400
    var root: Caller { ManagerFixture.root }

    func settings(lock: Int, wipe: Int, locked: Bool? = nil) -> ServerSettings {
        ServerSettings(lockWipe: LockWipeSettings(enabled: true, blockDisconnectedPeriod: lock, wipeDisconnectedPeriod: wipe), registrationLocked: locked)
    }

    func withManager(
        lockDays: Int = 2, liftAfterContact: PolicyLockLift.Setting = .atLogin, _ body: (Manager, ManualClock, ScriptedFetcher, String) async throws -> Void
    ) async throws {
        var config = Configuration()
        config.liftAfterContact = liftAfterContact
        config.policy = Policy(offlineDaysBeforeLock: lockDays, offlineDaysBeforeWipe: 0)
        // A long interval: nothing is scheduled by itself during a test.
        config.server = ServerConfiguration(url: "http://127.0.0.1:9", intervalSeconds: 100_000, timeoutSeconds: 1)
        let fetcher = ScriptedFetcher()
        try await ManagerFixture.run(config, fetcher: fetcher) { f in try await body(f.manager, f.clock, fetcher, f.directory) }
    }

    func reg(_ m: Manager) async throws -> RegistrationInfo {
        try #require(try await m.status(for: root, user: "root").registrations.first)
    }

    @Test func aContactRestartsTheClockAndTheServerPolicyWins() async throws {
        try await withManager { m, clock, fetcher, dir in
            _ = try await m.register(user: "root", directories: [dir + "/data/v"], credentials: ServerCredentials(token: "s3cret"), by: root)
            clock.advance(seconds: day)
            fetcher.answer(.contact(settings(lock: 5, wipe: 9)))
            let r = try await m.checkIn(users: ["root"])
            #expect(r.first?.failed == false)
            let info = try await reg(m)
            #expect(info.offlineSeconds == 0)
            #expect(info.policySource == "server")
            #expect(info.policy?.policy == Policy(offlineDaysBeforeLock: 5, offlineDaysBeforeWipe: 9))
            #expect(info.lastError == nil)
            #expect(info.credentials == "token")
            #expect(fetcher.tokens.last == "s3cret")
            #expect(try await m.policyInfo().source == "server")
        }
    }

    func withSAPManager(_ body: (Manager, ManualClock, ScriptedFetcher, String) async throws -> Void) async throws {
        var config = Configuration()
        config.policy = Policy(offlineDaysBeforeLock: 2, offlineDaysBeforeWipe: 0)
        config.server = ServerConfiguration(
            url: "http://127.0.0.1:9", intervalSeconds: 100_000, timeoutSeconds: 1, serverProtocol: .sapMobileServices,
            applicationID: "com.example.app", deviceID: "dev")
        let fetcher = ScriptedFetcher()
        try await ManagerFixture.run(config, fetcher: fetcher) { f in try await body(f.manager, f.clock, fetcher, f.directory) }
    }

    /// SAP: the connection is made once, its id sent from then on, and its creation is a
    /// contact even when the settings request then fails; unregister deletes it.
    @Test func sapConnectionIsMadeOnceAndSentAfterwards() async throws {
        try await withSAPManager { m, clock, fetcher, dir in
            fetcher.answerConnection(.created("c-1"))
            fetcher.answer(.failure("HTTP 500"))
            _ = try await m.register(user: "root", directories: [dir + "/data/v"], by: root)
            clock.advance(seconds: day)
            _ = try await m.checkIn(users: ["root"])
            var info = try await reg(m)
            #expect(info.sapConnection == "c-1" && info.sapConnectionProblem == nil)
            #expect(info.offlineSeconds == 0, "a successful Connections answer is a contact")
            #expect(info.lastError == "HTTP 500")
            fetcher.answer(.contact(ServerSettings()))
            _ = try await m.checkIn(users: ["root"])
            #expect(fetcher.connectionRequests == 1)
            #expect(fetcher.connectionsSent.last == "c-1")
            info = try await reg(m)
            // SAP: no blockWipingPolicy in the answer: the policy in force (the local one,
            // before any server policy) is kept and said (issue 29: ReadRoles may hide it).
            #expect(info.policySource == "local" && info.policy?.policy == Policy(offlineDaysBeforeLock: 2, offlineDaysBeforeWipe: 0))
            #expect(info.serverPolicyNote == ServerPolicyAbsence.note)
            _ = try await m.unregister(user: "root", by: root)
            for _ in 0..<200 where fetcher.deleted.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
            #expect(fetcher.deleted == ["c-1"])
        }
    }

    @Test func sapConnectionWithoutAnIDIsRetriedAndARefusalActsAsACheckIn() async throws {
        try await withSAPManager { m, _, fetcher, dir in
            fetcher.answerConnection(.createdWithoutID("HTTP 201 without a connection id"))
            fetcher.answer(.failure("HTTP 403 without x-message-code"))
            _ = try await m.register(user: "root", directories: [dir + "/data/v"], by: root)
            _ = try await m.checkIn(users: ["root"])
            var info = try await reg(m)
            #expect(info.sapConnection == nil && info.sapConnectionProblem?.contains("retried at the next check-in") == true)
            #expect(fetcher.connectionsSent.last == .some(nil))
            let before = fetcher.connectionRequests
            fetcher.answerConnection(.refused(.lock))
            _ = try await m.checkIn(users: ["root"])
            #expect(fetcher.connectionRequests == before + 1)
            info = try await reg(m)
            #expect(info.state == .locked && info.lockTrigger == .server)
        }
    }

    @Test func failuresChangeNothingButTheAttempt() async throws {
        try await withManager { m, clock, fetcher, dir in
            _ = try await m.register(user: "root", directories: [dir + "/data/v"], by: root)
            clock.advance(seconds: day)
            fetcher.answer(.failure("HTTP 500"))
            let r = try await m.checkIn(users: ["root"])
            #expect(r.first?.failed == true)
            let info = try await reg(m)
            #expect(info.offlineSeconds == day)
            #expect(info.policySource == "local")
            #expect(info.lastError == "HTTP 500")
            #expect(info.lastAttempt != nil)
        }
    }

    @Test func anInvalidServerPolicyIsRejectedAndTheLastValidKept() async throws {
        try await withManager { m, _, fetcher, dir in
            _ = try await m.register(user: "root", directories: [dir + "/data/v"], by: root)
            fetcher.answer(.contact(settings(lock: 5, wipe: 9)))
            _ = try await m.checkIn(users: ["root"])
            fetcher.answer(.contact(settings(lock: 9, wipe: 5)))
            _ = try await m.checkIn(users: ["root"])
            let info = try await reg(m)
            #expect(info.policy?.policy == Policy(offlineDaysBeforeLock: 5, offlineDaysBeforeWipe: 9))
            #expect(info.lastError?.contains("rejected") == true)
        }
    }

    /// README.md ("Policy server"): one bounded check-in before an offline-triggered
    /// action; if it is a contact, nothing happens.
    @Test func anOfflineLockChecksInFirst() async throws {
        try await withManager(lockDays: 2) { m, clock, fetcher, dir in
            _ = try await m.register(user: "root", directories: [dir + "/data/v"], by: root)
            clock.advance(seconds: 3 * day)
            fetcher.answer(.contact(ServerSettings()))
            await m.evaluate()
            #expect(try await reg(m).state == .active)
            #expect(fetcher.calls.count == 1)

            clock.advance(seconds: 3 * day)
            fetcher.answer(.failure("cannot connect"))
            await m.evaluate()
            let info = try await reg(m)
            #expect(info.state == .locked)
            #expect(info.lockTrigger == .offline)
            #expect(fetcher.calls.count == 2)
        }
    }

    /// `lift_after_contact = "at-login"` (issue 29): the contact makes the server's lock
    /// liftable, the login lifts it; a login before the contact lifts nothing.
    @Test func aContactMakesAServerLockLiftableAndTheLoginLiftsIt() async throws {
        try await withManager { m, _, fetcher, dir in
            _ = try await m.register(user: "root", directories: [dir + "/data/v"], by: root)
            fetcher.answer(.lock)
            _ = try await m.checkIn(users: ["root"])
            var info = try await reg(m)
            #expect(info.state == .locked && info.lockTrigger == .server && info.lockLiftable == false)
            let before = try await m.liftAtLogin(uid: 0, password: "pw", by: root)
            #expect(before.map(\.reason).first?.hasPrefix("the lock stays") == true)
            #expect(try await reg(m).state == .locked)

            fetcher.answer(.contact(settings(lock: 5, wipe: 9, locked: false)))
            _ = try await m.checkIn(users: ["root"])
            info = try await reg(m)
            #expect(info.state == .locked && info.lockTrigger == .server && info.lockLiftable == true)
            #expect(info.lockWaitsFor?.hasPrefix("the policy server allows it: lifted at root's next login") == true)

            let lifted = try await m.liftAtLogin(uid: 0, password: "pw", by: root)
            #expect(lifted.map(\.state) == [.active])
            info = try await reg(m)
            #expect(info.state == .active && info.lockLiftable == nil && info.lockWaitsFor == nil)
        }
    }

    /// `lift_after_contact = "immediately"`: the behaviour before issue 29.
    @Test func aContactLiftsServerAndOfflineLocksButNeverAnAdminLock() async throws {
        try await withManager(liftAfterContact: .immediately) { m, _, fetcher, dir in
            _ = try await m.register(user: "root", directories: [dir + "/data/v"], by: root)
            fetcher.answer(.lock)
            _ = try await m.checkIn(users: ["root"])
            #expect(try await reg(m).state == .locked)
            #expect(try await reg(m).lockTrigger == .server)
            fetcher.answer(.contact(settings(lock: 5, wipe: 9, locked: false)))
            _ = try await m.checkIn(users: ["root"])
            #expect(try await reg(m).state == .active)

            _ = try await m.lock(user: "root", trigger: .admin, reason: "test")
            _ = try await m.checkIn(users: ["root"])
            #expect(try await reg(m).state == .locked)
            #expect(try await reg(m).lockTrigger == .admin)
        }
    }

    @Test func blockedIsShownAndClearedByAContact() async throws {
        try await withManager { m, clock, fetcher, dir in
            _ = try await m.register(user: "root", directories: [dir + "/data/v"], by: root)
            clock.advance(seconds: day)
            fetcher.answer(.blocked("REG_BLOCKED"))
            _ = try await m.checkIn(users: ["root"])
            var info = try await reg(m)
            #expect(info.blocked && info.blockedCode == "REG_BLOCKED" && info.state == .active && info.offlineSeconds == day)
            fetcher.answer(.contact(ServerSettings()))
            _ = try await m.checkIn(users: ["root"])
            info = try await reg(m)
            #expect(!info.blocked && info.blockedCode == nil)
        }
    }

    @Test func badCredentialsAreRefusedBeforeAnythingIsStored() async throws {
        try await withManager { m, _, _, dir in
            await #expect(throws: ManagerError.self) {
                _ = try await m.register(user: "root", directories: [dir + "/data/v"], credentials: ServerCredentials(token: "a b\r\nX: y"), by: root)
            }
            let status = try await m.status(for: root, user: nil)
            #expect(status.registrations.isEmpty)
        }
    }
}
