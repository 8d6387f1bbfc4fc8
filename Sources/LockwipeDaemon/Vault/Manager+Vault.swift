import Crypto
import Foundation
import LockwipeCore
import LockwipeProtocol
import Logging

/// A vault key just made at registration: the raw key (wiped once registration is done)
/// and what the store keeps of it.
struct NewVault {
    var key: [UInt8]
    var stored: StoredVaultKey
}

/// Encrypted vaults: their keys, unlock with a passcode, the passcode's life, crypto-erase.
///
/// Who may unlock an encrypted vault (SPEC "Unlock needs re-authentication"):
/// - an administrator, always, with the user's passcode when one wraps the key;
/// - the user themselves, with their passcode (none with the default passcode), when the
///   vault was locked by `user` or `logout`, or found without its key at start-up (`resume`). A lock by the policy server or the offline
///   policy needs a successful check-in first: the unlock request makes one attempt, and a
///   contact that lifts the lock hands the vault back to its passcode. Without a server, or
///   after a lock by an administrator, only an administrator unlocks.
extension Manager {
    // MARK: Keys

    /// The machine key (the default passcode), read or created once.
    func machineKey() throws -> SymmetricKey {
        if let key = machineKeyCache { return key }
        let key = try MachineKey.loadOrCreate(stateDirectory: paths.stateDirectory)
        machineKeyCache = key
        return key
    }

    /// A fresh 512-bit vault key, wrapped by `passcode` (which must satisfy `policy`) or,
    /// without one, by the machine key where the policy allows the default passcode.
    func newVaultKey(passcode: String?, policy: PasscodePolicy, registration: String?, at now: Int64) throws -> NewVault {
        var key = try SecRandom.key(Fscrypt.keySize)
        do {
            let wrapped: WrappedKey
            if let passcode {
                let violations = policy.violations(of: passcode)
                if !violations.isEmpty { throw RegistrationRefusal("the passcode breaks the passcode policy: " + Self.describe(violations)) }
                wrapped = try KeyWrap.wrap(key, passcode: passcode, registration: registration)
            } else {
                guard policy.defaultPasswordAllowed else {
                    throw RegistrationRefusal(
                        "the passcode policy does not allow the default passcode (default_password_allowed = false): give the user's first passcode (lockwipectl register --passcode-stdin)")
                }
                wrapped = try KeyWrap.wrap(key, machineKey: try machineKey(), registration: registration)
            }
            let id = Fscrypt.KeyIdentifier(bytes: try Self.keyIdentifier(key))
            return NewVault(key: key, stored: StoredVaultKey(identifier: id, wrapped: wrapped, passcodeSetAt: passcode == nil ? nil : now))
        } catch {
            key.wipe()
            throw error
        }
    }

    /// The identifier the kernel derives for a v2 key: HKDF-SHA512 with the info
    /// "fscrypt\0" ‖ 1 (HKDF_CONTEXT_KEY_IDENTIFIER), 16 bytes. Lets registration check
    /// what the kernel reports without asking it first.
    static func keyIdentifier(_ key: [UInt8]) throws -> [UInt8] {
        let info = Array("fscrypt".utf8) + [0, 1]
        let derived = HKDF<SHA512>.deriveKey(inputKeyMaterial: SymmetricKey(data: key), info: info, outputByteCount: 16)
        return derived.withUnsafeBytes { Array($0) }
    }

    static func describe(_ violations: [PasscodePolicy.Violation]) -> String {
        violations.map(\.description).joined(separator: "; ")
    }

    func unwrapWithMachineKey(_ wrapped: WrappedKey, of r: RegistrationRecord) throws -> [UInt8] {
        try KeyWrap.unwrap(wrapped, machineKey: try machineKey(), registration: keyBinding(r))
    }

    /// What a vault key's wrap is bound to (AES-GCM associated data): the registration id.
    func keyBinding(_ r: RegistrationRecord) -> String? {
        r.id
    }

