import Foundation
import LockwipeCore
import LockwipeProtocol
import LockwipeVaultIO
import Logging

/// Unlock: who may is decided by `UnlockRule` (LockwipeCore), what it takes is done here.
/// The key work (scrypt, the machine key) runs on the shared pool (`VaultKeys`), the
/// filesystem work of an unlock too (`BlockingPool`); the registration's turn is
/// held throughout, except for the one check-in a user's unlock of a server or offline
/// lock makes first.
extension Manager {
    // MARK: Who may unlock

    func unlockRequest(_ r: RegistrationRecord, _ caller: Caller) -> UnlockRule.Request {
        UnlockRule.Request(
            user: r.user, byAdmin: caller.isAdmin, protection: r.protection, state: r.state, lockTrigger: r.lockTrigger,
            serverConfigured: configuration.server.isConfigured, liftable: r.lockLiftable)
    }

    /// A user unlocking their own vault after a server or offline lock that is not liftable
    /// yet: one check-in attempt first (outside the registration's turn, as every check-in),
    /// so that a contact makes the lock liftable (her passcode then lifts it, `UnlockRule`),
    /// or, with `lift_after_contact = "immediately"`, lifts it or hands it back to the passcode.
    /// Returns true when that contact already opened the vault (its key is wrapped by the
    /// machine key): then there is nothing left for the unlock to do.
    func checkInBeforeUserUnlock(user: String, caller: Caller) async throws -> Bool {
        guard fetcher != nil, let r = try await store.registration(user), case .checkInFirst = UnlockRule.access(unlockRequest(r, caller)) else { return false }
        _ = await checkIn(user: user, purpose: .requested)
        return try await store.registration(user)?.state == .active
    }

    /// The unlock itself, in the registration's turn (any check-in it needed was made before).
    func unlock(in turn: borrowing RegistrationTurn, caller: Caller, passcode: String?, newPasscode: String?) async throws -> ActionResult {
        let r = turn.record
        let user = r.user
        switch UnlockRule.access(unlockRequest(r, caller)) {
        case .allowed: break
        case .refused(let refusal), .checkInFirst(otherwise: let refusal):
            // The one refusal for a registration that is not locked is its state's.
            if refusal.kind == .actionFailed, !r.state.isLockCommitted { throw ManagerError.wrongState(user: user, current: r.state, reason: refusal.message) }
            throw ManagerError(refusal, user: user)
        }
        if r.protection == .encrypted {
            return try await unlockEncrypted(in: turn, caller: caller, passcode: passcode, newPasscode: newPasscode)
        }
        try await liftLock(r, protection, records: try await store.lockRecords(user), key: nil)
        try await commitUnlock(r, by: caller)
        return ActionResult(user: user, action: "unlock", state: .active, detail: "unlocked; offline clock restarted")
    }

    // MARK: Encrypted vaults

    /// Opens the key of an encrypted vault the caller may unlock (`UnlockRule.access`),
    /// as `UnlockRule.opening` and `afterPasscode` say, and adds it to the kernel.
    private func unlockEncrypted(in turn: borrowing RegistrationTurn, caller: Caller, passcode: String?, newPasscode: String?) async throws -> ActionResult {
        let r = turn.record
        let user = r.user
        guard let stored = try await store.vaultKey(user) else {
            throw ManagerError.actionFailed("no key is stored for the encrypted vault of \(user); it cannot be unlocked (wipe it to start again)")
        }
        let policy = passcodePolicy(for: r).policy
        let now = clock.now().wall
        var key: [UInt8]
        var notes: [String] = []
        var rewrapped = false
        switch UnlockRule.opening(user: user, wrapping: stored.wrapped.wrapping == .machine ? .machine : .passcode, passcode: passcode, newPasscode: newPasscode) {
        case .refused(let refusal):
            throw ManagerError(refusal, user: user)
        case .withMachineKey:
            do {
                key = try await keys.openWithMachineKey(stored.wrapped, binding: keyBinding(r))
            } catch {
                throw failure(user, "unlock", error)
            }
            if !policy.defaultPasswordAllowed { notes.append("the passcode policy no longer allows the default passcode: set one (lockwipectl passcode set)") }
        case .withPasscode(let passcode):
            if let newPasscode, let problem = policy.problem(with: newPasscode) {
                throw ManagerError.actionFailed("the new passcode breaks the passcode policy: " + problem)
            }
            key = try await openWithPasscode(in: turn, stored, passcode, policy: policy, caller: caller)
            var expired: (setAt: String, expirationDays: Int)?
            if let setAt = stored.passcodeSetAt, policy.isExpired(setAt: setAt, now: now) {
                expired = (Timestamp.iso(setAt), policy.expirationDays)
            }
            switch UnlockRule.afterPasscode(user: user, passcode: passcode, newPasscode: newPasscode, expired: expired) {
            case .keep:
                break
            case .refused(let refusal):
                key.wipe()
                throw ManagerError(refusal, user: user)
            case .rewrap(let new, let detail, let note):
                do {
                    try await rewrap(r, key: key, new: new, kind: .passcodeChanged, caller: caller, detail: detail)
                } catch {
                    key.wipe()
                    throw error
                }
                rewrapped = true
                notes.append(note)
            }
        }
        defer { key.wipe() }
        if !rewrapped {
            await bindToRegistration(r, stored, key: key, passcode: passcode, trigger: caller.isAdmin ? .admin : .user)
        }
        try await liftLock(r, encryption, records: try await store.lockRecords(user), key: key)
        try await commitUnlock(r, by: caller, metadata: ["protection": "encrypted"])
        var detail = caller.isAdmin ? "unlocked (encryption key added); offline clock restarted" : "unlocked (encryption key added)"
        if !notes.isEmpty { detail += "; " + notes.joined(separator: "; ") }
        return ActionResult(user: user, action: "unlock", state: .active, detail: detail)
    }

