import Foundation
import LockwipeCore
import LockwipeProtocol
import LockwipeSystemd
import LockwipeTestSupport
import Logging
import Synchronization
import Testing

@testable import LockwipeDaemon

@Suite(.serialized) struct ManagerSessionsTests {
    var root: Caller { ManagerFixture.root }

    /// A manager with `lock_timeout` set locally, lock on logout started with a fake
    /// logind and hand-moved timers; `daemon` (uid 1) exists on every Debian system.
    func withManager(
        lockTimeout: Int, server: Bool = false,
        _ body: (Manager, FakeSessions, ManualDeadlines, String, ScriptedFetcher) async throws -> Void
    ) async throws {
        var config = Configuration()
        config.passcode.lockTimeout = lockTimeout
        config.terminateProcesses = false
        if server { config.server = ServerConfiguration(url: "http://127.0.0.1:9", intervalSeconds: 100_000, timeoutSeconds: 1) }
        let fetcher = ScriptedFetcher()
        let sessions = FakeSessions()
        let timers = ManualDeadlines()
        try await ManagerFixture.run(config, fetcher: server ? fetcher : nil) { f in
            try await body(f.manager, sessions, timers, f.directory, fetcher)
        }
        #expect(sessions.stopped)
    }

    func state(_ m: Manager, _ user: String) async throws -> (RegistrationState, Trigger?) {
        let r = try #require(try await m.status(for: root, user: user).registrations.first)
        return (r.state, r.lockTrigger)
    }

    func lockReason(_ m: Manager, _ user: String) async throws -> String? {
        try await m.history(user: user, owner: nil, limit: 100).events.last { $0.kind == "lock" }?.detail
    }

    @Test func aVaultLocksLockTimeoutSecondsAfterTheLastSessionEnds() async throws {
        try await withManager(lockTimeout: 120) { m, sessions, timers, dir, _ in
            sessions.set(uid: 0, sessions: 1)
            _ = try await m.register(user: "root", directories: [dir + "/data/root"], by: root)
            await m.startLockOnLogout(watcher: sessions, timers: timers)
            #expect(sessions.started)
            #expect(timers.pending == 0, "no lock is pending while the user is logged in")

            #expect(try await m.status(for: root, user: "root").registrations.first?.logoutLockAt == nil)
            sessions.set(uid: 0, sessions: 0)
            await m.refreshLogoutLocks()
            #expect(timers.pending == 1)
            await timers.advance(seconds: 100)
            // status says when (the test's wall clock stands still at 1_800_000_000).
            #expect(try await m.status(for: root, user: "root").registrations.first?.logoutLockAt == "2027-01-15T08:00:20Z")
            await timers.advance(seconds: 19)
            #expect(try await state(m, "root") == (.active, nil))
            await timers.advance(seconds: 1)
            #expect(try await state(m, "root") == (.locked, .logout))
            #expect(try await lockReason(m, "root") == "last session ended 120 s ago (lock_timeout 120, local passcode policy)")
            var st = stat()
            #expect(stat(dir + "/data/root", &st) == 0 && st.st_mode & 0o7777 == 0, "the vault is really locked")
            #expect(timers.pending == 0, "a locked vault has nothing pending")
            #expect(try await m.status(for: root, user: "root").registrations.first?.logoutLockAt == nil)

            // Logging in again does not unlock it.
            sessions.set(uid: 0, sessions: 1)
            await m.refreshLogoutLocks()
            #expect(try await state(m, "root") == (.locked, .logout))
        }
    }

    @Test func aSessionThatComesBackCancelsThePendingLock() async throws {
        try await withManager(lockTimeout: 60) { m, sessions, timers, dir, _ in
            sessions.set(uid: 0, sessions: 2)
            _ = try await m.register(user: "root", directories: [dir + "/data/root"], by: root)
            await m.startLockOnLogout(watcher: sessions, timers: timers)
            sessions.set(uid: 0, sessions: 0)
            await m.refreshLogoutLocks()
            await timers.advance(seconds: 50)
            sessions.set(uid: 0, sessions: 1)
            await m.refreshLogoutLocks()
            #expect(timers.pending == 0)
            await timers.advance(seconds: 3600)
            #expect(try await state(m, "root") == (.active, nil))

            // The next logout starts a new full timeout.
            sessions.set(uid: 0, sessions: 0)
            await m.refreshLogoutLocks()
            await timers.advance(seconds: 59)
            #expect(try await state(m, "root") == (.active, nil))
            await timers.advance(seconds: 1)
            #expect(try await state(m, "root") == (.locked, .logout))
        }
    }

    /// The timer fires, but logind already has a new session the manager was not told
    /// of yet: logind's word wins.
    @Test func aTimerThatFiresWhileTheUserIsBackDoesNotLock() async throws {
        try await withManager(lockTimeout: 10) { m, sessions, timers, dir, _ in
            _ = try await m.register(user: "root", directories: [dir + "/data/root"], by: root)
            await m.startLockOnLogout(watcher: sessions, timers: timers)
            sessions.set(uid: 0, sessions: 1)  // no refreshLogoutLocks(): the notification is late
            await timers.advance(seconds: 10)
            #expect(try await state(m, "root") == (.active, nil))
            #expect(timers.pending == 0)
        }
    }