    /// Tries `passcode` on `r`'s key. The attempt is counted durably *before* it is tried
    /// (a right passcode resets the count), so nothing between a wrong guess and its answer
    /// can lose it. Reaching the policy's `retry_limit` wipes the vault (trigger `retry-limit`).
    /// Inside the back-off after wrong passcodes (`PasscodeBackoff`) the attempt is refused
    /// at once: not tried (no scrypt run), not counted.
    func openWithPasscode(_ r: RegistrationRecord, _ stored: StoredVaultKey, _ passcode: String, policy: PasscodePolicy, caller: Caller) async throws -> [UInt8] {
        let user = r.user
        let now = clock.now().wall
        if let at = PasscodeBackoff.standard.retryAt(failures: stored.failedAttempts, lastFailure: stored.lastFailedAt, now: now) {
            logger.warning("passcode attempt for the vault of \(user) refused: back-off after \(stored.failedAttempts) wrong passcodes", metadata: [
                "user": .string(user), "action": "unlock", "failed_attempts": "\(stored.failedAttempts)",
                "retry_at": .string(Timestamp.iso(at)), "peer_uid": "\(caller.credentials.uid)",
            ])
            throw ManagerError.notPermitted(
                "\(stored.failedAttempts) wrong passcodes in a row: try again in \(at - now) s (at \(Timestamp.iso(at))); "
                    + "this attempt was not tried and does not count")
        }
        let count = try store.recordFailedUnlock(user, at: now, event: nil)
        let wrapped = stored.wrapped
        let binding = keyBinding(r)
        do {
            let key = try await runBlocking { try KeyWrap.unwrap(wrapped, passcode: passcode, registration: binding) }
            try store.resetFailedUnlocks(user)
            return key
        } catch KeyWrapError.wrongPasscode {
            let limit = policy.retryLimit
            let trigger: Trigger = caller.isAdmin ? .admin : .user
            let detail = "wrong passcode from uid \(caller.credentials.uid) (\(count) in a row" + (limit > 0 ? " of \(limit) allowed)" : ")")
            // The back-off counts from the answer, not from the start of the scrypt run.
            try? store.append(event(user, .unlockFailed, trigger, detail, at: clock.now().wall), failedUnlockAt: clock.now().wall)
            logger.warning("wrong passcode for the vault of \(user)", metadata: [
                "message_id": MessageID.passcodeWrong.metadata, "user": .string(user), "action": "unlock",
                "failed_attempts": "\(count)", "retry_limit": "\(limit)", "peer_uid": "\(caller.credentials.uid)",
            ])
            if policy.retriesExhausted(failedAttempts: count) {
                let reason = "\(count) wrong passcodes in a row reached the passcode policy's retry_limit (\(limit))"
                let result = try? await wipeLocked(user: user, trigger: .retryLimit, reason: reason)
                let pending: String = result?.state == .wiped ? "" : " (the wipe is pending)"
                throw ManagerError.notPermitted("wrong passcode; \(reason): the vault of \(user) was wiped\(pending)")
            }
            let left: String = limit > 0 ? "; \(limit - count) left before the vault is wiped" : ""
            throw ManagerError.notPermitted("wrong passcode (\(count) failed in a row\(left))")
        } catch let error as KeyWrapError {
            throw ManagerError.actionFailed("cannot open the vault key of \(user): \(error)")
        }
    }

