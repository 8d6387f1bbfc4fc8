import LockwipeCheckIn
import LockwipeCore
import LockwipeSystemd
import LockwipeVaultIO
import LockwipeWipe
import Logging
import NIOCore
import Synchronization

/// What a registration's operations work with: the store, the vault calls and locks, the
/// key material, the wipes, the observers, the clock, the policy-server client and the
/// configuration in force. Built once by the Manager and handed to every `Registration`
/// (homed's `Home` reaches its `Manager` for the same few things), so that an operation
/// of one registration needs nothing else of the Manager.
struct RegistrationContext: Sendable {
    let store: StateStore
    let clock: any ClockSource
    /// The permission lock (registrations with `protection: permissions`).
    let permissions: any VaultProtecting
    /// The fscrypt lock (registrations with `protection: encrypted`).
    let encryption: any VaultProtecting
    /// Vault key material: the machine key, new keys, opening and wrapping again (off the actor).
    let keys: VaultKeys
    /// The wipes running now (each erase on its own thread; the actor is free).
    let wipes: WipeCoordinator
    let observers: ObserverHub
    let logger: Logger
    let notifier: SystemdNotifier
    /// Every filesystem call on a vault: a thread of its own and a deadline
    /// (`VaultCalls`), so a vault that never answers stalls nobody else.
    let vaultCalls: VaultCalls
    /// The policy server client; nil in tests that need none.
    let fetcher: (any SettingsFetching)?
    /// The event loop of the daemon's timers.
    let timerLoop: any EventLoop
    /// What timers, watchers and background work ask for, run as structured tasks by the
    /// daemon's service.
    let timerEvents = TimerEvents()
    /// Whether offline codes are provisioned, as `status` shows it (`offlineCodesStatus()`).
    let knownOfflineCodes = KnownOfflineCodes()
    /// The background uploads of sealed outboxes running now.
    let outboxUploads = OutboxUploads()
    /// Observer notifications that must not hold up enforcement, awaited at shutdown.
    let background = BackgroundNotifications()
    /// Where the daemon keeps its state, hooks, socket and configuration.
    let paths: DaemonPaths
    private let settings: Settings

    init(
        configuration: Configuration, store: StateStore, clock: any ClockSource, permissions: any VaultProtecting,
        encryption: any VaultProtecting, keys: VaultKeys, wipes: WipeCoordinator, observers: ObserverHub, logger: Logger,
        notifier: SystemdNotifier, vaultCalls: VaultCalls, fetcher: (any SettingsFetching)?, timerLoop: any EventLoop,
        paths: DaemonPaths
    ) {
        self.paths = paths
        self.settings = Settings(configuration)
        self.store = store
        self.clock = clock
        self.permissions = permissions
        self.encryption = encryption
        self.keys = keys
        self.wipes = wipes
        self.observers = observers
        self.logger = logger
        self.notifier = notifier
        self.vaultCalls = vaultCalls
        self.fetcher = fetcher
        self.timerLoop = timerLoop
    }

    /// The configuration in force; a reload (SIGHUP) replaces it for every registration.
    var configuration: Configuration {
        get { settings.value.withLock { $0 } }
        nonmutating set { settings.value.withLock { $0 = newValue } }
    }

    /// The lock of `r`: the fscrypt lock for an encrypted vault, the permission lock otherwise.
    func lock(for r: RegistrationRecord) -> any VaultProtecting {
        r.protection == .encrypted ? encryption : permissions
    }

    /// The deadline of one filesystem call on a vault (`VaultCalls`); a lock adds the
    /// grace it gives processes to end.
    static let vaultCallTimeout: Duration = .seconds(10)

    private final class Settings: Sendable {
        let value: Mutex<Configuration>
        init(_ configuration: Configuration) { value = Mutex(configuration) }
    }
}
