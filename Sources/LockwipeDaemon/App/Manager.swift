import Foundation
import LockwipeBase
import LockwipeCheckIn
import LockwipeCore
import LockwipeMetrics
import LockwipeSystemd
import LockwipeVaultIO
import LockwipeWipe
import Logging
import NIOCore
import NIOPosix
import Synchronization

/// The daemon's state and decisions: registrations, the offline clock, and every lock,
/// unlock and wipe. The control socket and the scheduler only call in here.
///
/// Invariants:
/// - every state change is committed to the store before the filesystem is touched when
///   that is the safe order (lock records, wipe intent), and after it otherwise (unlock);
///   a crash at any point leaves a registration locked or wipe-pending, never open;
/// - operations on one registration run one at a time, in its turn (`Registration.withTurn`,
///   which hands them a `RegistrationTurn`); operations on different registrations may
///   interleave; registering takes the registry's turn (`Registry.turns`);
/// - observers are told before and after, and can never stop an action.
public actor Manager {
    public typealias Paths = DaemonPaths

    /// What every registration's operations work with (store, clock, locks, keys, wipes,
    /// observers, vault calls, the server client, the configuration in force).
    let context: RegistrationContext
    /// Where registration looks users up (NSS; a table in unit tests).
    let accounts: any AccountLookup
    /// Who is an administrator (`[daemon] admin_group`), replaced at a reload; behind a
    /// lock of its own so that finding out who calls does not wait for the actor.
    private let authorizer: Mutex<Authorizer>
    /// Uniform in [0, 1): the jitter of the check-in backoff (injected by tests).
    let random: @Sendable () -> Double
    /// When each registration checks in next, the requests in flight, the check-in timer.
    let checkIns: CheckInScheduler

    /// The registry: the registrations operations were handed to, by registration id,
    /// each owning its turn (`Registration`), and the registry's own turn (registering).
    let registry = Registry()
    /// The one pending wake-up at the next threshold crossing (CLOCK_BOOTTIME, so suspended
    /// time counts), which also wakes when the wall clock is set or the machine resumes.
    let alarm: WakeAlarm
    /// What timers and watchers ask for, run as structured tasks by the daemon's service.
    public nonisolated var timerEvents: TimerEvents { context.timerEvents }
    var stopped = false
    /// The problems of the last SIGHUP reload when it was rejected (the previous
    /// configuration kept); `status` warns until a reload succeeds.
    var rejectedReload: [String] = []
    /// Lock on logout (Sessions/Manager+Sessions.swift).
    var logout = LogoutLocks()
    /// The metrics file (`[metrics] textfile`), rewritten after every store write.
    let metrics: MetricsPublisher

    public init(
        configuration: Configuration, store: StateStore, clock: any ClockSource, protection: any VaultProtecting,
        eraser: any VaultErasing, observers: ObserverHub, logger: Logger, notifier: SystemdNotifier, paths: Paths,
        fetcher: (any SettingsFetching)? = nil, random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
        encryption: any VaultProtecting = FscryptLock(), accounts: any AccountLookup = SystemAccounts()
    ) {
        self.accounts = accounts
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let checkIns = CheckInScheduler(sleep: CheckInScheduler.sleeping(on: loop))
        self.checkIns = checkIns
        let alarm = WakeAlarm()
        self.alarm = alarm
        self.random = random
        self.authorizer = Mutex(Authorizer(adminGroup: configuration.adminGroup))
        let metrics = MetricsPublisher(path: configuration.metricsTextfile, options: configuration.metrics, logger: logger)
        self.metrics = metrics
        // A vault that answers again gets what waited for it (`vaultAnswersAgain`), bound
        // below once the Manager exists.
        let answersAgain = CallbackSlot<VaultOwner>()
        let vaultCalls = VaultCalls(timeout: RegistrationContext.vaultCallTimeout) { [logger] owner, what in
            logger.notice(
                "the vault of \(owner.user) answers again (\(what) returned at last)",
                metadata: ["user": .string(owner.user), "message_id": MessageID.vaultUnresponsive.metadata])
            answersAgain.call(owner)
        }
        self.context = RegistrationContext(
            configuration: configuration, store: store, clock: clock, permissions: protection, encryption: encryption,
            keys: VaultKeys(stateDirectory: paths.stateDirectory, sealer: Self.sealer(configuration), recoveryKey: configuration.recoveryPublicKey),
            wipes: WipeCoordinator(eraser: eraser), observers: observers,
            logger: logger, notifier: notifier, vaultCalls: vaultCalls, fetcher: fetcher, timerLoop: loop, paths: paths)
        store.onUnreadable { [logger] what in
            logger.error("\(what)", metadata: ["message_id": MessageID.stateUnavailable.metadata, "path": .string(store.path)])
        }
        store.onDamage { [logger] damage in
            logger.critical(
                "\(damage)",
                metadata: [
                    "message_id": MessageID.stateDamaged.metadata, "path": .string(store.path),
                ])
        }
        checkIns.onDue = { [weak self] in await self?.runDueCheckIns() }
        answersAgain.set { [weak self, timerEvents = context.timerEvents] owner in
            guard let self else { return }
            timerEvents.post { await self.vaultAnswersAgain(owner) }
        }
        alarm.onWake = { [weak self, timerEvents = context.timerEvents] reason in
            guard let self else { return }
            timerEvents.post { await self.woke(reason) }
        }
        metrics.attach(
            post: { [timerEvents = context.timerEvents] in timerEvents.post($0) },
            snapshot: { [weak self] in
                guard let self else { throw CancellationError() }
                return try await self.metricsSnapshot()
            })
        store.onWrite { [metrics] in metrics.changed() }
    }

    public var currentConfiguration: Configuration { context.configuration }

    /// `[keys]`, and the `systemd-creds` named by `LOCKWIPE_SYSTEMD_CREDS` when lockwiped's
    /// environment has one (the system tests' stand-in for the kernel's TPM resource manager).
    private static func sealer(_ configuration: Configuration) -> CredentialSealer {
        var sealer = configuration.keys
        if let executable = ProcessInfo.processInfo.environment["LOCKWIPE_SYSTEMD_CREDS"], executable.hasPrefix("/") { sealer.executable = executable }
        return sealer
    }

    // MARK: Life cycle

    /// The start-up enforcement pass, run before `READY=1`: each registration in its turn
    /// resumes an interrupted wipe, checks its vaults, re-applies its lock (a crash between
    /// commit and chmod must still end locked) and opens its encrypted vault again; then the
    /// policy is enforced for the time the daemon was not running.
    public func startUp() async {
        if !authorizer.withLock({ $0 }).adminGroupExists {
            context.logger.warning(
                "the admin group does not exist; only root is an administrator",
                metadata: ["admin_group": .string(context.configuration.adminGroup)])
        }
        await openMachineKey()
        if context.store.damage == nil {
            // A crash between writing a key file and committing it, or between committing
            // a new one and destroying the old one, leaves an orphan: destroy it now.
            do {
                let destroyed = try await context.store.destroyOrphanKeyFiles()
                if !destroyed.isEmpty {
                    context.logger.notice(
                        "destroyed \(destroyed.count) wrapped key file(s) no registration uses (left by an interrupted passcode change, registration or wipe)",
                        metadata: ["files": .string(destroyed.joined(separator: " "))])
                }
            } catch {
                context.logger.error(
                    "cannot destroy the wrapped key files no registration uses: \(error)",
                    metadata: ["message_id": MessageID.actionFailed.metadata])
            }
            // What the history keeps (HistoryRetention; appending prunes only the
            // registration it records for).
            do {
                let pruned = try await context.store.pruneHistory(now: context.clock.now().wall)
                if pruned > 0 {
                    context.logger.notice("pruned \(pruned) history context.event(s) past what a registration keeps (docs/security.md, History a user cannot weaponise)")
                }
            } catch {
                context.logger.error("cannot prune the history: \(error)", metadata: ["message_id": MessageID.actionFailed.metadata])
            }
        }
        do {
            // Each registration's part in its turn (`Registration.startUp`).
            let pending = try await context.store.pendingWipes()
            for r in try await context.store.registrations() {
                await inTurn(of: registration(id: r.id, user: r.user), "the start-up pass") { turn in
                    await turn.registration.startUp(in: turn, pendingWipe: pending.first { $0.registrationID == r.id })
                }
            }
        } catch {
            context.logger.critical("cannot read the state database", metadata: ["error": .string("\(error)"), "path": .string(context.store.path)])
        }
        await forgetStaleRejections()
        await evaluate()
        checkIns.startPlanning()
        await scheduleCheckInsForAll(now: false)
    }

    /// Opens (or makes, or seals) the machine key before the pass, which reopens the vaults
    /// it wraps, and says in the journal how it is kept; a key that does not open is said
    /// with its MESSAGE_ID, and the pass keeps what needs it locked.
    private func openMachineKey() async {
        let state = await context.keys.machineKeyState()
        let sealer = context.keys.sealer
        switch state {
        case .ready(_, let sealing, let migrated, let created, let sealFailure):
            let how = Self.words(sealing, sealer)
            var meta: Logger.Metadata = ["sealing": .string(sealing.rawValue)]
            if let sealFailure {
                meta["message_id"] = MessageID.actionFailed.metadata
                context.logger.error(
                    "the plain machine key of an older version could not be sealed (\(sealFailure)): it stays a plain file and is used as it is; a copy of the disk opens every vault it wraps",
                    metadata: meta)
            } else if migrated || (created && sealing != .plain) {
                meta["message_id"] = MessageID.keySealed.metadata
                let what = migrated ? "sealed the machine key of an older version (\(how)) and destroyed its plain file" : "made the machine key, \(how)"
                context.logger.notice("\(what)", metadata: meta)
            } else if sealing == .plain {
                let why = sealer.setting == .none ? "[keys] seal = \"none\"" : "\(sealer.executable) is missing"
                context.logger.warning("the machine key is a plain file (\(why)): a copy of the disk opens every vault it wraps", metadata: meta)
            } else {
                context.logger.info("the machine key is \(how)", metadata: meta)
            }
            if sealing == .tpm2, context.keys.recoveryKey == nil {
                context.logger.warning("\(Self.noRecoveryKey)", metadata: ["sealing": .string(sealing.rawValue)])
            }
        case .unavailable(let reason, let sealing):
            context.logger.critical(
                "the machine key cannot be opened: \(reason); every encrypted vault it wraps stays locked and nothing is destroyed",
                metadata: [
                    "message_id": MessageID.keyUnavailable.metadata, "reason": .string(reason), "sealing": .string(sealing?.rawValue ?? "unknown"),
                ])
        }
    }

    /// Why a TPM2-sealed machine key wants an organisation recovery key: the journal's and
    /// status' words.
    static let noRecoveryKey =
        "no organisation recovery key is configured ([keys] recovery_public_key): a cleared TPM2, a new board or a firmware update that changes the sealed PCRs leaves every encrypted vault locked for good"

    /// How the machine key is kept, in words.
    static func words(_ sealing: KeySealing, _ sealer: CredentialSealer) -> String {
        switch sealing {
        case .tpm2: return "sealed to this machine's TPM2" + (sealer.tpm2PCRs.isEmpty ? "" : " (PCRs \(sealer.tpm2PCRs))") + " and the host key"
        case .host: return "sealed with the host key only (no TPM2)"
        case .plain: return "a plain file"
        }
    }

    /// Forgets the rejections of a server that is no longer the one configured (another
    /// URL, or none): status and the metrics stop saying "rejected by the policy server"
    /// for an answer nobody will give again.
    private func forgetStaleRejections() async {
        let url = context.configuration.server.isConfigured ? context.configuration.server.url : nil
        do {
            let users = try await context.store.forgetRejections(unlessFrom: url)
            if !users.isEmpty {
                let why = url == nil ? "no policy server is configured now" : "it came from a server that is no longer the one configured"
                context.logger.notice(
                    "forgot the policy server's rejection of \(TextFormat.count(users.count, "registration", "registrations")) (\(users.joined(separator: ", "))): \(why)",
                    metadata: ["users": .string(users.joined(separator: " "))])
            }
        } catch {
            context.logger.error(
                "cannot forget the rejections of a policy server no longer configured (status may still show them): \(ErrorWords.of(error))",
                metadata: ["message_id": MessageID.actionFailed.metadata])
        }
    }

    /// Applies a new configuration (SIGHUP) and re-evaluates every registration under it.
    /// A SIGHUP reload found `problems` and kept the configuration in force.
    public func reloadRejected(_ problems: [String]) {
        rejectedReload = problems
    }

    public func reload(_ new: Configuration) async {
        rejectedReload = []
        let serverChanged = context.configuration.server != new.server
        context.configuration = new
        authorizer.withLock { $0 = Authorizer(adminGroup: new.adminGroup) }
        metrics.setPath(new.metricsTextfile, options: new.metrics)
        metrics.changed()
        if serverChanged { await forgetStaleRejections() }
        await evaluate()
        if serverChanged {
            checkIns.clear()
            await scheduleCheckInsForAll(now: true)
        }
    }

    /// Waits for the observer notifications still running (after `stop`).
    public func drainObservers() async {
        await context.background.drain()
    }

    /// Stops every running wipe at its next entry, and every later one before it starts:
    /// each stays pending and resumes at the next start. First at shutdown, so that the
    /// requests waiting for a wipe are answered (with the report that says so) while the
    /// control socket drains.
    public nonisolated func stopWipes() {
        context.wipes.cancelAll()
    }

    public func stop() {
        stopped = true
        stopWipes()
        alarm.stop()
        checkIns.stop()
        logout.stop()
        timerEvents.finish()
    }

    // MARK: Requests

    /// Who is calling: user name and group membership are NSS lookups (files, userdb,
    /// maybe the network), so they run on the thread pool, never on the actor. Should
    /// the pool be gone (shutdown), the caller is no administrator (fail closed).
    public nonisolated func caller(_ credentials: PeerCredentials) async -> Caller {
        let authorizer = self.authorizer.withLock { $0 }
        do {
            return try await BlockingPool.run { authorizer.caller(credentials) }
        } catch {
            return Caller(credentials: credentials, userName: nil, isAdmin: false)
        }
    }

}