    /// Wraps a key of wrap format 1 (no associated data, from before issue 12) again,
    /// bound to its registration id (format 2), while it is open anyway: at an unlock, a
    /// start-up reopen or an unlock after a server contact. A passcode-wrapped key is wrapped
    /// under the same passcode (a new salt, one more scrypt run). A failure changes
    /// nothing (the old wrap stays, and opens) and is only logged.
    func bindToRegistration(_ r: RegistrationRecord, _ stored: StoredVaultKey, key: [UInt8], passcode: String?, trigger: Trigger) async {
        guard !stored.wrapped.isBound, let binding = keyBinding(r) else { return }
        do {
            let wrapped: WrappedKey
            switch stored.wrapped.wrapping {
            case .machine:
                wrapped = try KeyWrap.wrap(key, machineKey: try machineKey(), registration: binding)
            case .passcode:
                guard let passcode else { return }
                let parameters = stored.wrapped.scrypt ?? .standard
                wrapped = try await runBlocking { try KeyWrap.wrap(key, passcode: passcode, registration: binding, parameters: parameters) }
            }
            let now = clock.now().wall
            let detail = "vault key wrapped again, bound to registration \(binding) (wrap format \(KeyWrap.currentFormat))"
            let leftover = try store.rewrapVaultKey(r.user, wrapped, passcodeSetAt: stored.passcodeSetAt,
                                                    event: event(r.user, .keyRewrapped, trigger, detail, at: now))
            logger.info("\(detail) for \(r.user)", metadata: ["user": .string(r.user)])
            if let leftover { logger.error("\(leftover)", metadata: ["user": .string(r.user), "message_id": MessageID.actionFailed.metadata]) }
        } catch {
            logger.warning("could not wrap the vault key of \(r.user) again bound to its registration (it stays in wrap format 1): \(error)",
                           metadata: ["user": .string(r.user)])
        }
    }

    // MARK: Start-up

    /// After a reboot the kernel holds no vault keys, so an `active` encrypted vault is in
    /// fact locked. One the machine key wraps is opened again (the default passcode asks
    /// nobody); one a passcode wraps is recorded as locked (trigger `resume`) so that
    /// `status` tells the truth and its user can unlock it with the passcode.
    func reopenEncryptedVaults() async {
        for r in (try? store.registrations()) ?? [] where r.protection == .encrypted && r.state == .active {
            // A vault that cannot be opened (missing, replaced) is not "locked": it is
            // reported by `checkVaults`, and nothing here touches it.
            guard r.vaults.allSatisfy({ (try? VaultPath.open($0))?.close() != nil }), encryption.isLocked(r.vaults) else { continue }
            do {
                if try await unlockAfterContact(r) {
                    logger.info("re-added the vault key of \(r.user) (default passcode) after start-up", metadata: ["user": .string(r.user)])
                    continue
                }
                let reason = "the vault key was not in the kernel at start-up (reboot): unlock with the passcode"
                try store.commitLock(r.user, records: [], trigger: .resume, event: event(r.user, .lock, .resume, reason, at: clock.now().wall))
                logger.notice("\(r.user) is locked: \(reason)", metadata: journalFields(r, action: "lock", trigger: .resume, reason: reason, id: .locked))
            } catch {
                logger.error("cannot reopen the encrypted vault of \(r.user): \(error)", metadata: [
                    "user": .string(r.user), "message_id": MessageID.actionFailed.metadata,
                ])
            }
        }
    }

    // MARK: Unlock

    /// A user unlocking their own vault after a server or offline lock: one check-in
    /// attempt first (outside the user's turn, as every check-in), so that a server that
    /// lifts the lock hands the vault back to its passcode.
    /// Returns true when that contact already opened the vault (its key is wrapped by the
    /// machine key): then there is nothing left for the unlock to do.
    func checkInBeforeUserUnlock(user: String, caller: Caller) async throws -> Bool {
        guard !caller.isAdmin, configuration.server.isConfigured, fetcher != nil,
              let r = try store.registration(user), r.protection == .encrypted, r.state.isLockCommitted,
              r.lockTrigger == .server || r.lockTrigger == .offline else { return false }
        _ = await checkIn(user: user, purpose: .requested)
        return try store.registration(user)?.state == .active
    }

