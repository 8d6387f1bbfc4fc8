import Foundation
import LockwipeCore
import LockwipeProtocol
import LockwipeTestSupport
import Testing

@testable import LockwipeDaemon

/// What the Manager does when its state cannot be read or written (a fault-injecting store,
/// `ManagerFixture.faults`): each failure is one of three decisions (docs/architecture.md,
/// "When the state cannot be read or written") and never reads as "nothing there" or as done.
@Suite struct StoreFaultTests {
    let day: Int64 = 86_400
    var root: Caller { ManagerFixture.root }
    static let stateUnavailable = MessageID.stateUnavailable.rawValue

    func run(_ body: (ManagerFixture) async throws -> Void) async throws {
        var config = Configuration()
        config.policy = Policy(offlineDaysBeforeLock: 7, offlineDaysBeforeWipe: 0)
        try await ManagerFixture.run(config, body)
    }

    func withServer(_ body: (ManagerFixture, ScriptedFetcher) async throws -> Void) async throws {
        var config = Configuration()
        config.policy = Policy(offlineDaysBeforeLock: 7, offlineDaysBeforeWipe: 0)
        config.server = ServerConfiguration(url: "http://127.0.0.1:9", intervalSeconds: 100_000, timeoutSeconds: 1)
        let fetcher = ScriptedFetcher()
        try await ManagerFixture.run(config, fetcher: fetcher) { f in try await body(f, fetcher) }
    }

    func state(_ f: ManagerFixture) async throws -> RegistrationInfo {
        try #require(try await f.manager.status(for: root, user: "root").registrations.first)
    }

    /// The journal entries about the state store for `user`.
    func stateEntries(_ f: ManagerFixture, user: String = "root") -> [CapturedLogs.Entry] {
        f.logs.with(messageID: Self.stateUnavailable).filter { $0.metadata["user"] == .string(user) }
    }

    // MARK: Fail the request

    @Test func statusAndPolicyFailWhenTheRegistrationsCannotBeReadInsteadOfShowingNone() async throws {
        try await run { f in
            _ = try await f.manager.register(user: "root", directories: [f.directory + "/data/v"], by: root)
            f.faults.failNext(.max, of: "registrations")
            await #expect(throws: StoreFaults.Injected.self) { try await f.manager.status(for: root, user: nil) }
            await #expect(throws: StoreFaults.Injected.self) { try await f.manager.policyInfo() }
            #expect(await f.manager.statusLine().contains("the state database cannot be read"))
            f.faults.reset()
            #expect(try await f.manager.status(for: root, user: nil).registrations.count == 1)
        }
    }

    @Test func anUnregisterThatCannotReadWhatItReleasesFailsAndKeepsTheRegistration() async throws {
        try await run { f in
            _ = try await f.manager.register(user: "root", directories: [f.directory + "/data/v"], by: root)
            f.faults.failNext(1, of: "credentials")
            let error = await #expect(throws: ManagerError.self) { try await f.manager.unregister(user: "root", by: root) }
            #expect(error?.message.contains("unregister of root failed, nothing was changed: the state database cannot be read or written") == true)
            #expect(try await state(f).state == .active)
            #expect(!stateEntries(f).isEmpty)
        }
    }

    @Test func aCheckInThatCannotReadItsCredentialsFailsAndSendsNothing() async throws {
        try await withServer { f, fetcher in
            _ = try await f.manager.register(user: "root", directories: [f.directory + "/data/v"], credentials: ServerCredentials(token: "s"), by: root)
            fetcher.answer(.contact(ServerSettings()))
            let before = fetcher.calls.count
            f.faults.failNext(1, of: "credentials")
            let result = try #require(try await f.manager.checkIn(users: ["root"]).first)
            #expect(result.failed == true)
            #expect(result.reason.contains("the state database cannot be read or written"))
            #expect(fetcher.calls.count == before, "a check-in was sent without its credentials")
        }
    }

    // MARK: Fail closed

    /// The write that records a failed lock fails: the registration reads lock-failed (not
    /// locked) until a write succeeds, and the journal says so.
    @Test func aFailedLockWhoseRecordCannotBeWrittenNeverReadsLocked() async throws {
        try await run { f in
            let vault = f.directory + "/data/v"
            _ = try await f.manager.register(user: "root", directories: [vault], by: root)
            #expect(rename(vault, vault + ".away") == 0)
            f.faults.failNext(1, of: "setVaultError")
            await #expect(throws: ManagerError.self) { try await f.manager.lock(user: "root", trigger: .admin, reason: "test") }
            let info = try await state(f)
            #expect(info.state == .lockFailed, "a lock that failed reads \(info.state)")
            #expect(stateEntries(f).contains { $0.message.contains("FAILED and this could not be recorded") })
            // Asked again, the lock is retried, not "already locked".
            await #expect(throws: ManagerError.self) { try await f.manager.lock(user: "root", trigger: .admin, reason: "again") }
            #expect(try await state(f).state == .lockFailed)
        }
    }