    @Test func usersAreTrackedSeparately() async throws {
        try await withManager(lockTimeout: 30) { m, sessions, timers, dir, _ in
            sessions.set(uid: 0, sessions: 1)
            sessions.set(uid: 1, sessions: 1)
            _ = try await m.register(user: "root", directories: [dir + "/data/root"], by: root)
            _ = try await m.register(user: "daemon", directories: [dir + "/data/daemon"], by: root)
            await m.startLockOnLogout(watcher: sessions, timers: timers)
            sessions.set(uid: 1, sessions: 0)
            await m.refreshLogoutLocks()
            await timers.advance(seconds: 20)
            sessions.set(uid: 0, sessions: 0)
            await m.refreshLogoutLocks()
            await timers.advance(seconds: 10)
            #expect(try await state(m, "daemon") == (.locked, .logout))
            #expect(try await state(m, "root") == (.active, nil))
            await timers.advance(seconds: 20)
            #expect(try await state(m, "root") == (.locked, .logout))
        }
    }

    /// At start-up nobody knows when a session-less user logged out: the timeout counts
    /// from the moment the daemon starts watching.
    @Test func aUserWithoutASessionAtStartUpLocksAfterTheTimeout() async throws {
        try await withManager(lockTimeout: 5) { m, sessions, timers, dir, _ in
            _ = try await m.register(user: "root", directories: [dir + "/data/root"], by: root)
            await m.startLockOnLogout(watcher: sessions, timers: timers)
            await timers.advance(seconds: 4)
            #expect(try await state(m, "root") == (.active, nil))
            await timers.advance(seconds: 1)
            #expect(try await state(m, "root") == (.locked, .logout))
            #expect(try await lockReason(m, "root") == "no login session for 5 s (lock_timeout 5, local passcode policy)")
        }
    }

    @Test func lockTimeoutZeroNeverLocks() async throws {
        try await withManager(lockTimeout: 0) { m, sessions, timers, dir, _ in
            _ = try await m.register(user: "root", directories: [dir + "/data/root"], by: root)
            await m.startLockOnLogout(watcher: sessions, timers: timers)
            sessions.set(uid: 0, sessions: 1)
            await m.refreshLogoutLocks()
            sessions.set(uid: 0, sessions: 0)
            await m.refreshLogoutLocks()
            #expect(timers.pending == 0)
            await timers.advance(seconds: 30 * 86_400)
            #expect(try await state(m, "root") == (.active, nil))
        }
    }

    /// An unlocked vault of a user who is not logged in is watched again from the unlock on.
    @Test func anUnlockStartsANewTimeout() async throws {
        try await withManager(lockTimeout: 5) { m, sessions, timers, dir, _ in
            _ = try await m.register(user: "root", directories: [dir + "/data/root"], by: root)
            await m.startLockOnLogout(watcher: sessions, timers: timers)
            await timers.advance(seconds: 5)
            #expect(try await state(m, "root") == (.locked, .logout))
            _ = try await m.unlock(user: "root", by: root)
            #expect(timers.pending == 1)
            await timers.advance(seconds: 4)
            #expect(try await state(m, "root") == (.active, nil))
            await timers.advance(seconds: 1)
            #expect(try await state(m, "root") == (.locked, .logout))
        }
    }

    /// The server's `passwordPolicyLockTimeout` replaces the local `lock_timeout`, both ways.
    @Test func theServersLockTimeoutOverridesTheLocalOne() async throws {
        try await withManager(lockTimeout: 0, server: true) { m, sessions, timers, dir, fetcher in
            sessions.set(uid: 0, sessions: 1)
            sessions.set(uid: 1, sessions: 1)
            _ = try await m.register(user: "root", directories: [dir + "/data/root"], by: root)
            _ = try await m.register(user: "daemon", directories: [dir + "/data/daemon"], by: root)
            await m.startLockOnLogout(watcher: sessions, timers: timers)
            var passcode = PasscodeSettings()
            passcode.lockTimeout = 30
            fetcher.answer(.contact(ServerSettings(passcode: passcode)))
            _ = try await m.checkIn(users: ["root"])

            sessions.set(uid: 0, sessions: 0)
            sessions.set(uid: 1, sessions: 0)
            await m.refreshLogoutLocks()
            #expect(timers.pending == 1, "only root's server policy has a lock timeout")
            await timers.advance(seconds: 30)
            #expect(try await state(m, "root") == (.locked, .logout))
            #expect(try await lockReason(m, "root") == "last session ended 30 s ago (lock_timeout 30, server passcode policy)")
            #expect(try await state(m, "daemon") == (.active, nil))
        }
    }

    @Test func withoutLogindStatusWarnsAndNothingLocks() async throws {
        try await withManager(lockTimeout: 5) { m, sessions, timers, dir, _ in
            _ = try await m.register(user: "root", directories: [dir + "/data/root"], by: root)
            await m.startLockOnLogout(watcher: nil, unavailableReason: "systemd-logind is not running", timers: timers)
            await timers.advance(seconds: 60)
            #expect(timers.pending == 0)
            #expect(try await state(m, "root") == (.active, nil))
            let warnings = try await m.status(for: root, user: nil).warnings
            #expect(warnings.contains("lock_timeout is set for root but lock on logout is disabled: systemd-logind is not running"))
            sessions.stop()  // the manager never started it; withManager expects it stopped
        }
    }
}
