import Foundation
import LockwipeCore
import LockwipeProtocol
import LockwipeSystemd
import Logging
import NIOCore
import NIOPosix

/// The daemon's state and decisions: registrations, the offline clock, and every lock,
/// unlock and wipe. The control socket and the scheduler only call in here.
///
/// Invariants:
/// - every state change is committed to the store before the filesystem is touched when
///   that is the safe order (lock records, wipe intent), and after it otherwise (unlock);
///   a crash at any point leaves a registration locked or wipe-pending, never open;
/// - actions on one user are serialized; actions on different users may interleave;
/// - observers are told before and after, and can never stop an action.
public actor Manager {
    public struct Paths: Sendable {
        public var stateDirectory: String
        public var socketPath: String
        public var hooksDirectory: String
        public var configPath: String
    }

    var configuration: Configuration
    let store: StateStore
    let clock: any ClockSource
    /// The permission lock (registrations with `protection: permissions`).
    let protection: any VaultProtecting
    /// The fscrypt lock (registrations with `protection: encrypted`).
    let encryption: any VaultProtecting
    /// Vault key material: the machine key, new keys, opening and wrapping again (off the actor).
    let keys: VaultKeys
    let eraser: any VaultErasing
    let observers: ObserverHub
    let logger: Logger
    let notifier: SystemdNotifier
    /// Where registration looks users up (NSS; a table in unit tests).
    let accounts: any AccountLookup
    let paths: Paths
    private var authorizer: Authorizer
    /// The policy server client; nil in tests that need none.
    let fetcher: (any SettingsFetching)?
    /// Uniform in [0, 1): the jitter of the check-in backoff (injected by tests).
    let random: @Sendable () -> Double
    /// When each registration checks in next (monotonic); absent while one is in flight.
    var nextCheckIn: [String: NIODeadline] = [:]
    var checkInsInFlight: [String: Int] = [:]
    /// The requests of each registration (by id) waiting for the server, to cancel at unregister.
    var fetchesInFlight: [String: [UInt64: Task<CheckInOutcome, Never>]] = [:]
    var nextFetchToken: UInt64 = 0
    /// The one pending wake-up for the soonest due check-in (an event-loop timer; after a
    /// resume or a clock set the wake-up timer reschedules every check-in at once).
    var checkInTimer: Scheduled<Void>?
    /// Check-ins are scheduled from the start-up pass on (before it, and in tests that do not
    /// run it, only explicit check-ins happen).
    var checkInScheduling = false

    /// Wipes running now, for `status` (the wipe runs on its own thread; the actor is free).
    var runningWipes: [String: WipeProgress] = [:]
    private var busyUsers: Set<String> = []
    private var waiters: [String: [CheckedContinuation<Void, Never>]] = [:]
    /// The one pending wake-up at the next threshold crossing (CLOCK_BOOTTIME, so suspended
    /// time counts), which also wakes when the wall clock is set or the machine resumes.
    /// Created at the first schedule.
    var wakeTimer: WakeTimer?
    let timerLoop: any EventLoop = MultiThreadedEventLoopGroup.singleton.next()
    /// What timers and watchers ask for, run as structured tasks by the daemon's service.
    public let timerEvents = TimerEvents()
    var stopped = false
    /// Lock on logout (ManagerSessions.swift).
    var logout = LogoutLocks()

    public init(
        configuration: Configuration, store: StateStore, clock: any ClockSource, protection: any VaultProtecting,
        eraser: any VaultErasing, observers: ObserverHub, logger: Logger, notifier: SystemdNotifier, paths: Paths,
        fetcher: (any SettingsFetching)? = nil, random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
        encryption: any VaultProtecting = FscryptLock(), accounts: any AccountLookup = SystemAccounts()
    ) {
        self.accounts = accounts
        self.encryption = encryption
        self.keys = VaultKeys(stateDirectory: paths.stateDirectory)
        self.fetcher = fetcher
        self.random = random
        self.configuration = configuration
        self.store = store
        self.clock = clock
        self.protection = protection
        self.eraser = eraser
        self.observers = observers
        self.logger = logger
        self.notifier = notifier
        self.paths = paths
        self.authorizer = Authorizer(adminGroup: configuration.adminGroup)
        store.onDamage { [logger] damage in
            logger.critical("\(damage)", metadata: [
                "message_id": MessageID.stateDamaged.metadata, "path": .string(store.path),
            ])
        }
    }

    public var currentConfiguration: Configuration { configuration }

    // MARK: Life cycle

    /// The start-up enforcement pass, run before `READY=1`: resume interrupted wipes,
    /// re-apply every lock (a crash between commit and chmod must still end locked),
    /// then enforce the policy for the time the daemon was not running.
    public func startUp() async {
        if !authorizer.adminGroupExists {
            logger.warning("the admin group does not exist; only root is an administrator",
                           metadata: ["admin_group": .string(configuration.adminGroup)])
        }
        if store.damage == nil {
            // A crash between writing a key file and committing it, or between committing
            // a new one and destroying the old one, leaves an orphan: destroy it now.
            do {
                let destroyed = try store.destroyOrphanKeyFiles()
                if !destroyed.isEmpty {
                    logger.notice("destroyed \(destroyed.count) wrapped key file(s) no registration uses (left by an interrupted passcode change, registration or wipe)",
                                  metadata: ["files": .string(destroyed.joined(separator: " "))])
                }
            } catch {
                logger.error("cannot destroy the wrapped key files no registration uses: \(error)",
                             metadata: ["message_id": MessageID.actionFailed.metadata])
            }
        }
        do {
            for pending in try store.pendingWipes() {
                await withUser(pending.user) {
                    _ = await self.performWipe(user: pending.user, reason: pending.reason, trigger: pending.trigger, resumed: true)
                }
            }
            await checkVaults()
            for r in try store.registrations() where r.state.isLockCommitted {
                await retryLock(r)
            }
            await reopenEncryptedVaults()
        } catch {
            logger.critical("cannot read the state database", metadata: ["error": .string("\(error)"), "path": .string(store.path)])
        }
        await evaluate()
        checkInScheduling = true
        scheduleCheckInsForAll(now: false)
    }

    /// Applies a new configuration (SIGHUP) and re-evaluates every registration under it.
    public func reload(_ new: Configuration) async {
        let serverChanged = configuration.server != new.server
        configuration = new
        authorizer = Authorizer(adminGroup: new.adminGroup)
        await evaluate()
        if serverChanged {
            nextCheckIn = [:]
            scheduleCheckInsForAll(now: true)
        }
    }

    public func stop() {
        stopped = true
        for progress in runningWipes.values { progress.cancel() }
        wakeTimer?.stop()
        wakeTimer = nil
        checkInTimer?.cancel()
        checkInTimer = nil
        nextCheckIn = [:]
        stopLockOnLogout()
        timerEvents.finish()
    }

    // MARK: Policy evaluation and scheduling

    /// Moves every offline clock to now, carries out what is due, and sleeps until the next
    /// threshold crossing (no polling).
    ///
    /// Before an offline-triggered action, each registration it concerns makes one check-in
    /// attempt: a machine that is in fact online is not punished. All of them share one
    /// deadline, `[server] timeout` from now (waiting for a free request slot included), so
    /// a slow or stalling server delays enforcement, and start-up, by that much at most.
    /// What is due is then decided again, per user, under that user's turn.
    public func evaluate() async {
        for r in (try? store.registrations()) ?? [] where r.state == .lockFailed {
            await withUser(r.user) {
                guard let current = try? self.store.registration(r.user), current.state == .lockFailed else { return }
                await self.retryLock(current)
            }
        }
        var due = checkpointClocks()
        if !due.isEmpty, configuration.server.isConfigured, fetcher != nil {
            let users = Set(due.map(\.0))
            let deadline = NIODeadline.now() + .seconds(Int64(configuration.server.timeoutSeconds))
            await withTaskGroup(of: Void.self) { group in
                for user in users {
                    group.addTask { _ = await self.checkIn(user: user, purpose: .beforeAction, deadline: deadline) }
                }
            }
            due = checkpointClocks()
        }
        for (user, action, _) in due {
            await withUser(user) {
                // Decided again now: a check-in may have answered while this waited its turn.
                guard let (current, reason) = self.dueNow(user), current == action else { return }
                switch action {
                case .lock: _ = try? await self.lockLocked(user: user, trigger: .offline, reason: reason)
                case .wipe: _ = try? await self.wipeLocked(user: user, trigger: .offline, reason: reason)
                }
            }
        }
        reschedule()
    }

    /// The policy in force for `r`: the server's once it sent a valid one (while a server
    /// is configured), the local one otherwise.
    func policy(for r: RegistrationRecord) -> (policy: Policy, source: String) {
        if configuration.server.isConfigured, let p = r.server.policy { return (p, "server") }
        return (configuration.policy, "local")
    }

    /// The passcode policy in force for `r`: the local `[passcode]` table with every rule
    /// the server sent in its place (while a server is configured).
    func passcodePolicy(for r: RegistrationRecord) -> (policy: PasscodePolicy, source: String) {
        let server = configuration.server.isConfigured ? r.server.settings?.passcode : nil
        let p = configuration.passcode.overridden(by: server)
        return (p, p == configuration.passcode ? "local" : "server")
    }

    /// The action due for `user` right now, if any, with its reason.
    func dueNow(_ user: String) -> (Action, String)? {
        guard let r = try? store.registration(user), !r.state.isWipeCommitted else { return nil }
        let offline = offlineNow(r, clock.now())
        let (p, source) = policy(for: r)
        guard let action = PolicyEvaluator.evaluate(policy: p, state: r.state, offlineSeconds: offline).due else { return nil }
        return (action, reason(action, offline: offline, policy: p, source: source))
    }

    func reason(_ action: Action, offline: Int64, policy p: Policy, source: String) -> String {
        let days = action == .lock ? p.offlineDaysBeforeLock : p.offlineDaysBeforeWipe
        return "offline for \(RelativeTime.format(seconds: offline)) (\(source) policy: \(Policy.threshold(action, days: days)))"
    }

    /// Checkpoints clocks (persisted) and returns the actions now due.
    func checkpointClocks() -> [(String, Action, String)] {
        let reading = clock.now()
        let registrations: [RegistrationRecord]
        do {
            registrations = try store.registrations()
        } catch {
            logger.critical("cannot read registrations; nothing is enforced until this is fixed",
                            metadata: ["error": .string("\(error)"), "path": .string(store.path)])
            return []
        }
        var clocks: [(user: String, clock: OfflineClock)] = []
        var due: [(String, Action, String)] = []
        for r in registrations where !r.state.isWipeCommitted {
            let advance = r.clock.advanced(to: reading)
            if let back = advance.rollbackSeconds {
                logger.warning("clock rollback of \(RelativeTime.format(seconds: back)) detected; offline time keeps counting",
                               metadata: ["user": .string(r.user), "message_id": MessageID.clockRollback.metadata,
                                          "rollback_seconds": "\(back)", "offline_seconds": "\(advance.clock.offlineSeconds)"])
                try? store.append(event(r.user, .clockRollback, nil, "wall clock set back by \(back) s; offline time kept at \(advance.clock.offlineSeconds) s", at: reading.wall))
            }
            clocks.append((r.user, advance.clock))
            let (p, source) = policy(for: r)
            let evaluation = PolicyEvaluator.evaluate(policy: p, state: r.state, offlineSeconds: advance.clock.offlineSeconds)
            if let action = evaluation.due {
                due.append((r.user, action, reason(action, offline: advance.clock.offlineSeconds, policy: p, source: source)))
            }
        }
        do {
            try store.saveClocks(clocks)
        } catch {
            logger.error("cannot persist offline clocks", metadata: ["error": .string("\(error)")])
        }
        return due
    }

    func reschedule() {
        if let damage = store.damage {
            wakeTimer?.schedule(in: nil)
            notifier.status("DEGRADED, nothing is enforced: \(damage)")
            return
        }
        refreshLogoutLocks()
        let entries = summaryEntries()
        notifier.status(StatusSummary.line(entries))
        guard !stopped else { return }
        if wakeTimer == nil {
            do {
                wakeTimer = try WakeTimer { [weak self, timerEvents] reason in
                    guard let self else { return }
                    timerEvents.post { await self.woke(reason) }
                }
            } catch {
                logger.critical("cannot create the wake-up timer; thresholds are enforced only at the next request, check-in or restart",
                                metadata: ["error": .string("\(error)")])
                return
            }
        }
        // Offline time grows at least as fast as real time (suspended time included), so
        // the crossing is at most this far.
        // A lock that failed is retried at least every minute (until it holds).
        let retry: Int64? = entries.contains(where: { $0.state == .lockFailed }) ? 60 : nil
        wakeTimer?.schedule(in: (entries.compactMap({ $0.next?.inSeconds }) + [retry].compactMap { $0 }).min())
    }

    /// The wake-up timer fired: a threshold is due, or the wall clock was set or the
    /// machine resumed, which may have made one due (and made check-in timers, which stop
    /// while suspended, late).
    func woke(_ reason: WakeTimer.Reason) async {
        guard !stopped else { return }
        if reason == .clockChanged {
            logger.info("the wall clock was set or the machine resumed from suspend; re-evaluating every registration")
            if checkInScheduling { scheduleCheckInsForAll(now: true) }
        }
        await evaluate()
    }

    deinit { wakeTimer?.stop() }

    // MARK: Per-user serialization

    func withUser<T: Sendable>(_ user: String, _ body: () async throws -> T) async rethrows -> T {
        while busyUsers.contains(user) {
            await withCheckedContinuation { waiters[user, default: []].append($0) }
        }
        busyUsers.insert(user)
        defer {
            busyUsers.remove(user)
            if var queue = waiters[user], !queue.isEmpty {
                queue.removeFirst().resume()
                waiters[user] = queue.isEmpty ? nil : queue
            }
        }
        return try await body()
    }

    // MARK: Requests

    /// Who is calling: user name and group membership are NSS lookups (files, userdb,
    /// maybe the network), so they run on the thread pool, never on the actor. Should
    /// the pool be gone (shutdown), the caller is no administrator (fail closed).
    public nonisolated func caller(_ credentials: PeerCredentials) async -> Caller {
        let authorizer = await self.authorizer
        do {
            return try await BlockingPool.run { authorizer.caller(credentials) }
        } catch {
            return Caller(credentials: credentials, userName: nil, isAdmin: false)
        }
    }

    public func lock(user: String, trigger: Trigger, reason: String) async throws -> ActionResult {
        let result = try await withUser(user) { try await lockLocked(user: user, trigger: trigger, reason: reason) }
        reschedule()
        return result
    }

    public func unlock(user: String, by caller: Caller, passcode: String? = nil, newPasscode: String? = nil) async throws -> ActionResult {
        if try await checkInBeforeUserUnlock(user: user, caller: caller) {
            return ActionResult(user: user, action: "unlock", state: .active,
                                detail: "unlocked: the policy server lifted the lock at the check-in just made")
        }
        let result = try await withUser(user) {
            try await unlockLocked(user: user, caller: caller, passcode: passcode, newPasscode: newPasscode)
        }
        reschedule()
        return result
    }

    // MARK: Lock

    func lockLocked(user: String, trigger: Trigger, reason: String) async throws -> ActionResult {
        guard let r = try store.registration(user) else { throw ManagerError.noSuchRegistration(user) }
        switch r.state {
        case .locked: return ActionResult(user: user, action: "lock", state: .locked, detail: "already locked")
        case .lockFailed:
            if let failed = await retryLock(r) { throw failed }
            return ActionResult(user: user, action: "lock", state: .locked, detail: "locked (the lock that had failed was applied and verified)")
        case .wipePending, .wiping, .wiped:
            throw ManagerError.actionFailed("\(user) cannot be locked: the registration is \(r.state.rawValue)")
        case .active: break
        }
        let event = LockWipeEvent(user: user, uid: r.uid, action: .lock, reason: reason, trigger: trigger, directories: r.directories)
        await observers.notify(.willLock, event)
        // What can be reached now is recorded; a directory that cannot is recorded at the
        // retry that reaches it (the lock is committed either way, and fails below).
        let records = recordableState(r)
        let now = clock.now().wall
        try store.commitLock(user, records: records, trigger: trigger, event: self.event(user, .lock, trigger, reason, at: now))
        let ended: [Int32]
        do {
            ended = try await applyLock(r)
        } catch {
            throw lockFailed(r, error)
        }
        if r.vaultError != nil { try? store.setVaultError(user, nil) }
        var meta = journalFields(r, action: "lock", trigger: trigger, reason: reason, id: .locked)
        if !ended.isEmpty { meta["terminated_pids"] = .string(ended.map(String.init).joined(separator: " ")) }
        logger.notice("locked \(user): \(reason)", metadata: meta)
        await observers.notify(.didLock, event)
        let detail = ended.isEmpty ? "locked" : "locked; ended \(ended.count) process(es) holding the vault open"
        return ActionResult(user: user, action: "lock", state: .locked, detail: detail)
    }

    /// The protection of `r`: the fscrypt lock for an encrypted vault, the permission lock otherwise.
    func protection(for r: RegistrationRecord) -> any VaultProtecting {
        r.protection == .encrypted ? encryption : protection
    }

    /// Applies `r`'s lock (idempotent), ending the user's processes that hold the vault when
    /// `[lock] terminate_processes` is on; returns the pids that were ended.
    func applyLock(_ r: RegistrationRecord) async throws -> [Int32] {
        let p = protection(for: r)
        let vaults = r.vaults
        let dirs = r.directories
        let uid = r.uid
        let terminator = configuration.terminateProcesses ? ProcessTerminator(grace: TimeInterval(configuration.terminateGraceSeconds)) : nil
        return try await BlockingPool.run {
            var ended: [Int32] = []
            try p.lock(vaults, uid: uid) {
                let pids = terminator?.terminate(uid: uid, directories: dirs) ?? []
                ended += pids
                return pids
            }
            return ended
        }
    }

    // MARK: Registration

    public func register(
        user: String, directories: [String], credentials: ServerCredentials? = nil, requireEncryption: Bool = false, passcode: String? = nil,
        by caller: Caller
    ) async throws -> ActionResult {
        if let credentials {
            let problems = CheckInClient.credentialProblems(credentials)
            if !problems.isEmpty { throw ManagerError.registrationRefused("credentials: " + problems.joined(separator: "; ")) }
        }
        let result = try await withUser(user) {
            // Chosen now: the vault key's wrap is bound to it (AES-GCM associated data).
            let registrationID = RegistrationRecord.newID()
            // The vault key is made (scrypt for a passcode) off the actor before anything is
            // checked, so that the checks and the insert below stay one step on the actor
            // (two registrations cannot both take a directory). Its refusal is raised at the
            // flow's step "wrap the vault key", in the same order as ever; an unused key is wiped.
            var vault: NewVault?
            var keyRefusal: (any Error)?
            do {
                vault = try await keys.newKey(passcode: passcode, policy: configuration.passcode, registration: registrationID, at: clock.now().wall)
            } catch {
                keyRefusal = error
            }
            defer { vault?.key.wipe() }
            if let existing = try store.registration(user) {
                throw ManagerError.registrationRefused("\(user) is already registered (state: \(existing.state.rawValue)); unregister it first")
            }
            var taken = try store.registrations().flatMap { r in r.directories.map { (owner: r.user, path: $0) } }
            // A vault may neither contain nor lie in what the daemon itself needs.
            for (what, path) in [("state directory", paths.stateDirectory), ("hooks directory", paths.hooksDirectory),
                                 ("control socket", paths.socketPath), ("configuration", paths.configPath),
                                 ("configuration drop-ins", ConfigurationLoader.dropInDirectory(for: paths.configPath))] {
                if let p = DirectoryRules.normalize(path) { taken.append((owner: "lockwiped (its \(what))", path: p)) }
            }
            var flow = RegistrationFlow()
            var account: Account?
            var normalized: [String] = []
            flow.add("validate user") {
                guard let a = self.accounts.account(named: user) else { throw RegistrationRefusal("no Unix user named '\(user)'") }
                account = a
            }
            flow.add("validate directories") {
                guard !directories.isEmpty else { throw RegistrationRefusal("at least one directory is needed") }
                var problems: [String] = []
                for d in directories {
                    let found = DirectoryRules.problems(path: d, taken: taken, allowedUnder: self.configuration.vaultAllowedUnder)
                    problems += found
                    guard found.isEmpty, let n = DirectoryRules.normalize(d) else { continue }
                    problems += VaultPath.ancestorProblems(n)
                    taken.append((owner: user, path: n))
                    normalized.append(n)
                }
                if !problems.isEmpty { throw RegistrationRefusal(problems.joined(separator: "; ")) }
            }
            // Protection is per registration: encrypted when every directory can be, the
            // permission lock otherwise (a vault half ciphertext, half chmod would lock
            // unevenly and report one protection for two).
            var kind: Protection = .permissions
            var notEncrypted: [String] = []
            flow.add("choose the protection") {
                notEncrypted = normalized.compactMap { FscryptLock.encryptionProblem($0) }
                if requireEncryption, !notEncrypted.isEmpty {
                    throw RegistrationRefusal("--require-encryption: " + notEncrypted.joined(separator: "; "))
                }
                kind = notEncrypted.isEmpty ? .encrypted : .permissions
                if kind == .permissions, passcode != nil {
                    throw RegistrationRefusal("a passcode protects only an encrypted vault, and these directories get the permission lock: "
                                              + notEncrypted.joined(separator: "; "))
                }
            }
            flow.add("wrap the vault key") {
                guard kind == .encrypted else {
                    vault?.key.wipe()
                    vault = nil
                    return
                }
                if let keyRefusal { throw keyRefusal }
            }
            // Each directory is opened (or created with mkdirat on its verified parent and
            // fchown'ed through its own descriptor) and its device and inode recorded: from
            // now on the vault is that inode, whatever its path comes to name.
            var created: [VaultDirectory] = []
            var vaults: [VaultDirectory] = []
            flow.add("create vault directories", run: {
                for d in normalized {
                    let (v, isNew) = try VaultPath.create(d, uid: account!.uid, gid: account!.gid)
                    vaults.append(v)
                    if isNew { created.append(v) }
                }
            }, undo: {
                let failed = created.reversed().compactMap { VaultPath.removeCreated($0) }
                return failed.isEmpty ? nil : failed.joined(separator: "; ")
            })
            flow.add("encrypt the vault directories", run: {
                guard let v = vault else { return }
                for d in vaults {
                    let id = try FscryptLock.encrypt(d, key: v.key)
                    guard id == v.stored.identifier else { throw FileSystemError("encrypt", d.path + " (the kernel derived another key identifier)", code: EINVAL) }
                }
            }, undo: {
                guard let v = vault else { return nil }
                // One key per filesystem: removing it near one directory removes it for all there.
                var seen = Set<UInt64>()
                let failed = vaults.filter { seen.insert($0.identity?.device ?? 0).inserted }.compactMap { FscryptLock.removeKey(v.stored.identifier, near: $0) }
                return failed.isEmpty ? nil : failed.joined(separator: "; ")
            })
            let reading = clock.now()
            flow.add("persist") {
                var record = RegistrationRecord(
                    user: user, uid: account!.uid, state: .active, protection: kind, directories: normalized,
                    lockTrigger: nil, blocked: false, clock: .started(at: reading), lastWipe: nil)
                record.id = registrationID
                record.identities = vaults.map(\.identity)
                let stored = credentials.flatMap { $0.kind == "none" ? nil : $0 }
                var detail = "directories: \(normalized.joined(separator: ", ")); protection: \(kind.rawValue)"
                if let v = vault {
                    let by: String = v.stored.wrapped.wrapping == .machine ? "machine key (default passcode)" : "user's passcode"
                    detail += "; key wrapped by the \(by)"
                }
                if let c = stored { detail += "; credentials: \(c.kind)" }
                let trigger: Trigger = caller.isAdmin ? .admin : .user
                try self.store.insert(record, credentials: stored, vaultKey: vault?.stored, event: self.event(user, .register, trigger, detail, at: reading.wall))
            }
            do throws(RegistrationFlow.Failure) {
                try flow.execute()
            } catch {
                logger.warning("registration of \(user) refused: \(error)", metadata: ["user": .string(user), "peer_uid": "\(caller.credentials.uid)"])
                // A refusal is shown as is; any other failure names the step it happened in.
                throw ManagerError.registrationRefused(error.error is RegistrationRefusal ? "\(error.error)" : error.description)
            }
            logger.notice("registered \(user) (\(kind.rawValue))", metadata: [
                "user": .string(user), "action": "register", "directories": .string(normalized.joined(separator: "\n")),
                "protection": .string(kind.rawValue), "registration_id": .string(registrationID),
                "message_id": MessageID.registered.metadata, "peer_uid": "\(caller.credentials.uid)",
            ])
            reschedule()
            var detail = "registered \(normalized.joined(separator: ", "))"
            if !created.isEmpty { detail += " (created \(created.map(\.path).joined(separator: ", ")))" }
            if kind == .encrypted {
                let machine = vault?.stored.wrapped.wrapping == .machine
                detail += "; protection: encrypted (fscrypt v2), key wrapped by "
                detail += machine ? "the machine key (default passcode; set one with lockwipectl passcode set)" : "the user's passcode"
            } else {
                detail += "; protection: permissions"
                if !notEncrypted.isEmpty { detail += " (not encrypted: \(notEncrypted.joined(separator: "; ")))" }
            }
            return ActionResult(user: user, action: "register", state: .active, detail: detail)
        }
        // A new registration fetches its settings at once (SAP onboarding: settings download).
        scheduleCheckIn(user, in: 0)
        return result
    }

    public func unregister(user: String, by caller: Caller) async throws -> ActionResult {
        try await withUser(user) {
            guard let r = try store.registration(user) else { throw ManagerError.noSuchRegistration(user) }
            if r.state == .wipePending || r.state == .wiping {
                throw ManagerError.actionFailed("the wipe of \(user) is pending; it must finish before unregistering")
            }
            if r.protection == .encrypted, r.state != .wiped {
                throw ManagerError.actionFailed(
                    "\(user) has an encrypted vault whose key only lockwiped holds: unregistering would make its data unreadable for good. "
                        + "Copy the data out while it is unlocked, then wipe it (lockwipectl wipe --user \(user)) and unregister")
            }
            var detail = "unregistered; the directories are left as they are"
            if r.state.isLockCommitted {
                do {
                    try protection.unlock(try store.lockRecords(user), directories: r.vaults, key: nil)
                    detail = "unregistered; the lock was lifted (owner and mode restored)"
                } catch let error as VaultOpenError {
                    // Nothing is touched: the path no longer leads to the registered vault.
                    vaultWarning(r, "unregister", error)
                    detail = "unregistered; the lock could NOT be lifted and nothing was touched: \(error)"
                } catch let error as FileSystemError where error.code == EPERM {
                    detail = "unregistered; the lock could NOT be lifted and nothing was touched: \(error)"
                } catch {
                    throw failure(user, "unregister", error)
                }
            }
            try store.delete(user, event: event(user, .unregister, .admin, detail, at: clock.now().wall))
            nextCheckIn[user] = nil
            cancelCheckIns(of: r.id)
            logger.notice("unregistered \(user)", metadata: [
                "user": .string(user), "action": "unregister", "message_id": MessageID.unregistered.metadata,
                "peer_uid": "\(caller.credentials.uid)",
            ])
            reschedule()
            return ActionResult(user: user, action: "unregister", state: nil, detail: detail)
        }
    }

    // MARK: Helpers

    func event(_ user: String, _ kind: EventKind, _ trigger: Trigger?, _ detail: String, at time: Int64) -> StoredEvent {
        StoredEvent(time: time, user: user, kind: kind.rawValue, trigger: trigger, detail: detail)
    }

    func journalFields(_ r: RegistrationRecord, action: String, trigger: Trigger, reason: String, id: MessageID) -> Logger.Metadata {
        [
            "message_id": id.metadata, "user": .string(r.user), "uid": "\(r.uid)", "action": .string(action),
            "trigger": .string(trigger.rawValue), "reason": .string(reason),
            "offline_seconds": "\(r.clock.offlineSeconds)", "directories": .string(r.directories.joined(separator: "\n")),
        ]
    }

    /// Runs a filesystem step; a failure is logged and becomes the caller's `ActionFailed`.
    func orFail<T>(_ user: String, _ action: String, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch {
            throw failure(user, action, error)
        }
    }

    /// Logs a failed filesystem step and returns the caller's `ActionFailed`.
    func failure(_ user: String, _ action: String, _ error: any Error) -> ManagerError {
        logger.error("\(action) of \(user) failed: \(error)", metadata: [
            "user": .string(user), "action": .string(action), "message_id": MessageID.actionFailed.metadata,
        ])
        return ManagerError.actionFailed("\(action) of \(user) failed: \(error)")
    }
}
