import Foundation
import LockwipeBase
import LockwipeCheckIn
import LockwipeCore
import LockwipeVaultIO
import Logging

/// The registry: `register` and `unregister` (registration is all or nothing,
/// `RegistrationFlow`, and a vault is its directory's inode from then on, `VaultPath`),
/// finding the registration a request names and running the request in its turn, and the
/// requests that are more than one turn (an unlock that may check in first, a login's
/// password for every registration of its account).
extension Manager {
    public func register(
        user: String, directories: [String], credentials: ServerCredentials? = nil, requireEncryption: Bool = false, passcode: String? = nil,
        outbox: String? = nil, by caller: Caller
    ) async throws -> Outcome {
        if let outbox {
            if let problem = OutboxConfiguration.directoryProblem(outbox) { throw ManagerError.invalidParameter("outbox", reason: problem) }
            if context.configuration.outboxRecipient == nil {
                throw ManagerError.registrationRefused(
                    "an outbox is sealed to the organisation: set [outbox] recipient_public_key or [keys] recovery_public_key in lockwiped.toml first")
            }
        }
        if let credentials {
            let problems = CheckInClient.credentialProblems(credentials)
            if !problems.isEmpty { throw ManagerError.registrationRefused("credentials: " + problems.joined(separator: "; ")) }
        }
        // Chosen now: the vault key's wrap is bound to it (AES-GCM associated data), and the
        // first check-in is planned for it.
        let registrationID = RegistrationID.new()
        // A closure of its own, so that the new vault key is wiped (`defer` below) as soon as
        // the registration is made or refused.
        let result = try await { () async throws -> Outcome in
            // The vault key is made (scrypt for a passcode) off the actor before anything is
            // checked and before the registry's turn is taken, so that a slow scrypt holds
            // up no other registration. Its refusal is raised at the flow's step "wrap the
            // vault key", in the same order as ever; an unused key is wiped.
            var vault: NewVault?
            var keyRefusal: (any Error)?
            do {
                vault = try await context.keys.newKey(passcode: passcode, policy: context.configuration.passcode, registration: registrationID, at: context.clock.now().wall)
            } catch {
                keyRefusal = error
            }
            defer { vault?.key.wipe() }
            // From the check of which directories are taken to the insert, one registration
            // at a time (the registry's turn): two registrations cannot both take a directory
            // or a name.
            await registry.turns.take()
            defer { registry.turns.release() }
            return try await { () async throws -> Outcome in
                if let existing = try await context.store.registration(user) {
                    throw ManagerError.registrationRefused("\(user) is already registered (state: \(existing.state.rawValue)); unregister it first")
                }
                var taken = try await context.store.registrations().flatMap { r in r.directories.map { (owner: r.user, path: $0) } }
                // A vault may neither contain nor lie in what the daemon itself needs.
                for (what, path) in [
                    ("state directory", context.paths.stateDirectory), ("hooks directory", context.paths.hooksDirectory),
                    ("control socket", context.paths.socketPath), ("configuration", context.paths.configPath),
                    ("configuration drop-ins", ConfigurationLoader.dropInDirectory(for: context.paths.configPath)),
                ] {
                    if let p = DirectoryRules.normalize(path) { taken.append((owner: "lockwiped (its \(what))", path: p)) }
                }
                var flow = RegistrationFlow()
                var account: Account?
                var normalized: [String] = []
                flow.add("validate user") {
                    if let problem = DirectoryRules.controlCharacterProblem(field: "user name", user) { throw RegistrationRefusal(problem) }
                    guard let a = try await BlockingPool.run({ [accounts = self.accounts] in accounts.account(named: user) }) else {
                        throw RegistrationRefusal("no Unix user named '\(user)'")
                    }
                    account = a
                }
                flow.add("validate directories") {
                    guard !directories.isEmpty else { throw RegistrationRefusal("at least one directory is needed") }
                    var problems: [String] = []
                    for d in directories {
                        let found = DirectoryRules.problems(path: d, taken: taken, allowedUnder: self.context.configuration.vaultAllowedUnder)
                        problems += found
                        guard found.isEmpty, let n = DirectoryRules.normalize(d) else { continue }
                        problems += try await BlockingPool.run { VaultPath.ancestorProblems(n) }
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
                    notEncrypted = try await BlockingPool.run { [normalized] in normalized.compactMap { FscryptLock.encryptionProblem($0) } }
                    let fleetWide = self.context.configuration.vaultRequireEncryption
                    if requireEncryption || fleetWide, !notEncrypted.isEmpty {
                        throw RegistrationRefusal(
                            (requireEncryption ? "--require-encryption: " : "[vault] require_encryption = true refuses permission vaults: ")
                                + notEncrypted.joined(separator: "; ") + Self.fscryptHint(notEncrypted))
                    }
                    kind = notEncrypted.isEmpty ? .encrypted : .permissions
                    if kind == .permissions, passcode != nil {
                        throw RegistrationRefusal(
                            "a passcode protects only an encrypted vault, and these directories get the permission lock: "
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
                // An existing directory is kept when it is hers, given to her (through the same
                // descriptor) when it is root's, as a wipe leaves it, and refused when it is
                // another account's (`ExistingVault`): `active` means she can use it.
                var created: [VaultDirectory] = []
                var given: [(VaultDirectory, previous: (uid: UInt32, gid: UInt32, mode: UInt32))] = []
                var vaults: [VaultDirectory] = []
                let undoDirectories = { () -> String? in
                    let uid = account!.uid
                    let failed =
                        created.reversed().compactMap { VaultPath.removeCreated($0) }
                        + given.reversed().compactMap { VaultPath.restoreGiven($0.0, uid: uid, to: $0.previous) }
                    return failed.isEmpty ? nil : failed.joined(separator: "; ")
                }
                flow.add(
                    "create vault directories",
                    run: {
                        do {
                            for d in normalized {
                                let (uid, gid) = (account!.uid, account!.gid)
                                let prepared = try await BlockingPool.run { try VaultPath.create(d, user: user, uid: uid, gid: gid) }
                                vaults.append(prepared.directory)
                                if prepared.created { created.append(prepared.directory) }
                                if let previous = prepared.given { given.append((prepared.directory, previous)) }
                            }
                        } catch {
                            // A later directory refused: the earlier ones of this step are undone too.
                            if let problem = undoDirectories() { throw RegistrationRefusal("\(ErrorWords.of(error)) (and undoing failed: \(problem))") }
                            throw error
                        }
                    },
                    undo: undoDirectories)
                flow.add(
                    "encrypt the vault directories",
                    run: {
                        guard let v = vault else { return }
                        for d in vaults {
                            let key = v.key
                            let id = try await BlockingPool.run { try FscryptLock.encrypt(d, key: key) }
                            guard id == v.stored.identifier else { throw FileSystemError("encrypt", d.path + " (the kernel derived another key identifier)", code: EINVAL) }
                        }
                    },
                    undo: {
                        guard let v = vault else { return nil }
                        // One key per filesystem: removing it near one directory removes it for all there.
                        var seen = Set<UInt64>()
                        let failed = vaults.filter { seen.insert($0.identity?.device ?? 0).inserted }.compactMap { FscryptLock.removeKey(v.stored.identifier, near: $0) }
                        return failed.isEmpty ? nil : failed.joined(separator: "; ")
                    })
                let reading = context.clock.now()
                flow.add("persist") {
                    var record = RegistrationRecord(
                        user: user, uid: account!.uid, state: .active, protection: kind, directories: normalized,
                        lockTrigger: nil, blocked: false, clock: .started(at: reading), lastWipe: nil)
                    record.id = registrationID
                    record.identities = vaults.map(\.identity)
                    record.outbox = outbox
                    let stored = credentials.flatMap { $0.kind == "none" ? nil : $0 }
                    var detail = "directories: \(normalized.joined(separator: ", ")); protection: \(kind.rawValue)"
                    if let v = vault {
                        let by: String = v.stored.wrapped.wrapping == .machine ? "machine key (default passcode)" : "user's passcode"
                        detail += "; key wrapped by the \(by)"
                    }
                    if let c = stored { detail += "; credentials: \(c.kind)" }
                    if let outbox { detail += "; outbox: \(outbox)" }
                    let trigger: Trigger = caller.isAdmin ? .admin : .user
                    try await self.context.store.insert(
                        record, credentials: stored, vaultKey: vault?.stored, event: self.context.event(user, .register, trigger, detail, at: reading.wall))
                }
                do throws(RegistrationFlow.Failure) {
                    try await flow.execute()
                } catch {
                    context.logger.warning("registration of \(user) refused: \(error)", metadata: ["user": .string(user), "peer_uid": "\(caller.credentials.uid)"])
                    // A refusal is shown as is; any other failure names the step it happened in.
                    throw ManagerError.registrationRefused(error.error is RegistrationRefusal ? "\(error.error)" : error.description)
                }
                let sealing = await context.keys.machineKeyState().sealing
                let atRest = AtRest.of(kind, passcodeAlone: vault.map { !$0.stored.wrapped.needsMachineKey } ?? false, sealing: sealing)
                context.logger.notice(
                    "registered \(user) (\(kind.rawValue)); at rest: \(atRest.sentence)",
                    metadata: [
                        "user": .string(user), "action": "register", "directories": .string(normalized.joined(separator: "\n")),
                        "protection": .string(kind.rawValue), "registration_id": .string(registrationID.rawValue), "at_rest": .string(atRest.rawValue),
                        "message_id": MessageID.registered.metadata, "peer_uid": "\(caller.credentials.uid)",
                    ])
                await reschedule()
                var detail = "registered \(normalized.joined(separator: ", "))"
                if !created.isEmpty { detail += " (created \(created.map(\.path).joined(separator: ", ")))" }
                if !given.isEmpty {
                    detail +=
                        " (given to \(user): " + given.map { "\($0.0.path), was uid \($0.previous.uid) mode \(String($0.previous.mode, radix: 8))" }.joined(separator: "; ") + ")"
                }
                if kind == .encrypted {
                    let machine = vault?.stored.wrapped.wrapping == .machine
                    detail += "; protection: encrypted (fscrypt v2), key wrapped by "
                    detail += machine ? "the machine key (default passcode; set one with lockwipectl passcode set)" : "the user's passcode"
                } else {
                    detail += "; protection: permissions"
                    if !notEncrypted.isEmpty { detail += " (not encrypted: \(notEncrypted.joined(separator: "; "))\(Self.fscryptHint(notEncrypted)))" }
                }
                detail += "; at rest: " + atRest.sentence
                return Outcome(user: user, operation: .register, state: .active, reason: detail)
            }()
        }()
        // A new registration fetches its settings at once (SAP onboarding: settings download).
        scheduleCheckIn(registrationID, of: user, in: 0)
        return result
    }

    /// How to get fscrypt where a directory's filesystem has none, for a register that fell
    /// back to (or was refused) the permission lock: empty unless one of `problems` says so.
    static func fscryptHint(_ problems: [String]) -> String {
        guard problems.contains(where: { $0.hasSuffix("its filesystem has no fscrypt (ext4 needs -O encrypt)") }) else { return "" }
        return
            "; to encrypt it, enable fscrypt on that ext4 filesystem (tune2fs -O encrypt DEVICE: it cannot be turned off again, "
            + "GRUB older than 2.04 cannot read a /boot on it, and the block size must equal the page size), "
            + "then register an empty directory on it"
    }

    public func unregister(user: String, by caller: Caller) async throws -> Outcome {
        try await registration(named: user).withTurn { turn in
            let r = turn.record
            if r.state == .wipePending || r.state == .wiping {
                throw ManagerError.wrongState(user: user, current: r.state, reason: "the wipe of \(user) is pending; it must finish before unregistering")
            }
            if r.protection == .encrypted, r.state != .wiped {
                throw ManagerError.actionFailed(
                    "\(user) has an encrypted vault whose key only lockwiped holds: unregistering would make its data unreadable for good. "
                        + "Copy the data out while it is unlocked, then wipe it (lockwipectl wipe --user \(user)) and unregister")
            }
            var detail = "unregistered; the directories are left as they are"
            if r.state == .active, let outbox = await turn.registration.sealOutbox(r, before: .unregister, trigger: .admin) {
                detail += "; outbox \(outbox.words)"
            }
            // Sent with the registration's credentials while it still has them.
            let uploads = await context.uploadOutboxes(r, within: context.configuration.outbox.uploadWaitSeconds)
            let left = uploads.filter { if case .received = $0.answer { false } else { true } }
            if !uploads.isEmpty {
                detail +=
                    left.isEmpty
                    ? "; every sealed outbox was received by the server"
                    : "; \(left.count) sealed outbox(es) not uploaded, kept in \(SealedOutboxes(stateDirectory: context.paths.stateDirectory).path)"
            }
            if r.state.isLockCommitted {
                do {
                    let (records, vaults, protection) = (try await context.store.lockRecords(registration: r.id), r.vaults, context.permissions)
                    try await context.vaultCalls.run(for: VaultOwner(registration: r.id, user: user), "the unlock at unregister") {
                        try protection.unlock(records, directories: vaults, key: nil)
                    }
                    detail = "unregistered; the lock was lifted (owner and mode restored)"
                } catch let error as VaultOpenError {
                    // Nothing is touched: the path no longer leads to the registered vault.
                    await context.vaultWarning(r, "unregister", error, in: turn)
                    detail = "unregistered; the lock could NOT be lifted and nothing was touched: \(error)"
                } catch let error as FileSystemError where error.code == EPERM {
                    detail = "unregistered; the lock could NOT be lifted and nothing was touched: \(error)"
                } catch {
                    throw context.failure(user, "unregister", error)
                }
            }
            // Read before the delete, to release the server's connection after it: a read
            // that fails fails the request, before anything is changed.
            let connection: SAPConnectionRecord?
            let credentials: ServerCredentials?
            do {
                connection = try await context.store.sapConnection(registration: r.id)
                credentials = try await context.store.credentials(registration: r.id)
            } catch {
                throw context.stateFailure(user, "unregister", error)
            }
            try await context.store.delete(turn.held, event: context.event(user, .unregister, .admin, detail, at: context.clock.now().wall))
            forgetRegistration(turn.registration)
            checkIns.forget(r.id)
            checkIns.cancelRequests(of: r.id)
            turn.registration.releaseConnection(connection, credentials: credentials)
            context.logger.notice(
                "unregistered \(user)",
                metadata: [
                    "user": .string(user), "action": "unregister", "message_id": MessageID.unregistered.metadata,
                    "peer_uid": "\(caller.credentials.uid)",
                ])
            await reschedule()
            return Outcome(user: user, operation: .unregister, state: nil, reason: detail)
        }
    }

    // MARK: The registry

    /// The registration `user` names now, found once from the store's record (which its
    /// next turn reuses when nothing can have changed it since).
    func registration(named user: String) async throws -> FoundRegistration {
        let generation = try context.store.writesCommitted()
        guard let r = try await context.store.registration(user) else { throw ManagerError.noSuchRegistration(user) }
        return FoundRegistration(registration: registration(id: r.id, user: r.user), record: r, generation: generation)
    }

    /// A request on one registration, as homed's handlers call `home_lock(h)` on the Home
    /// `manager_get_home_by_name` found: the registration `user` names now does `operation`
    /// in its turn (`Registration+Concern.swift`), then the Manager plans the next wake-up.
    func perform<T: Sendable>(
        on user: String, _ operation: nonisolated(nonsending) @Sendable (borrowing RegistrationTurn) async throws -> T
    ) async throws -> T {
        let result = try await registration(named: user).withTurn { turn in try await operation(turn) }
        await reschedule()
        return result
    }

    /// A look at the registration `user` names now without its turn (a preview: it changes
    /// nothing, and waits for no operation running): `body` gets it and the record just read.
    func look<T: Sendable>(
        at user: String, _ body: nonisolated(nonsending) @Sendable (Registration, RegistrationRecord) async throws -> T
    ) async throws -> T {
        guard let r = try await context.store.registration(user) else { throw ManagerError.noSuchRegistration(user) }
        return try await body(registration(id: r.id, user: r.user), r)
    }

    /// The object of registration `id` of `user`, made when first asked for. An id the
    /// store no longer has gets one too: its turn finds it gone.
    func registration(id: RegistrationID, user: String) -> Registration {
        if let known = registry.byID[id] { return known }
        let made = Registration(id: id, user: user, context: context)
        registry.byID[id] = made
        return made
    }

    /// Runs `body` in `registration`'s turn for the daemon's own work (evaluation, the
    /// start-up pass), which no caller waits for: a registration unregistered before its
    /// turn came is skipped, and a record that cannot be read is logged (`stateNotice`: `what`
    /// says what was not done), not swallowed.
    func inTurn(of registration: Registration, _ what: String, _ body: nonisolated(nonsending) (borrowing RegistrationTurn) async -> Void) async {
        do {
            try await registration.withTurn { turn in await body(turn) }
        } catch ManagerError.noSuchRegistration {
            forgetRegistration(registration)
        } catch {
            // Its record could not be read: nothing is done blind; still due, so the next
            // evaluation (or start) does it.
            context.stateNotice("\(what) of \(registration.user) did not run now (retried at the next evaluation)", user: registration.user, error)
        }
    }

    /// Forgets the object of a registration the store no longer has (deleted by unregister,
    /// or found gone by a turn): ids are never used again, so every turn still waiting for
    /// it finds it gone, and a name registered again is another registration.
    func forgetRegistration(_ registration: Registration) {
        if registry.byID[registration.id] === registration { registry.byID[registration.id] = nil }
    }

    // MARK: Requests on more than one turn

    public func unlock(user: String, by caller: Caller, passcode: String? = nil, newPasscode: String? = nil) async throws -> Outcome {
        // A user unlocking her own vault after a server or offline lock that is not liftable
        // yet: one check-in attempt first (outside the registration's turn, as every
        // check-in), so that a contact makes the lock liftable (her passcode then lifts it,
        // `UnlockRule`), or, with `lift_after_contact = "immediately"`, lifts it or hands it
        // back to the passcode. When that contact already opened the vault (its key is
        // wrapped by the machine key), there is nothing left for the unlock to do.
        if context.fetcher != nil, let r = try await context.store.registration(user),
            case .checkInFirst = UnlockRule.access(registration(id: r.id, user: r.user).unlockRequest(r, caller))
        {
            _ = await checkIn(user: user, purpose: .requested)
            if try await context.store.registration(user)?.state == .active {
                return Outcome(
                    user: user, operation: .unlock, state: .active,
                    reason: "unlocked: the policy server lifted the lock at the check-in just made")
            }
        }
        let result = try await registration(named: user).withTurn { turn in
            try await turn.registration.unlock(in: turn, caller: caller, passcode: passcode, newPasscode: newPasscode)
        }
        await reschedule()
        return result
    }

    /// Every registration of `uid`, each in its turn. A registration whose turn fails says
    /// so in its result; the login itself never waits for more than these turns.
    public func liftAtLogin(uid: UInt32, password: String, by caller: Caller) async throws -> [Outcome] {
        var results: [Outcome] = []
        for r in try await context.store.registrations() where r.uid == uid {
            do {
                results.append(try await registration(named: r.user).withTurn { turn in try await turn.registration.liftAtLogin(in: turn, password: password) })
            } catch let error as ManagerError {
                results.append(Outcome(user: r.user, operation: .login, state: r.state, reason: error.message, failed: true))
            }
        }
        await reschedule()
        return results
    }

    /// The recovery wraps of the encrypted vaults of `user` (nil: every registration), read
    /// without a turn (nothing changes; `recover` checks the key it is given in the turn),
    /// and the encrypted vaults that have none, with why.
    func recoveryWraps(user: String?) async throws -> (wraps: [(user: String, id: RegistrationID, wrap: RecoveryWrap)], missing: [(user: String, reason: String)]) {
        var records = try await context.store.registrations()
        if let user {
            records = records.filter { $0.user == user }
            if records.isEmpty { throw ManagerError.noSuchRegistration(user) }
        }
        var wraps: [(user: String, id: RegistrationID, wrap: RecoveryWrap)] = []
        var missing: [(user: String, reason: String)] = []
        for r in records where r.protection == .encrypted && !r.state.isWipeCommitted {
            guard let stored = try await context.store.vaultKey(registration: r.id) else {
                missing.append((r.user, "no vault key is stored"))
                continue
            }
            if let wrap = stored.wrapped.recovery {
                wraps.append((r.user, r.id, wrap))
            } else {
                let reason =
                    context.keys.recoveryKey == nil
                    ? "no organisation recovery key is configured ([keys] recovery_public_key)"
                    : "its key has not been open since the recovery key was configured (it gets its recovery wrap at its next unlock)"
                missing.append((r.user, reason))
            }
        }
        if let user, wraps.isEmpty, missing.isEmpty { missing.append((user, "\(user) has no encrypted vault")) }
        return (wraps, missing)
    }

    /// Hands a recovered vault key to registration `id` of `user` (`Registration.recover`),
    /// in its turn: the registration it was read for, never another that now has the name.
    func recover(user: String, id: RegistrationID, key: [UInt8], newPasscode: String?, by caller: Caller) async throws -> Outcome {
        guard let now = try await context.store.registration(user) else { throw ManagerError.noSuchRegistration(user) }
        guard now.id == id else {
            throw ManagerError.actionFailed(
                "\(user) is now another registration (\(now.id), not \(id), whose key was recovered): nothing was changed; run lockwipectl recover again")
        }
        let result = try await registration(id: id, user: user).withTurn { turn in
            try await turn.registration.recover(in: turn, key: key, newPasscode: newPasscode, by: caller)
        }
        await reschedule()
        return result
    }
}