    /// A retried lock whose owner-and-mode records cannot be written is not applied (unlock
    /// could not restore the vault): it stays lock-failed, with the reason, until the next
    /// evaluation records and applies it.
    @Test func aRetriedLockWhoseRecordsCannotBeWrittenIsNotApplied() async throws {
        try await run { f in
            let vault = f.directory + "/data/v"
            _ = try await f.manager.register(user: "root", directories: [vault], by: root)
            #expect(rename(vault, vault + ".away") == 0)
            await #expect(throws: ManagerError.self) { try await f.manager.lock(user: "root", trigger: .admin, reason: "test") }
            #expect(rename(vault + ".away", vault) == 0)
            var st = stat()
            #expect(stat(vault, &st) == 0)
            let mode = st.st_mode & 0o7777
            f.faults.failNext(1, of: "commitLock")
            await f.manager.evaluate()
            let info = try await state(f)
            #expect(info.state == .lockFailed)
            #expect(info.vaultError?.contains("injected") == true, "the reason is not shown: \(String(describing: info.vaultError))")
            #expect(stat(vault, &st) == 0 && st.st_mode & 0o7777 == mode, "the lock was applied without its records")
            await f.manager.evaluate()
            #expect(try await state(f).state == .locked)
            #expect(stat(vault, &st) == 0 && st.st_mode & 0o7777 == 0)
        }
    }

    /// An offline lock that is due while the registrations cannot be read is not carried
    /// out blind, is logged, and is carried out at the next evaluation.
    @Test func anOfflineLockDueWhileTheStateCannotBeReadIsRetried() async throws {
        try await run { f in
            let vault = f.directory + "/data/v"
            _ = try await f.manager.register(user: "root", directories: [vault], by: root)
            f.clock.advance(seconds: 8 * day)
            f.faults.failNext(.max, of: "registrations")
            await f.manager.evaluate()
            #expect(stateEntries(f).contains { $0.message.contains("retried at the next evaluation") })
            f.faults.reset()
            #expect(try await state(f).state == .active)
            await f.manager.evaluate()
            #expect(try await state(f).state == .locked)
        }
    }

    /// A refresh of the locks on logout that cannot read the registrations keeps the timer
    /// that is running: the lock still comes when it is due.
    @Test func aLogoutLockIsNotDroppedWhenTheRegistrationsCannotBeRead() async throws {
        var config = Configuration()
        config.passcode.lockTimeout = 120
        config.terminateProcesses = false
        try await ManagerFixture.run(config) { f in
            let (sessions, timers) = (FakeSessions(), ManualDeadlines())
            sessions.set(uid: 0, sessions: 1)
            _ = try await f.manager.register(user: "root", directories: [f.directory + "/data/v"], by: root)
            await f.manager.startLockOnLogout(watcher: sessions, timers: timers)
            sessions.set(uid: 0, sessions: 0)
            await f.manager.refreshLogoutLocks()
            #expect(timers.pending == 1)
            f.faults.failNext(1, of: "registrations")
            await f.manager.refreshLogoutLocks()
            #expect(timers.pending == 1, "the lock on logout was dropped")
            #expect(f.logs.with(messageID: Self.stateUnavailable).contains { $0.message.contains("the locks on logout are not refreshed") })
            await timers.advance(seconds: 120)
            #expect(try await state(f).state == .locked)
        }
    }

    // MARK: Log and carry on

    @Test func aFailedCheckInThatCannotBeRecordedIsLoggedAndReported() async throws {
        try await withServer { f, fetcher in
            _ = try await f.manager.register(user: "root", directories: [f.directory + "/data/v"], credentials: ServerCredentials(token: "s"), by: root)
            fetcher.answer(.failure("timeout"))
            f.faults.failNext(1, of: "recordFailedAttempt")
            let result = try #require(try await f.manager.checkIn(users: ["root"]).first)
            #expect(result.failed == true)
            #expect(stateEntries(f).contains { $0.message.contains("the failed check-in of root is not recorded") })
            #expect(try await state(f).state == .active)
        }
    }

    // MARK: Wrong state

    @Test func anUnlockOfARegistrationThatIsNotLockedIsAWrongState() async throws {
        try await run { f in
            _ = try await f.manager.register(user: "root", directories: [f.directory + "/data/v"], by: root)
            let error = await #expect(throws: ManagerError.self) { try await f.manager.unlock(user: "root", by: root) }
            guard case .wrongState(let user, let current, let reason) = error else {
                Issue.record("not wrongState: \(String(describing: error))")
                return
            }
            #expect(user == "root" && current == .active)
            #expect(reason.hasPrefix("root is not locked (state: active)"))
        }
    }

    @Test func aLockOfAWipedRegistrationIsAWrongState() async throws {
        try await run { f in
            _ = try await f.manager.register(user: "root", directories: [f.directory + "/data/v"], by: root)
            _ = try await f.manager.wipe(user: "root", trigger: .admin, reason: "test")
            let error = await #expect(throws: ManagerError.self) { try await f.manager.lock(user: "root", trigger: .admin, reason: "test") }
            guard case .wrongState(let user, let current, let reason) = error else {
                Issue.record("not wrongState: \(String(describing: error))")
                return
            }
            #expect(user == "root" && current == .wiped)
            #expect(reason.hasPrefix("root cannot be locked: the registration is wiped"))
        }
    }
}
