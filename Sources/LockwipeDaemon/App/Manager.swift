import Crypto
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
    /// The machine key (the default passcode), read or created on first use.
    var machineKeyCache: SymmetricKey?
    private let eraser: any VaultErasing
    let observers: ObserverHub
    let logger: Logger
    let notifier: SystemdNotifier
    let paths: Paths
    private var authorizer: Authorizer
    /// The policy server client; nil in tests that need none.
    let fetcher: (any SettingsFetching)?
    /// Uniform in [0, 1): the jitter of the check-in backoff (injected by tests).
    let random: @Sendable () -> Double
    /// When each registration checks in next, the requests in flight, the check-in timer.
    let checkIns: CheckInScheduler
    /// Check-ins are scheduled from the start-up pass on (before it, and in tests that do not
    /// run it, only explicit check-ins happen).
    var checkInScheduling = false

    /// Wipes running now, for `status` (the wipe runs on its own thread; the actor is free).
    private var runningWipes: [String: WipeProgress] = [:]
    private var busyUsers: Set<String> = []
    private var waiters: [String: [CheckedContinuation<Void, Never>]] = [:]
    /// The one pending wake-up at the next threshold crossing (CLOCK_BOOTTIME, so suspended
    /// time counts), which also wakes when the wall clock is set or the machine resumes.
    /// Created at the first schedule.
    var wakeTimer: WakeTimer?
    let timerLoop: any EventLoop
    var stopped = false
    /// Lock on logout (ManagerSessions.swift).
    var logout = LogoutLocks()

    public init(
        configuration: Configuration, store: StateStore, clock: any ClockSource, protection: any VaultProtecting,
        eraser: any VaultErasing, observers: ObserverHub, logger: Logger, notifier: SystemdNotifier, paths: Paths,
        fetcher: (any SettingsFetching)? = nil, random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
        encryption: any VaultProtecting = FscryptLock()
    ) {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let checkIns = CheckInScheduler(sleep: CheckInScheduler.sleeping(on: loop))
        self.timerLoop = loop
        self.checkIns = checkIns
        self.encryption = encryption
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
        checkIns.onDue = { [weak self] in await self?.runDueCheckIns() }
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
            checkIns.clear()
            scheduleCheckInsForAll(now: true)
        }
    }

    public func stop() {
        stopped = true
        for progress in runningWipes.values { progress.cancel() }
        wakeTimer?.stop()
        wakeTimer = nil
        checkIns.stop()
        stopLockOnLogout()
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
        return "offline for \(RelativeTime.format(seconds: offline)) (\(source) policy: \(action.rawValue) after \(days)d)"
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
                wakeTimer = try WakeTimer { [weak self] reason in
                    guard let self else { return }
                    Task { await self.woke(reason) }
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

    private func summaryEntries() -> [StatusSummary.Entry] {
        let reading = clock.now()
        return ((try? store.registrations()) ?? []).map { r in
            StatusSummary.Entry(
                user: r.user, state: r.state,
                next: PolicyEvaluator.evaluate(policy: policy(for: r).policy, state: r.state, offlineSeconds: offlineNow(r, reading)).next)
        }
    }

    /// The offline time of `r` as of `reading`, without persisting a checkpoint (reads
    /// never write). Every schedule and report is computed from this, never from the stored
    /// checkpoint alone, which is as old as the last evaluation.
    func offlineNow(_ r: RegistrationRecord, _ reading: ClockReading) -> Int64 {
        r.state.isWipeCommitted ? r.clock.offlineSeconds : r.clock.advanced(to: reading).clock.offlineSeconds
    }

    public var statusLine: String {
        if let damage = store.damage { return "DEGRADED, nothing is enforced: \(damage)" }
        return StatusSummary.line(summaryEntries())
    }

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

    public func caller(_ credentials: PeerCredentials) -> Caller { authorizer.caller(credentials) }

    public func status(for caller: Caller, user: String?) throws -> StatusReport {
        let reading = clock.now()
        var list = try store.registrations().filter { caller.isAdmin || $0.uid == caller.credentials.uid }
        if let user {
            list = list.filter { $0.user == user }
            if list.isEmpty { throw ManagerError.noSuchRegistration(user) }
        }
        let server = configuration.server
        let infos = list.map { r -> RegistrationInfo in
            let offline = offlineNow(r, reading)
            let (p, source) = policy(for: r)
            let next = PolicyEvaluator.evaluate(policy: p, state: r.state, offlineSeconds: offline).next
            var info = RegistrationInfo(
                user: r.user, uid: r.uid, state: r.state, protection: r.protection, directories: r.directories,
                blocked: r.blocked, lastContact: Timestamp.iso(r.clock.lastContact), offlineSeconds: offline,
                nextAction: next.map { NextAction(action: $0.action, at: Timestamp.iso(reading.wall + $0.inSeconds)) },
                lockTrigger: r.state.isLockCommitted ? r.lockTrigger : nil, wipe: r.lastWipe,
                wipeProgress: runningWipes[r.user]?.info())
            info.policy = PolicyInfo(policy: p, source: source)
            info.policySource = source
            info.blockedCode = r.blocked ? r.server.blockedCode : nil
            info.lastAttempt = r.server.lastAttempt.map(Timestamp.iso)
            info.lastError = r.server.lastAttempt == nil ? nil : r.server.lastError
            info.nextCheckIn = nextCheckInTime(r, wall: reading.wall).map(Timestamp.iso)
            info.credentials = r.server.credentials
            info.passcodePolicy = r.server.settings?.passcode
            info.sharedDevice = r.server.settings?.sharedDevice
            info.logoutLockAt = logoutLockTime(r.user, wall: reading.wall)
            info.vaultError = r.vaultError
            vaultStatus(r, into: &info)
            return info
        }
        var warnings: [String] = []
        if !server.isConfigured {
            warnings.append("no policy server is configured: offline clocks restart only when an administrator unlocks a registration")
        }
        if server.usesInsecureHTTP {
            warnings.append("the policy server is reached over plain http:// (allow_insecure_http = true): any local user who binds that port first receives every token and can order locks and wipes; use https://")
        }
        if !caller.adminGroupExists {
            warnings.append("the admin group '\(configuration.adminGroup)' does not exist: only root is an administrator")
        }
        warnings += logoutLockWarnings(list)
        for r in list where r.state == .lockFailed {
            warnings.append("the lock of \(r.user) FAILED and is not in force; it is retried: \(r.vaultError ?? "see the journal")")
        }
        for r in list where r.state != .lockFailed && r.vaultError != nil {
            warnings.append("the vault of \(r.user) cannot be reached: \(r.vaultError!)")
        }
        for r in list where r.state == .wipePending {
            warnings.append("the wipe of \(r.user) is pending (incomplete or interrupted); it is retried at start-up")
        }
        for r in list where r.blocked {
            warnings.append("\(r.user) is blocked by the policy server (\(r.server.blockedCode ?? "blocked")); its data is untouched")
        }
        if server.isConfigured {
            for r in list where r.server.failures > 0 && !r.state.isWipeCommitted {
                warnings.append("check-in of \(r.user) failed \(r.server.failures) time(s) in a row: \(r.server.lastError ?? "unknown error")")
            }
        }
        return StatusReport(
            version: LockwipeVersion.current, server: ServerInfo(configured: server.isConfigured, url: server.url, insecureHttp: server.usesInsecureHTTP),
            policy: policyInfo(list), registrations: infos, warnings: warnings)
    }

    public func history(for caller: Caller, user: String?, limit: Int) throws -> HistoryReply {
        var filter = user
        if !caller.isAdmin {
            guard let own = caller.userName else { return HistoryReply(events: []) }
            if let user, user != own { throw ManagerError.notPermitted("only administrators may read the history of other users") }
            filter = own
        }
        let events = try store.events(user: filter, limit: max(1, min(limit, 10_000)))
        return HistoryReply(events: events.map {
            HistoryEvent(time: Timestamp.iso($0.time), user: $0.user, kind: $0.kind, trigger: $0.trigger, detail: $0.detail)
        })
    }

    /// The machine's policy: the newest valid policy the server sent (normally the same for
    /// every registration), else the local one. Each registration shows its own too.
    public func policyInfo() -> PolicyInfo { policyInfo((try? store.registrations()) ?? []) }

    private func policyInfo(_ list: [RegistrationRecord]) -> PolicyInfo {
        if configuration.server.isConfigured,
           let newest = list.filter({ $0.server.policy != nil }).max(by: { ($0.server.policyReceivedAt ?? 0) < ($1.server.policyReceivedAt ?? 0) }),
           let p = newest.server.policy {
            return PolicyInfo(policy: p, source: "server")
        }
        return PolicyInfo(policy: configuration.policy, source: "local")
    }

    /// The users an action targets: one by name, or every registration.
    public func targets(user: String?, all: Bool) throws -> [String] {
        if all { return try store.registrations().map(\.user) }
        guard let user else { throw ManagerError.invalidParameter("user", reason: "give a user or all") }
        guard try store.registration(user) != nil else { throw ManagerError.noSuchRegistration(user) }
        return [user]
    }

    public func registrationUID(_ user: String) throws -> UInt32? { try store.registration(user)?.uid }

    public func registration(_ user: String) throws -> RegistrationRecord? { try store.registration(user) }

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

    public func wipe(user: String, trigger: Trigger, reason: String) async throws -> ActionResult {
        let requested = ContinuousClock.now
        let result = try await withUser(user) { try await wipeLocked(user: user, trigger: trigger, reason: reason, requested: requested) }
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
        return try await runBlocking {
            var ended: [Int32] = []
            try p.lock(vaults, uid: uid) {
                let pids = terminator?.terminate(uid: uid, directories: dirs) ?? []
                ended += pids
                return pids
            }
            return ended
        }
    }

    private func unlockLocked(user: String, caller: Caller, passcode: String?, newPasscode: String?) async throws -> ActionResult {
        guard let r = try store.registration(user) else { throw ManagerError.noSuchRegistration(user) }
        if r.protection == .encrypted {
            return try await unlockEncrypted(r, caller: caller, passcode: passcode, newPasscode: newPasscode)
        }
        guard caller.isAdmin else { throw ManagerError.notPermitted("only root and members of the admin group may unlock a vault with a permission lock") }
        guard r.state.isLockCommitted else {
            throw ManagerError.actionFailed("\(user) is not locked (state: \(r.state.rawValue))")
        }
        let records = try store.lockRecords(user)
        do {
            try protection.unlock(records, directories: r.vaults, key: nil)
        } catch {
            throw vaultFailure(r, "unlock", error)
        }
        let reading = clock.now()
        let reason = "unlocked by administrator uid \(caller.credentials.uid); offline clock restarted"
        try store.commitUnlock(user, clock: .started(at: reading), event: event(user, .unlock, .admin, reason, at: reading.wall))
        var meta = journalFields(r, action: "unlock", trigger: .admin, reason: reason, id: .unlocked)
        meta["peer_uid"] = "\(caller.credentials.uid)"
        meta["peer_pid"] = "\(caller.credentials.pid)"
        logger.notice("unlocked \(user)", metadata: meta)
        return ActionResult(user: user, action: "unlock", state: .active, detail: "unlocked; offline clock restarted")
    }

    // MARK: Wipe

    func wipeLocked(user: String, trigger: Trigger, reason: String, requested: ContinuousClock.Instant = .now) async throws -> ActionResult {
        guard let r = try store.registration(user) else { throw ManagerError.noSuchRegistration(user) }
        if r.state == .wiped {
            return ActionResult(user: user, action: "wipe", state: .wiped, detail: "already wiped", wipe: r.lastWipe)
        }
        let now = clock.now().wall
        try store.commitWipeIntent(user, reason: reason, trigger: trigger, event: event(user, .wipeStarted, trigger, reason, at: now))
        logger.notice("wipe of \(user) committed: \(reason)", metadata: journalFields(r, action: "wipe", trigger: trigger, reason: reason, id: .wipeStarted))
        let summary = await performWipe(user: user, reason: reason, trigger: trigger, resumed: false, requested: requested)
        guard let summary else { throw ManagerError.actionFailed("the wipe of \(user) could not run; it stays pending") }
        let state: RegistrationState = summary.complete ? .wiped : .wipePending
        let wipedText: String = summary.cryptoErased ? "wiped: " + Self.cryptoEraseText(summary) : "wiped: \(summary.entriesRemoved) entries removed"
        let detail = summary.complete
            ? wipedText
            : "INCOMPLETE: \(summary.entriesRemoved) entries removed, \(summary.skipped.count) could not be removed; the wipe stays pending"
        return ActionResult(user: user, action: "wipe", state: state, detail: detail, wipe: summary)
    }

    /// Carries out a committed wipe: lock first (so nobody writes while it runs), erase,
    /// record the honest report. Returns nil when it could not even start.
    @discardableResult
    private func performWipe(user: String, reason: String, trigger: Trigger, resumed: Bool, requested: ContinuousClock.Instant = .now) async -> WipeSummary? {
        guard let r = try? store.registration(user) else { return nil }
        let event = LockWipeEvent(user: user, uid: r.uid, action: .wipe, reason: reason, trigger: trigger, directories: r.directories)
        if resumed {
            logger.notice("resuming the interrupted wipe of \(user)", metadata: journalFields(r, action: "wipe", trigger: trigger, reason: reason, id: .wipeResumed))
        }
        await observers.notify(.willWipe, event)
        do {
            _ = try await applyLock(r)
        } catch let error as VaultOpenError {
            // The erase below cannot open it either: nothing is touched, the wipe stays pending.
            vaultWarning(r, "wipe", error)
        } catch {
            logger.warning("could not lock before wiping; wiping anyway", metadata: ["user": .string(user), "error": .string("\(error)")])
        }
        let now = clock.now().wall
        do {
            try store.beginWipeAttempt(user, event: resumed ? self.event(user, .wipeResumed, .resume, reason, at: now) : nil)
        } catch {
            logger.critical("cannot record the wipe attempt; not wiping", metadata: ["user": .string(user), "error": .string("\(error)")])
            return nil
        }
        var options = configuration.wipe
        var destroyed: (at: Int64, seconds: Double?)?
        if r.protection == .encrypted {
            // Crypto-erase: once the key is gone from the kernel and from the store, what is
            // left is ciphertext; the files are then only unlinked.
            destroyed = destroyVaultKey(r, trigger: trigger, reason: reason, requested: requested)
            if destroyed != nil { options.passes = 0 }
        }
        let progress = WipeProgress()
        runningWipes[user] = progress
        // A resumed wipe runs before READY=1: keep systemd's start timeout from killing a
        // long one half-way (it would only resume again), and say how far it is.
        let ticker = resumed ? startupTicker(user: user, progress: progress) : nil
        // Shutdown (SIGTERM) cancels the request's task: the wipe stops at the next entry
        // and stays pending, instead of holding the stop until it is done.
        var summary = await withTaskCancellationHandler {
            await eraser.erase(directories: r.vaults, options: options, progress: progress)
        } onCancel: {
            progress.cancel()
        }
        if let destroyed {
            summary.keyDestroyedAt = Timestamp.iso(destroyed.at)
            summary.keyDestroyedSeconds = destroyed.seconds
        }
        ticker?.cancel()
        runningWipes[user] = nil
        var meta = journalFields(r, action: "wipe", trigger: trigger, reason: reason, id: summary.complete ? .wiped : .wipeIncomplete)
        meta["files"] = "\(summary.filesOverwritten)"
        meta["bytes"] = "\(summary.bytesOverwritten)"
        meta["entries"] = "\(summary.entriesRemoved)"
        meta["skipped"] = "\(summary.skipped.count)"
        meta["passes"] = "\(summary.passes)"
        meta["attributes_cleared"] = "\(summary.attributesCleared)"
        meta["elapsed_seconds"] = .string(String(format: "%.3f", summary.elapsedSeconds))
        if summary.cryptoErased {
            meta["crypto_erased"] = "true"
            meta["key_destroyed_at"] = .string(summary.keyDestroyedAt ?? "")
            if let s = summary.keyDestroyedSeconds { meta["key_destroyed_seconds"] = .string(String(format: "%.3f", s)) }
        }
        let overwritten = summary.passes == 0
            ? "unlink only (passes = 0)"
            : "\(summary.filesOverwritten) files overwritten (\(summary.bytesOverwritten) bytes, \(summary.passes) \(summary.pattern) pass\(summary.passes == 1 ? "" : "es"))"
        let detail: String
        if summary.complete && summary.cryptoErased {
            detail = Self.cryptoEraseText(summary) + (resumed ? " (resumed)" : "")
        } else if summary.complete {
            detail = "\(summary.entriesRemoved) entries removed, \(overwritten) in \(String(format: "%.2f", summary.elapsedSeconds)) s\(resumed ? " (resumed)" : "")"
        } else {
            detail = "incomplete: " + summary.skipped.prefix(20).map { "\($0.path): \($0.reason)" }.joined(separator: "; ")
        }
        do {
            try store.finishWipe(user, summary: summary, event: self.event(user, summary.complete ? .wipe : .wipeIncomplete, trigger, detail, at: clock.now().wall))
        } catch {
            logger.critical("cannot record the wipe's result", metadata: ["user": .string(user), "error": .string("\(error)")])
        }
        if summary.complete {
            logger.notice("wiped \(user): \(detail)", metadata: meta)
        } else {
            logger.error("wipe of \(user) is INCOMPLETE: \(detail)", metadata: meta)
        }
        await observers.notify(.didWipe, event)
        return summary
    }

    /// While a resumed wipe runs before READY=1: every 10 s, extend systemd's start
    /// timeout and put the progress in STATUS=. An event-loop timer.
    private func startupTicker(user: String, progress: WipeProgress) -> RepeatedTask {
        let notifier = self.notifier
        return timerLoop.scheduleRepeatedTask(initialDelay: .seconds(10), delay: .seconds(10)) { _ in
            let p = progress.info()
            notifier.extendTimeout(by: .seconds(30))
            notifier.status("resuming the wipe of \(user): \(p.entriesRemoved) entries removed, \(p.bytesOverwritten) bytes overwritten")
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
                guard let a = Account.lookup(user) else { throw RegistrationRefusal("no Unix user named '\(user)'") }
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
            var vault: NewVault?
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
            // Chosen now: the vault key's wrap is bound to it (AES-GCM associated data).
            let registrationID = RegistrationRecord.newID()
            flow.add("wrap the vault key") {
                guard kind == .encrypted else { return }
                vault = try self.newVaultKey(passcode: passcode, policy: self.configuration.passcode, registration: registrationID, at: self.clock.now().wall)
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
            defer { vault?.key.wipe() }
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
            checkIns.forget(user)
            checkIns.cancelRequests(of: r.id)
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
