import Foundation
import LockwipeCore
import LockwipeVaultIO
import Logging

/// The unlock of one registration: who may is decided by `UnlockRule` (LockwipeCore), what
/// it takes is done here, in its turn. The key work (scrypt, the machine key) runs on the
/// shared pool (`VaultKeys`), the filesystem work in a vault call; the vault opened without
/// its user after a contact or a reboot (`openWithoutPasscode`, `reopenAfterStart`).
extension Registration {
    func unlockRequest(_ r: RegistrationRecord, _ caller: Caller) -> UnlockRule.Request {
        UnlockRule.Request(
            user: r.user, byAdmin: caller.isAdmin, protection: r.protection, state: r.state, lockTrigger: r.lockTrigger,
            serverConfigured: context.configuration.server.isConfigured, liftable: r.lockLiftable)
    }

    /// The unlock itself, in the registration's turn (any check-in it needed was made before).
    nonisolated(nonsending) func unlock(in turn: borrowing RegistrationTurn, caller: Caller, passcode: String?, newPasscode: String?) async throws -> Outcome {
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
        try await liftLock(r, context.permissions, records: try await context.store.lockRecords(registration: id), key: nil, in: turn)
        try await commitUnlock(r, by: caller, in: turn)
        return Outcome(user: user, operation: .unlock, state: .active, reason: "unlocked; offline clock restarted")
    }