    func unlockEncrypted(_ r: RegistrationRecord, caller: Caller, passcode: String?, newPasscode: String?) async throws -> ActionResult {
        let user = r.user
        guard r.state.isLockCommitted else { throw ManagerError.actionFailed("\(user) is not locked (state: \(r.state.rawValue))") }
        if !caller.isAdmin {
            switch r.lockTrigger {
            case .user?, .logout?, .resume?:
                break
            case .server?, .offline?:
                let by = r.lockTrigger == .server ? "the policy server" : "the offline policy"
                throw ManagerError.notPermitted(configuration.server.isConfigured
                    ? "\(user) was locked by \(by), and the check-in just tried did not lift the lock (see lockwipectl status); try again once the server can be reached, or ask an administrator"
                    : "\(user) was locked by \(by) and no policy server is configured: an administrator must unlock it")
            default:
                throw ManagerError.notPermitted("\(user) was locked by an administrator: an administrator must unlock it")
            }
        }
        guard let stored = try store.vaultKey(user) else {
            throw ManagerError.actionFailed("no key is stored for the encrypted vault of \(user); it cannot be unlocked (wipe it to start again)")
        }
        let policy = passcodePolicy(for: r).policy
        let now = clock.now().wall
        var key: [UInt8]
        var notes: [String] = []
        var rewrapped = false
        switch stored.wrapped.wrapping {
        case .machine:
            if newPasscode != nil {
                throw ManagerError.invalidParameter("new_passcode", reason: "\(user) has no passcode yet; set one with lockwipectl passcode set")
            }
            do {
                key = try unwrapWithMachineKey(stored.wrapped, of: r)
            } catch {
                throw failure(user, "unlock", error)
            }
            if !policy.defaultPasswordAllowed { notes.append("the passcode policy no longer allows the default passcode: set one (lockwipectl passcode set)") }
        case .passcode:
            guard let passcode else {
                throw ManagerError.passcodeRequired(
                    user: user, reason: "the vault key of \(user) is protected by a passcode: give it (lockwipectl unlock prompts for it, or reads it with --passcode-stdin)")
            }
            if let newPasscode {
                let violations = policy.violations(of: newPasscode)
                if !violations.isEmpty { throw ManagerError.actionFailed("the new passcode breaks the passcode policy: " + Self.describe(violations)) }
            }
            key = try await openWithPasscode(r, stored, passcode, policy: policy, caller: caller)
            if let setAt = stored.passcodeSetAt, policy.isExpired(setAt: setAt, now: now) {
                guard let newPasscode else {
                    key.wipe()
                    throw ManagerError.passcodeExpired(
                        user: user, reason: "passcode expired: change it (it was set \(Timestamp.iso(setAt)); expiration_days = \(policy.expirationDays)): "
                            + "lockwipectl unlock --user \(user) --new-passcode-stdin, or on a terminal answer the prompts for a new one")
                }
                guard newPasscode != passcode else {
                    key.wipe()
                    throw ManagerError.actionFailed("the new passcode must differ from the expired one")
                }
                try await rewrap(r, key: key, new: newPasscode, kind: .passcodeChanged, caller: caller, detail: "expired passcode replaced at unlock")
                rewrapped = true
                notes.append("expired passcode replaced")
            } else if newPasscode != nil {
                try await rewrap(r, key: key, new: newPasscode!, kind: .passcodeChanged, caller: caller, detail: "passcode changed at unlock")
                rewrapped = true
                notes.append("passcode changed")
            }
        }
        defer { key.wipe() }
        if !rewrapped {
            await bindToRegistration(r, stored, key: key, passcode: passcode, trigger: caller.isAdmin ? .admin : .user)
        }
        let records = try store.lockRecords(user)
        let keyCopy = key
        let dirs = r.vaults
        let encryption = self.encryption
        do {
            try await runBlocking { try encryption.unlock(records, directories: dirs, key: keyCopy) }
        } catch {
            throw vaultFailure(r, "unlock", error)
        }
        // An administrator's unlock is a re-authentication and restarts the offline clock
        // (as for the permission lock); a user's own unlock of a user or logout lock is not.
        let reading = clock.now()
        let trigger: Trigger = caller.isAdmin ? .admin : .user
        let reason = caller.isAdmin
            ? "unlocked by administrator uid \(caller.credentials.uid); offline clock restarted"
            : "unlocked by the user with their passcode"
        try store.commitUnlock(user, clock: caller.isAdmin ? .started(at: reading) : nil, event: event(user, .unlock, trigger, reason, at: reading.wall))
        var meta = journalFields(r, action: "unlock", trigger: trigger, reason: reason, id: .unlocked)
        meta["peer_uid"] = "\(caller.credentials.uid)"
        meta["peer_pid"] = "\(caller.credentials.pid)"
        meta["protection"] = "encrypted"
        logger.notice("unlocked \(user)", metadata: meta)
        var detail = caller.isAdmin ? "unlocked (encryption key added); offline clock restarted" : "unlocked (encryption key added)"
        if !notes.isEmpty { detail += "; " + notes.joined(separator: "; ") }
        return ActionResult(user: user, action: "unlock", state: .active, detail: detail)
    }

