import Foundation
import LockwipeCheckIn
import LockwipeCore
import LockwipeDaemon
import LockwipeSystemd
import LockwipeVaultIO
import LockwipeWipe
import Logging

/// One Manager in a throwaway directory (`directory/data` exists for vaults, the state
/// database is in `directory/state`), with a hand-moved clock and no logind, no hooks and
/// no policy server unless the test gives one. Used by every Manager unit test, so that a
/// change to the Manager's wiring is made here once.
public struct ManagerFixture: Sendable {
    public let manager: Manager
    public let clock: ManualClock
    public let directory: String
    /// The state store's fault hook: makes chosen store operations fail (`StoreFaults`).
    public let faults: StoreFaults
    /// Everything the Manager logged.
    public let logs: CapturedLogs

    /// root as the control socket sees it: uid 0, an administrator.
    public static let root = Caller(credentials: PeerCredentials(pid: 1, uid: 0, gid: 0), userName: "root", isAdmin: true)

    /// The accounts registration finds unless a test gives its own: no NSS lookup, so no
    /// test depends on the machine's user database.
    public static let accounts = TableAccounts([
        Account(name: "root", uid: 0, gid: 0), Account(name: "daemon", uid: 1, gid: 1),
    ])

    /// Runs `body` with a new Manager and removes everything afterwards (also when `body` throws).
    public static func run(
        _ configuration: Configuration = Configuration(), fetcher: (any SettingsFetching)? = nil,
        accounts: any AccountLookup = ManagerFixture.accounts, encryption: (any VaultProtecting)? = nil,
        observers: [any LockAndWipeEventObserving] = [],
        _ body: (ManagerFixture) async throws -> Void
    ) async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lockwipe-unit-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir + "/data", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let clock = ManualClock(ClockReading(wall: 1_800_000_000, boot: 100, bootID: "b"))
        let store = try StateStore(directory: dir + "/state")
        let logs = CapturedLogs()
        // The machine key as a plain file in the test's own directory: "auto" would run
        // systemd-creds with systemd's host key, /var/lib/systemd/credential.secret, which
        // no test may touch (the system tests seal with a host key of their own).
        var configuration = configuration
        configuration.keys = CredentialSealer(setting: .none)
        let manager = Manager(
            configuration: configuration, store: store, clock: clock, protection: PermissionLock(),
            eraser: SecureEraser(), observers: ObserverHub(observers), logger: logs.logger, notifier: .silent,
            paths: .init(configPath: dir + "/c.toml", stateDirectory: dir + "/state", socketPath: dir + "/sock", hooksDirectory: dir + "/hooks"),
            fetcher: fetcher, random: { 0.5 }, encryption: encryption ?? FscryptLock(), accounts: accounts)
        // What timers and background requests post runs as it does in the daemon's service.
        let events = Task { await manager.timerEvents.run() }
        do {
            try await body(ManagerFixture(manager: manager, clock: clock, directory: dir, faults: store.faults, logs: logs))
        } catch {
            await manager.stop()
            await events.value
            throw error
        }
        await manager.stop()
        await events.value
    }
}