    /// Opens the key of an encrypted vault the caller may unlock (`UnlockRule.access`),
    /// as `UnlockRule.opening` and `afterPasscode` say, and adds it to the kernel.
    private nonisolated(nonsending) func unlockEncrypted(in turn: borrowing RegistrationTurn, caller: Caller, passcode: String?, newPasscode: String?) async throws -> Outcome {
        let r = turn.record
        let user = r.user
        guard let stored = try await context.store.vaultKey(registration: id) else {
            throw ManagerError.actionFailed("no key is stored for the encrypted vault of \(user); it cannot be unlocked (wipe it to start again)")
        }
        let policy = context.passcodePolicy(for: r).policy
        let now = context.clock.now().wall
        var key: [UInt8]
        var notes: [String] = []
        var rewrapped = false
        switch UnlockRule.opening(user: user, wrapping: stored.wrapped.wrapping == .machine ? .machine : .passcode, passcode: passcode, newPasscode: newPasscode) {
        case .refused(let refusal):
            throw ManagerError(refusal, user: user)
        case .withMachineKey:
            do {
                key = try await context.keys.openWithMachineKey(stored.wrapped, binding: keyBinding(r))
            } catch {
                throw context.failure(user, "unlock", error)
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
                    try await rewrap(r, key: key, new: new, kind: .passcodeChanged, caller: caller, detail: detail, in: turn)
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
            await bindToRegistration(r, stored, key: key, passcode: passcode, trigger: caller.isAdmin ? .admin : .user, in: turn)
        }
        try await liftLock(r, context.encryption, records: try await context.store.lockRecords(registration: id), key: key, in: turn)
        try await commitUnlock(r, by: caller, metadata: ["protection": "encrypted"], in: turn)
        var detail = caller.isAdmin ? "unlocked (encryption key added); offline clock restarted" : "unlocked (encryption key added)"
        if !notes.isEmpty { detail += "; " + notes.joined(separator: "; ") }
        return Outcome(user: user, operation: .unlock, state: .active, reason: detail)
    }

    /// Lifts the lock of `r` from its vaults (a vault call, after taking back what was
    /// mounted over them in the daemon's view); a vault that cannot be reached as
    /// registered is reported (`vaultFailure`), and nothing is touched.
    nonisolated(nonsending) func liftLock(
        _ r: RegistrationRecord, _ lock: any VaultProtecting, records: [LockRecord], key: [UInt8]?, in turn: borrowing RegistrationTurn
    ) async throws {
        let vaults = r.vaults
        do {
            let takebacks = try await context.vaultCalls.run(for: vaultOwner, "the unlock") {
                let takebacks = vaults.map(VaultMountTakeback.takeBack)
                try lock.unlock(records, directories: vaults, key: key)
                return takebacks
            }
            journalTakebacks(r, takebacks, action: "unlock")
        } catch {
            throw await context.vaultFailure(r, "unlock", error, in: turn)
        }
    }

    /// Records an unlock the filesystem has seen through: the state, the history event and
    /// the journal. An administrator's unlock is a re-authentication and restarts the
    /// offline clock; a user's own unlock of a user or logout lock is not.
    private nonisolated(nonsending) func commitUnlock(
        _ r: RegistrationRecord, by caller: Caller, metadata extra: Logger.Metadata = [:], in turn: borrowing RegistrationTurn
    ) async throws {
        let reading = context.clock.now()
        let trigger: Trigger = caller.isAdmin ? .admin : .user
        let reason =
            caller.isAdmin
            ? "unlocked by administrator uid \(caller.credentials.uid); offline clock restarted"
            : "unlocked by the user with their passcode"
        try await context.store.commitUnlock(
            turn.held, clock: caller.isAdmin ? .started(at: reading) : nil, event: context.event(r.user, .unlock, trigger, reason, at: reading.wall))
        var meta = context.journalFields(r, action: "unlock", trigger: trigger, reason: reason, id: .unlocked)
        meta["peer_uid"] = "\(caller.credentials.uid)"
        meta["peer_pid"] = "\(caller.credentials.pid)"
        meta.merge(extra) { _, new in new }
        context.logger.notice("unlocked \(r.user)", metadata: meta)
    }

    /// What a successful server contact does to a server or offline lock of `r`: the
    /// permission lock is lifted; an encrypted vault is opened when the machine key wraps
    /// its key. Returns false when only the user's passcode can open it: the server's lock
    /// is lifted, the vault stays locked until its user unlocks it (trigger becomes `user`).
    nonisolated(nonsending) func openWithoutPasscode(_ r: RegistrationRecord, in turn: borrowing RegistrationTurn) async throws -> Bool {
        guard r.protection == .encrypted else {
            try await liftLock(r, context.permissions, records: try await context.store.lockRecords(registration: r.id), key: nil, in: turn)
            return true
        }
        guard let stored = try await context.store.vaultKey(registration: r.id), stored.wrapped.wrapping == .machine else { return false }
        let key = try await context.keys.openWithMachineKey(stored.wrapped, binding: keyBinding(r))
        await bindToRegistration(r, stored, key: key, passcode: nil, trigger: .resume, in: turn)
        let dirs = r.vaults
        let encryption = context.encryption
        try await context.vaultCalls.run(for: vaultOwner, "adding the vault key") {
            var k = key
            defer { k.wipe() }
            try encryption.unlock([], directories: dirs, key: k)
        }
        return true
    }

    /// After a reboot (the start-up pass, `Registration.startUp`): reopens this registration's encrypted
    /// vault when the machine key wraps its key, or records it locked (trigger `resume`).
    nonisolated(nonsending) func reopenAfterStart(in turn: borrowing RegistrationTurn) async {
        let r = turn.record
        guard r.protection == .encrypted, r.state == .active else { return }
        // A vault that cannot be opened (missing, replaced) is not "locked": it is
        // reported by the start-up check of vaults, and nothing here touches it.
        let (vaults, encryption) = (r.vaults, context.encryption)
        let keyGone: Bool
        do {
            keyGone = try await context.vaultCalls.run(for: vaultOwner, "the start-up check") {
                vaults.allSatisfy { v in
                    do {
                        try VaultPath.open(v).close()
                        return true
                    } catch {
                        return false  // not "locked": the start-up check of vaults reports it
                    }
                } && encryption.isLocked(vaults)
            }
        } catch {
            await context.vaultStalled(r, "start-up check", error, in: turn)
            return
        }
        guard keyGone else { return }
        do {
            let reason: String
            do {
                if try await openWithoutPasscode(r, in: turn) {
                    context.logger.info("re-added the vault key of \(r.user) (default passcode) after start-up", metadata: ["user": .string(r.user)])
                    return
                }
                reason = "the vault key was not in the kernel at start-up (reboot): unlock with the passcode"
            } catch let error as KeyUnavailable {
                // Fails closed: recorded locked, so that status says so and nothing acts as if it were open.
                reason = "the vault key was not in the kernel at start-up, and \(error)"
            }
            try await context.store.commitLock(
                turn.held, records: [], trigger: .resume, event: context.event(r.user, .lock, .resume, reason, at: context.clock.now().wall))
            context.logger.notice("\(r.user) is locked: \(reason)", metadata: context.journalFields(r, action: "lock", trigger: .resume, reason: reason, id: .locked))
        } catch {
            context.logger.error(
                "cannot reopen the encrypted vault of \(r.user): \(error)",
                metadata: [
                    "user": .string(r.user), "message_id": MessageID.actionFailed.metadata,
                ])
        }
    }
}