    /// What a successful server contact does to a server or offline lock of `r`: the
    /// permission lock is lifted; an encrypted vault is opened when the machine key wraps
    /// its key. Returns false when only the user's passcode can open it: the server's lock
    /// is lifted, the vault stays locked until its user unlocks it (trigger becomes `user`).
    func unlockAfterContact(_ r: RegistrationRecord) async throws -> Bool {
        guard r.protection == .encrypted else {
            do {
                try protection.unlock(try store.lockRecords(r.user), directories: r.vaults, key: nil)
            } catch {
                throw vaultFailure(r, "unlock", error)
            }
            return true
        }
        guard let stored = try store.vaultKey(r.user), stored.wrapped.wrapping == .machine else { return false }
        let key = try unwrapWithMachineKey(stored.wrapped, of: r)
        await bindToRegistration(r, stored, key: key, passcode: nil, trigger: .resume)
        let dirs = r.vaults
        let encryption = self.encryption
        try await runBlocking {
            var k = key
            defer { k.wipe() }
            try encryption.unlock([], directories: dirs, key: k)
        }
        return true
    }

    // MARK: Passcode

    /// `passcode set` (no `current`: only while the machine key wraps the key) and
    /// `passcode change` (with the current passcode, which counts toward `retry_limit`).
    /// Works locked or unlocked: only the wrapped key changes.
    public func setPasscode(user: String, current: String?, new: String, by caller: Caller) async throws -> ActionResult {
        try await withUser(user) {
            guard let r = try store.registration(user) else { throw ManagerError.noSuchRegistration(user) }
            guard r.protection == .encrypted else {
                throw ManagerError.actionFailed("\(user) has no encrypted vault (protection: permissions): a passcode protects only an encrypted vault's key")
            }
            guard !r.state.isWipeCommitted else { throw ManagerError.actionFailed("\(user) is \(r.state.rawValue)") }
            guard let stored = try store.vaultKey(user) else { throw ManagerError.actionFailed("no key is stored for the vault of \(user)") }
            let policy = passcodePolicy(for: r).policy
            let violations = policy.violations(of: new)
            if !violations.isEmpty { throw ManagerError.actionFailed("the new passcode breaks the passcode policy: " + Self.describe(violations)) }
            var key: [UInt8]
            if let current {
                guard stored.wrapped.wrapping == .passcode else {
                    throw ManagerError.actionFailed("\(user) has no passcode yet (the machine key wraps the vault key): use lockwipectl passcode set")
                }
                guard current != new else { throw ManagerError.actionFailed("the new passcode is the same as the current one") }
                key = try await openWithPasscode(r, stored, current, policy: policy, caller: caller)
            } else {
                guard stored.wrapped.wrapping == .machine else {
                    throw ManagerError.actionFailed(
                        "\(user) already has a passcode: change it with lockwipectl passcode change (needs the current one); a forgotten passcode can only be reset by wiping the vault")
                }
                do {
                    key = try unwrapWithMachineKey(stored.wrapped, of: r)
                } catch {
                    throw failure(user, "passcode set", error)
                }
            }
            defer { key.wipe() }
            let kind: EventKind = current == nil ? .passcodeSet : .passcodeChanged
            try await rewrap(r, key: key, new: new, kind: kind, caller: caller, detail: current == nil ? "passcode set (was the default passcode)" : "passcode changed")
            var detail = current == nil ? "passcode set; the vault key is now wrapped by it" : "passcode changed"
            if policy.expirationDays > 0 { detail += "; expires in \(policy.expirationDays)d" }
            return ActionResult(user: user, action: kind.rawValue, state: r.state, detail: detail)
        }
    }

