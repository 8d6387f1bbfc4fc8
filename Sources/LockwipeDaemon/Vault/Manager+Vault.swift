import Foundation
import LockwipeBase
import LockwipeCore
import LockwipeProtocol
import LockwipeVaultIO
import Logging

/// Encrypted vaults: the passcode's tries and life, wrapping a key again, and the key
/// fields of `status`. The key material itself is `VaultKeys`' (all of its blocking work
/// off the actor); who may unlock is `UnlockRule`'s (Manager+Unlock.swift).
extension Manager {
    // MARK: Keys

    /// What a vault key's wrap is bound to (AES-GCM associated data): the registration id.
    func keyBinding(_ r: RegistrationRecord) -> String? {
        r.id
    }

    /// Tries `passcode` on `r`'s key. The attempt is counted durably *before* it is tried
    /// (a right passcode resets the count), so nothing between a wrong guess and its answer
    /// can lose it. Reaching the policy's `retry_limit` wipes the vault (trigger `retry-limit`).
    /// Inside the back-off after wrong passcodes (`PasscodeBackoff`) the attempt is refused
    /// at once: not tried (no scrypt run), not counted.
    func openWithPasscode(
        in turn: borrowing RegistrationTurn, _ stored: StoredVaultKey, _ passcode: String, policy: PasscodePolicy, caller: Caller
    ) async throws -> [UInt8] {
        let r = turn.record
        let user = r.user
        let now = clock.now().wall
        if let at = PasscodeBackoff.standard.retryAt(failures: stored.failedAttempts, lastFailure: stored.lastFailedAt, now: now) {
            logger.warning(
                "passcode attempt for the vault of \(user) refused: back-off after \(stored.failedAttempts) wrong passcodes",
                metadata: [
                    "user": .string(user), "action": "unlock", "failed_attempts": "\(stored.failedAttempts)",
                    "retry_at": .string(Timestamp.iso(at)), "peer_uid": "\(caller.credentials.uid)",
                ])
            throw ManagerError.notPermitted(
                "\(stored.failedAttempts) wrong passcodes in a row: try again in \(at - now) s (at \(Timestamp.iso(at))); "
                    + "this attempt was not tried and does not count")
        }
        let count = try await store.recordFailedUnlock(user, at: now, event: nil)
        let wrapped = stored.wrapped
        let binding = keyBinding(r)
        do {
            let key = try await keys.open(wrapped, passcode: passcode, binding: binding)
            try await store.resetFailedUnlocks(user)
            return key
        } catch KeyWrapError.wrongPasscode {
            let limit = policy.retryLimit
            let trigger: Trigger = caller.isAdmin ? .admin : .user
            let detail = "wrong passcode from uid \(caller.credentials.uid) (\(count) in a row" + (limit > 0 ? " of \(limit) allowed)" : ")")
            // The back-off counts from the answer, not from the start of the scrypt run.
            do {
                try await store.append(event(user, .unlockFailed, trigger, detail, at: clock.now().wall), failedUnlockAt: clock.now().wall)
            } catch {
                // Fail the request: a wrong passcode that is not counted must not be free to retry.
                throw stateFailure(user, "unlock (a wrong passcode was given and could not be counted)", error)
            }
            logger.warning(
                "wrong passcode for the vault of \(user)",
                metadata: [
                    "message_id": MessageID.passcodeWrong.metadata, "user": .string(user), "action": "unlock",
                    "failed_attempts": "\(count)", "retry_limit": "\(limit)", "peer_uid": "\(caller.credentials.uid)",
                ])
            if policy.retriesExhausted(failedAttempts: count) {
                let reason = "\(count) wrong passcodes in a row reached the passcode policy's retry_limit (\(limit))"
                let pending: String
                do {
                    let result = try await wipe(
                        in: turn, trigger: .retryLimit, reason: reason, requester: WipeRequester(peerUID: caller.credentials.uid, retryLimit: limit))
                    pending = result.state == .wiped ? "" : " (the wipe is pending)"
                } catch {
                    pending = " (\(failure(user, "wipe", error).message))"
                }
                throw ManagerError.notPermitted("wrong passcode; \(reason): the vault of \(user) was wiped\(pending)")
            }
            let left: String = limit > 0 ? "; \(limit - count) left before the vault is wiped" : ""
            throw ManagerError.notPermitted("wrong passcode (\(count) failed in a row\(left))")
        } catch let error as KeyWrapError {
            throw ManagerError.actionFailed("cannot open the vault key of \(user): \(ErrorWords.of(error))")
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
                wrapped = try await keys.wrapWithMachineKey(key, binding: binding)
            case .passcode:
                guard let passcode else { return }
                let parameters = stored.wrapped.scrypt ?? .standard
                wrapped = try await keys.wrap(key, passcode: passcode, binding: binding, parameters: parameters)
            }
            let now = clock.now().wall
            let detail = "vault key wrapped again, bound to registration \(binding) (wrap format \(KeyWrap.currentFormat))"
            let leftover = try await store.rewrapVaultKey(
                r.user, wrapped, passcodeSetAt: stored.passcodeSetAt,
                event: event(r.user, .keyRewrapped, trigger, detail, at: now))
            logger.info("\(detail) for \(r.user)", metadata: ["user": .string(r.user)])
            if let leftover { logger.error("\(leftover)", metadata: ["user": .string(r.user), "message_id": MessageID.actionFailed.metadata]) }
        } catch {
            logger.warning(
                "could not wrap the vault key of \(r.user) again bound to its registration (it stays in wrap format 1): \(error)",
                metadata: ["user": .string(r.user)])
        }
    }

    // MARK: Passcode

    /// `passcode set` (no `current`: only while the machine key wraps the key) and
    /// `passcode change` (with the current passcode, which counts toward `retry_limit`).
    /// Works locked or unlocked: only the wrapped key changes.
    public func setPasscode(user: String, current: String?, new: String, by caller: Caller) async throws -> ActionResult {
        try await registration(named: user).withTurn { turn in
            let r = turn.record
            guard r.protection == .encrypted else {
                throw ManagerError.actionFailed("\(user) has no encrypted vault (protection: permissions): a passcode protects only an encrypted vault's key")
            }
            guard !r.state.isWipeCommitted else {
                throw ManagerError.wrongState(user: user, current: r.state, reason: "\(user) is \(r.state.rawValue); \(r.state.nextStep(user: user) ?? "")")
            }
            guard let stored = try await store.vaultKey(user) else { throw ManagerError.actionFailed("no key is stored for the vault of \(user)") }
            let policy = passcodePolicy(for: r).policy
            if let problem = policy.problem(with: new) { throw ManagerError.actionFailed("the new passcode breaks the passcode policy: " + problem) }
            var key: [UInt8]
            if let current {
                guard stored.wrapped.wrapping == .passcode else {
                    throw ManagerError.actionFailed("\(user) has no passcode yet (the machine key wraps the vault key): use lockwipectl passcode set")
                }
                guard current != new else { throw ManagerError.actionFailed("the new passcode is the same as the current one") }
                key = try await openWithPasscode(in: turn, stored, current, policy: policy, caller: caller)
            } else {
                guard stored.wrapped.wrapping == .machine else {
                    throw ManagerError.actionFailed(
                        "\(user) already has a passcode: change it with lockwipectl passcode change (needs the current one); a forgotten passcode can only be reset by wiping the vault"
                    )
                }
                do {
                    key = try await keys.openWithMachineKey(stored.wrapped, binding: keyBinding(r))
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
    func rewrap(_ r: RegistrationRecord, key: [UInt8], new: String, kind: EventKind, caller: Caller, detail: String) async throws {
        let wrapped: WrappedKey
        do {
            wrapped = try await keys.wrap(key, passcode: new, binding: keyBinding(r))
        } catch {
            throw failure(r.user, kind.rawValue, error)
        }
        let now = clock.now().wall
        let leftover = try await store.rewrapVaultKey(
            r.user, wrapped, passcodeSetAt: now,
            event: event(r.user, kind, caller.isAdmin ? .admin : .user, "\(detail) by uid \(caller.credentials.uid)", at: now))
        if let leftover {
            logger.error("\(kind.rawValue) for \(r.user): \(leftover)", metadata: ["user": .string(r.user), "message_id": MessageID.actionFailed.metadata])
        }
        logger.notice(
            "\(detail) for \(r.user)",
            metadata: [
                "message_id": MessageID.passcodeChanged.metadata, "user": .string(r.user), "action": .string(kind.rawValue),
                "peer_uid": "\(caller.credentials.uid)",
            ])
    }

    // MARK: Status

    /// The key fields of `status` for an encrypted registration.
    func vaultStatus(_ r: RegistrationRecord, into info: inout RegistrationInfo) async {
        guard r.protection == .encrypted else { return }
        let found: VaultKeyStatus?
        do {
            found = try await store.vaultKeyStatus(r.user)
        } catch {
            // Status still answers; only the key fields are left out.
            return stateNotice("status of \(r.user): the key fields are left out", user: r.user, error)
        }
        guard let stored = found else { return }
        let policy = passcodePolicy(for: r).policy
        info.keyWrapping = stored.wrapping.rawValue
        if stored.wrapping == .passcode, policy.expirationDays > 0, let setAt = stored.passcodeSetAt {
            info.passcodeExpires = Timestamp.iso(setAt + Int64(policy.expirationDays) * 86_400)
        }
        info.failedUnlocks = stored.failedAttempts
        info.retryLimit = policy.retryLimit
    }
}
