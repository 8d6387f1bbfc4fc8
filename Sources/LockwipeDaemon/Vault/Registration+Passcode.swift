import Foundation
import LockwipeBase
import LockwipeCore
import LockwipeVaultIO
import Logging

/// The passcode of an encrypted vault: its tries and back-off, setting and changing it, and
/// wrapping the key again. The key material itself is `VaultKeys`' (all of its blocking work
/// off the actor).
extension Registration {
    /// What a vault key's wrap is bound to (AES-GCM associated data): the registration id.
    func keyBinding(_ r: RegistrationRecord) -> RegistrationID? {
        r.id
    }

    /// Tries `passcode` on `r`'s key. The attempt is counted durably *before* it is tried
    /// (a right passcode resets the count), so nothing between a wrong guess and its answer
    /// can lose it. Reaching the policy's `retry_limit` wipes the vault (trigger `retry-limit`).
    /// Inside the back-off after wrong passcodes (`PasscodeBackoff`) the attempt is refused
    /// at once: not tried (no scrypt run), not counted.
    nonisolated(nonsending) func openWithPasscode(
        in turn: borrowing RegistrationTurn, _ stored: StoredVaultKey, _ passcode: String, policy: PasscodePolicy, caller: Caller
    ) async throws -> [UInt8] {
        let r = turn.record
        let user = r.user
        let now = context.clock.now().wall
        if let at = PasscodeBackoff.standard.retryAt(failures: stored.failedAttempts, lastFailure: stored.lastFailedAt, now: now) {
            context.logger.warning(
                "passcode attempt for the vault of \(user) refused: back-off after \(stored.failedAttempts) wrong passcodes",
                metadata: [
                    "user": .string(user), "action": "unlock", "failed_attempts": "\(stored.failedAttempts)",
                    "retry_at": .string(Timestamp.iso(at)), "peer_uid": "\(caller.credentials.uid)",
                ])
            throw ManagerError.notPermitted(
                "\(stored.failedAttempts) wrong passcodes in a row: try again in \(at - now) s (at \(Timestamp.iso(at))); "
                    + "this attempt was not tried and does not count")
        }
        // A wrap that needs the machine key, when it does not open: the passcode cannot be
        // tried, so it is neither tried nor counted toward retry_limit.
        if stored.wrapped.needsMachineKey {
            do {
                _ = try await context.keys.machineKey()
            } catch {
                throw context.failure(user, "unlock", error)
            }
        }
        let count = try await context.store.recordFailedUnlock(turn.held, at: now, event: nil)
        let wrapped = stored.wrapped
        let binding = keyBinding(r)
        do {
            let key = try await context.keys.open(wrapped, passcode: passcode, binding: binding)
            try await context.store.resetFailedUnlocks(turn.held)
            return key
        } catch KeyWrapError.wrongPasscode {
            let limit = policy.retryLimit
            let trigger: Trigger = caller.isAdmin ? .admin : .user
            let detail = "wrong passcode from uid \(caller.credentials.uid) (\(count) in a row" + (limit > 0 ? " of \(limit) allowed)" : ")")
            // The back-off counts from the answer, not from the start of the scrypt run.
            do {
                try await context.store.append(
                    context.event(user, .unlockFailed, trigger, detail, at: context.clock.now().wall), failedUnlockAt: context.clock.now().wall, turn.held)
            } catch {
                // Fail the request: a wrong passcode that is not counted must not be free to retry.
                throw context.stateFailure(user, "unlock (a wrong passcode was given and could not be counted)", error)
            }
            context.logger.warning(
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
                    pending = " (\(context.failure(user, "wipe", error).message))"
                }
                throw ManagerError.notPermitted("wrong passcode; \(reason): the vault of \(user) was wiped\(pending)")
            }
            let left: String = limit > 0 ? "; \(limit - count) left before the vault is wiped" : ""
            throw ManagerError.notPermitted("wrong passcode (\(count) failed in a row\(left))")
        } catch let error as KeyWrapError {
            throw ManagerError.actionFailed("cannot open the vault key of \(user): \(ErrorWords.of(error))")
        }
    }

    /// Wraps a key of an outdated wrap format (`WrappedKey.isOutdated`: format 1, without
    /// associated data, from before issue 12; or a passcode wrap of format 2, which the
    /// passcode alone opens, from before issue 43) again in the current format, bound to
    /// its registration id, while it is open anyway: at an unlock, a start-up reopen, a lift
    /// at login or an unlock after a server contact. A passcode-wrapped key is wrapped under
    /// the same passcode (a new salt, one more scrypt run) and the machine key. A key
    /// without a recovery wrap to the configured recovery key (`VaultKeys.lacksRecovery`)
    /// gets one then too, its wrap unchanged. A failure changes nothing (the old wrap
    /// stays, and opens) and is only logged.
    nonisolated(nonsending) func bindToRegistration(
        _ r: RegistrationRecord, _ stored: StoredVaultKey, key: [UInt8], passcode: String?, trigger: Trigger, in turn: borrowing RegistrationTurn
    ) async {
        guard let binding = keyBinding(r) else { return }
        let outdated = stored.wrapped.isOutdated && (stored.wrapped.wrapping == .machine || passcode != nil)
        guard outdated || context.keys.lacksRecovery(stored.wrapped) else { return }
        do {
            let wrapped: WrappedKey
            let detail: String
            switch (outdated, stored.wrapped.wrapping, passcode) {
            case (true, .machine, _):
                wrapped = try await context.keys.wrapWithMachineKey(key, binding: binding)
            case (true, .passcode, let passcode?):
                let parameters = stored.wrapped.scrypt ?? .standard
                wrapped = try await context.keys.wrap(key, passcode: passcode, binding: binding, parameters: parameters)
            default:
                wrapped = try await context.keys.withRecovery(stored.wrapped, key: key, binding: binding)
            }
            if outdated {
                detail =
                    "vault key wrapped again, bound to registration \(binding) (wrap format \(wrapped.format ?? 1)"
                    + (wrapped.needsMachineKey && wrapped.wrapping == .passcode ? ": the passcode and the machine key" : "") + ")"
            } else {
                detail = "vault key also sealed to the organisation's recovery key \(wrapped.recovery?.recipient ?? "")"
            }
            let now = context.clock.now().wall
            let leftover = try await context.store.rewrapVaultKey(
                turn.held, wrapped, passcodeSetAt: stored.passcodeSetAt,
                event: context.event(r.user, .keyRewrapped, trigger, detail, at: now))
            context.logger.info("\(detail) for \(r.user)", metadata: ["user": .string(r.user)])
            if let leftover { context.logger.error("\(leftover)", metadata: ["user": .string(r.user), "message_id": MessageID.actionFailed.metadata]) }
        } catch {
            let what =
                outdated
                ? "in wrap format \(KeyWrap.currentFormat(stored.wrapped.wrapping)) (it stays in format \(stored.wrapped.format ?? 1))"
                : "to the organisation's recovery key (it stays without a recovery wrap until it is next opened)"
            context.logger.warning("could not wrap the vault key of \(r.user) again \(what): \(error)", metadata: ["user": .string(r.user)])
        }
    }

    /// Wraps `key` under `new` and replaces the stored copy (the old key file is
    /// overwritten in place and unlinked once the new one is committed).
    nonisolated(nonsending) func rewrap(
        _ r: RegistrationRecord, key: [UInt8], new: String, kind: EventKind, caller: Caller, detail: String, in turn: borrowing RegistrationTurn
    ) async throws {
        let wrapped: WrappedKey
        do {
            wrapped = try await context.keys.wrap(key, passcode: new, binding: keyBinding(r))
        } catch {
            throw context.failure(r.user, kind.rawValue, error)
        }
        let now = context.clock.now().wall
        let leftover = try await context.store.rewrapVaultKey(
            turn.held, wrapped, passcodeSetAt: now,
            event: context.event(r.user, kind, caller.isAdmin ? .admin : .user, "\(detail) by uid \(caller.credentials.uid)", at: now))
        if let leftover {
            context.logger.error("\(kind.rawValue) for \(r.user): \(leftover)", metadata: ["user": .string(r.user), "message_id": MessageID.actionFailed.metadata])
        }
        context.logger.notice(
            "\(detail) for \(r.user)",
            metadata: [
                "message_id": MessageID.passcodeChanged.metadata, "user": .string(r.user), "action": .string(kind.rawValue),
                "peer_uid": "\(caller.credentials.uid)",
            ])
    }

    /// `passcode set` (no `current`: only while the machine key wraps the key) and
    /// `passcode change` (with the current passcode, which counts toward `retry_limit`),
    /// in this registration's turn. Works locked or unlocked: only the wrapped key changes.
    nonisolated(nonsending) func setPasscode(in turn: borrowing RegistrationTurn, current: String?, new: String, by caller: Caller) async throws -> Outcome {
        let user = turn.user
        let r = turn.record
        guard r.protection == .encrypted else {
            throw ManagerError.actionFailed("\(user) has no encrypted vault (protection: permissions): a passcode protects only an encrypted vault's key")
        }
        guard !r.state.isWipeCommitted else {
            throw ManagerError.wrongState(user: user, current: r.state, reason: "\(user) is \(r.state.rawValue); \(r.state.nextStep(user: user) ?? "")")
        }
        guard let stored = try await context.store.vaultKey(registration: id) else { throw ManagerError.actionFailed("no key is stored for the vault of \(user)") }
        let policy = context.passcodePolicy(for: r).policy
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
                key = try await context.keys.openWithMachineKey(stored.wrapped, binding: keyBinding(r))
            } catch {
                throw context.failure(user, "passcode set", error)
            }
        }
        defer { key.wipe() }
        let kind: EventKind = current == nil ? .passcodeSet : .passcodeChanged
        try await rewrap(r, key: key, new: new, kind: kind, caller: caller, detail: current == nil ? "passcode set (was the default passcode)" : "passcode changed", in: turn)
        var detail = current == nil ? "passcode set; the vault key is now wrapped by it" : "passcode changed"
        if policy.expirationDays > 0 { detail += "; expires in \(policy.expirationDays)d" }
        return Outcome(user: user, operation: current == nil ? .passcodeSet : .passcodeChanged, state: r.state, reason: detail)
    }
}