    /// Wraps `key` under `new` and replaces the stored copy (the old key file is
    /// overwritten in place and unlinked once the new one is committed).
    private func rewrap(_ r: RegistrationRecord, key: [UInt8], new: String, kind: EventKind, caller: Caller, detail: String) async throws {
        let wrapped: WrappedKey
        do {
            let binding = keyBinding(r)
            wrapped = try await runBlocking { try KeyWrap.wrap(key, passcode: new, registration: binding) }
        } catch {
            throw failure(r.user, kind.rawValue, error)
        }
        let now = clock.now().wall
        let leftover = try store.rewrapVaultKey(r.user, wrapped, passcodeSetAt: now,
                                                event: event(r.user, kind, caller.isAdmin ? .admin : .user, "\(detail) by uid \(caller.credentials.uid)", at: now))
        if let leftover {
            logger.error("\(kind.rawValue) for \(r.user): \(leftover)", metadata: ["user": .string(r.user), "message_id": MessageID.actionFailed.metadata])
        }
        logger.notice("\(detail) for \(r.user)", metadata: [
            "message_id": MessageID.passcodeChanged.metadata, "user": .string(r.user), "action": .string(kind.rawValue),
            "peer_uid": "\(caller.credentials.uid)",
        ])
    }

    // MARK: Crypto-erase

    /// Destroys the vault key of a committed wipe: the lock already removed it from the
    /// kernel (checked here), and every wrapped copy is deleted from the store. Returns when
    /// and how long after the request, or nil when the key is not verifiably gone from
    /// the kernel (files held open by processes that were not ended): the wrapped copies
    /// are destroyed anyway, and the wipe then falls back to overwriting, which cannot open
    /// such files and so stays incomplete and pending until they close.
    func destroyVaultKey(_ r: RegistrationRecord, trigger: Trigger, reason: String, requested: ContinuousClock.Instant) -> (at: Int64, seconds: Double?)? {
        let user = r.user
        // Decided from the key itself (key status on the recorded vault's filesystem), never
        // from the path: a vault that cannot be opened is not known to be locked.
        let kernelGone = encryption.isLocked(r.vaults)
        let elapsed = ContinuousClock.now - requested
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let now = clock.now().wall
        do {
            let detail = "vault key destroyed (removed from the kernel, wrapped copy overwritten and deleted) \(String(format: "%.3f", seconds)) s after the wipe request"
            if try store.destroyVaultKey(user, at: now, secondsSinceRequest: seconds, event: event(user, .keyDestroyed, trigger, detail, at: now)) {
                var meta = journalFields(r, action: "wipe", trigger: trigger, reason: reason, id: .keyDestroyed)
                meta["key_destroyed_seconds"] = .string(String(format: "%.3f", seconds))
                meta["key_in_kernel"] = kernelGone ? "absent" : "still in use"
                logger.notice("vault key of \(user) destroyed: its data is unrecoverable", metadata: meta)
            }
        } catch {
            logger.critical("cannot destroy the wrapped vault key; overwriting the files instead",
                            metadata: ["user": .string(user), "error": .string("\(error)"), "message_id": MessageID.actionFailed.metadata])
            return nil
        }
        guard kernelGone else {
            logger.error("the vault key of \(user) is still in kernel memory: files in the vault are held open by processes that were not ended",
                         metadata: ["user": .string(user), "message_id": MessageID.actionFailed.metadata])
            return nil
        }
        return (try? store.keyDestroyed(user)) ?? (now, seconds)
    }

    // MARK: Status

    /// The key fields of `status` for an encrypted registration.
    func vaultStatus(_ r: RegistrationRecord, into info: inout RegistrationInfo) {
        guard r.protection == .encrypted, let stored = try? store.vaultKeyStatus(r.user) else { return }
        let policy = passcodePolicy(for: r).policy
        info.keyWrapping = stored.wrapping.rawValue
        if stored.wrapping == .passcode, policy.expirationDays > 0, let setAt = stored.passcodeSetAt {
            info.passcodeExpires = Timestamp.iso(setAt + Int64(policy.expirationDays) * 86_400)
        }
        info.failedUnlocks = stored.failedAttempts
        info.retryLimit = policy.retryLimit
    }
}