    /// Lifts the lock of `r` from its vaults (a vault call, after taking back what was
    /// mounted over them in the daemon's view); a vault that cannot be reached as
    /// registered is reported (`vaultFailure`), and nothing is touched.
    func liftLock(_ r: RegistrationRecord, _ lock: any VaultProtecting, records: [LockRecord], key: [UInt8]?) async throws {
        let vaults = r.vaults
        do {
            let takebacks = try await vaultCalls.run(user: r.user, "the unlock") {
                let takebacks = vaults.map(VaultMountTakeback.takeBack)
                try lock.unlock(records, directories: vaults, key: key)
                return takebacks
            }
            journalTakebacks(r, takebacks, action: "unlock")
        } catch {
            throw await vaultFailure(r, "unlock", error)
        }
    }

    /// Records an unlock the filesystem has seen through: the state, the history event and
    /// the journal. An administrator's unlock is a re-authentication and restarts the
    /// offline clock; a user's own unlock of a user or logout lock is not.
    private func commitUnlock(_ r: RegistrationRecord, by caller: Caller, metadata extra: Logger.Metadata = [:]) async throws {
        let reading = clock.now()
        let trigger: Trigger = caller.isAdmin ? .admin : .user
        let reason =
            caller.isAdmin
            ? "unlocked by administrator uid \(caller.credentials.uid); offline clock restarted"
            : "unlocked by the user with their passcode"
        try await store.commitUnlock(r.user, clock: caller.isAdmin ? .started(at: reading) : nil, event: event(r.user, .unlock, trigger, reason, at: reading.wall))
        var meta = journalFields(r, action: "unlock", trigger: trigger, reason: reason, id: .unlocked)
        meta["peer_uid"] = "\(caller.credentials.uid)"
        meta["peer_pid"] = "\(caller.credentials.pid)"
        meta.merge(extra) { _, new in new }
        logger.notice("unlocked \(r.user)", metadata: meta)
    }

    /// What a successful server contact does to a server or offline lock of `r`: the
    /// permission lock is lifted; an encrypted vault is opened when the machine key wraps
    /// its key. Returns false when only the user's passcode can open it: the server's lock
    /// is lifted, the vault stays locked until its user unlocks it (trigger becomes `user`).
    func unlockAfterContact(_ r: RegistrationRecord) async throws -> Bool {
        guard r.protection == .encrypted else {
            try await liftLock(r, protection, records: try await store.lockRecords(r.user), key: nil)
            return true
        }
        guard let stored = try await store.vaultKey(r.user), stored.wrapped.wrapping == .machine else { return false }
        let key = try await keys.openWithMachineKey(stored.wrapped, binding: keyBinding(r))
        await bindToRegistration(r, stored, key: key, passcode: nil, trigger: .resume)
        let dirs = r.vaults
        let encryption = self.encryption
        try await vaultCalls.run(user: r.user, "adding the vault key") {
            var k = key
            defer { k.wipe() }
            try encryption.unlock([], directories: dirs, key: k)
        }
        return true
    }

    // MARK: Start-up

    /// After a reboot the kernel holds no vault keys, so an `active` encrypted vault is in
    /// fact locked. One the machine key wraps is opened again (the default passcode asks
    /// nobody); one a passcode wraps is recorded as locked (trigger `resume`) so that
    /// `status` tells the truth and its user can unlock it with the passcode.
    func reopenEncryptedVaults() async {
        for r in await registrationsOrLog("the start-up reopen of encrypted vaults") where r.protection == .encrypted && r.state == .active {
            // A vault that cannot be opened (missing, replaced) is not "locked": it is
            // reported by `checkVaults`, and nothing here touches it.
            let (vaults, encryption) = (r.vaults, self.encryption)
            let keyGone: Bool
            do {
                keyGone = try await vaultCalls.run(user: r.user, "the start-up check") {
                    vaults.allSatisfy { v in
                        do {
                            try VaultPath.open(v).close()
                            return true
                        } catch {
                            return false  // not "locked": `checkVaults` reports it
                        }
                    } && encryption.isLocked(vaults)
                }
            } catch {
                await vaultStalled(r, "start-up check", error)
                continue
            }
            guard keyGone else { continue }
            do {
                if try await unlockAfterContact(r) {
                    logger.info("re-added the vault key of \(r.user) (default passcode) after start-up", metadata: ["user": .string(r.user)])
                    continue
                }
                let reason = "the vault key was not in the kernel at start-up (reboot): unlock with the passcode"
                try await store.commitLock(r.user, records: [], trigger: .resume, event: event(r.user, .lock, .resume, reason, at: clock.now().wall))
                logger.notice("\(r.user) is locked: \(reason)", metadata: journalFields(r, action: "lock", trigger: .resume, reason: reason, id: .locked))
            } catch {
                logger.error(
                    "cannot reopen the encrypted vault of \(r.user): \(error)",
                    metadata: [
                        "user": .string(r.user), "message_id": MessageID.actionFailed.metadata,
                    ])
            }
        }
    }
}

extension ManagerError {
    /// The domain error for a refusal of `UnlockRule`.
    init(_ refusal: UnlockRule.Refusal, user: String) {
        switch refusal.kind {
        case .notPermitted: self = .notPermitted(refusal.message)
        case .actionFailed: self = .actionFailed(refusal.message)
        case .invalidParameter(let name): self = .invalidParameter(name, reason: refusal.message)
        case .passcodeRequired: self = .passcodeRequired(user: user, reason: refusal.message)
        case .passcodeExpired: self = .passcodeExpired(user: user, reason: refusal.message)
        }
    }
}
