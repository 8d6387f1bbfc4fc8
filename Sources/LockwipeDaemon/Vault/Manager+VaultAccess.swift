import Foundation
import LockwipeCore
import LockwipeProtocol
import Logging

/// What the Manager does when a vault cannot be reached as registered (missing, renamed,
/// replaced, reached through a symlink) or its lock does not verify: the action fails and
/// says so, nothing else is touched, the registration shows it (`lock-failed`,
/// `vault_error`), the journal gets a warning, and the lock is retried at start-up and at
/// every evaluation until it holds.
extension Manager {
    /// Start-up: records the device and inode of directories registered before they were
    /// kept (only when the path passes the ancestor rule now), then checks that every vault
    /// of a registration that is not wiped can be reached, and shows those that cannot.
    func checkVaults() async {
        for r in (try? await store.registrations()) ?? [] where r.state != .wiped {
            for v in r.vaults where v.identity == nil {
                let problems = VaultPath.ancestorProblems(v.path)
                guard problems.isEmpty, let current = try? VaultDirectory.current(v.path), let identity = current.identity else {
                    logger.warning(
                        "the vault directory \(v.path) of \(r.user) was registered before lockwipe recorded device and inode, and its path does not pass the ancestor rule: it is not acted on until it is unregistered and registered again",
                        metadata: [
                            "user": .string(r.user), "path": .string(v.path), "problems": .string(problems.joined(separator: "; ")),
                            "message_id": MessageID.vaultUnreachable.metadata,
                        ])
                    continue
                }
                let detail = "recorded the vault directory \(v.path) as \(identity) (registered before identities were kept)"
                try? await store.recordIdentity(r.user, path: v.path, identity, event: event(r.user, .vaultIdentity, .resume, detail, at: clock.now().wall))
                logger.notice("\(detail)", metadata: ["user": .string(r.user), "path": .string(v.path)])
            }
        }
        for r in (try? await store.registrations()) ?? [] where r.state != .wiped {
            let errors = r.vaults.compactMap { v -> VaultOpenError? in
                do throws(VaultOpenError) {
                    try VaultPath.open(v).close()
                    return nil
                } catch {
                    return error
                }
            }
            if let first = errors.first {
                await vaultWarning(r, "start-up check", first)
            } else if r.vaultError != nil, r.state != .lockFailed {
                try? await store.setVaultError(r.user, nil)
            }
        }
    }

    /// The permission state of every vault directory that can be reached now (the lock
    /// records); one that cannot is recorded by the retry that reaches it.
    func recordableState(_ r: RegistrationRecord) -> [LockRecord] {
        let p = protection(for: r)
        return r.vaults.compactMap { try? p.recordState(of: [$0], user: r.user).first }
    }

    /// Applies the committed lock of `r` again (start-up, evaluations, `lock` of a
    /// `lock-failed` registration): records what could not be recorded before, applies and
    /// verifies. Returns nil when the lock holds (the registration is `locked`), else the
    /// failure (it is `lock-failed`, said in the journal and in `status`).
    @discardableResult
    func retryLock(_ r: RegistrationRecord) async -> ManagerError? {
        if r.protection == .permissions {
            let known = Set(((try? await store.lockRecords(r.user)) ?? []).map(\.path))
            let missing = r.vaults.filter { !known.contains($0.path) }
            if !missing.isEmpty {
                let (protection, user) = (self.protection, r.user)
                let found = (try? await BlockingPool.run { missing.compactMap { try? protection.recordState(of: [$0], user: user).first } }) ?? []
                let records = found.filter { !PermissionLock.isLockedForm(owner: $0.uid, group: $0.gid, mode: $0.mode) }
                if !records.isEmpty, let trigger = r.lockTrigger {
                    try? await store.commitLock(
                        r.user, records: records, trigger: trigger,
                        event: event(
                            r.user, .lockRecorded, trigger, "recorded owner and mode of \(records.map(\.path).joined(separator: ", ")) for the lock being retried",
                            at: clock.now().wall))
                    if r.state == .lockFailed { try? await store.setVaultError(r.user, r.vaultError, lockFailed: true) }
                }
            }
        }
        do {
            _ = try await applyLock(r)
        } catch {
            return await lockFailed(r, error)
        }
        if r.state == .lockFailed || r.vaultError != nil {
            let now = clock.now().wall
            try? await store.setVaultError(
                r.user, nil, lockHolds: true,
                event: r.state == .lockFailed ? event(r.user, .lock, r.lockTrigger, "the lock that had failed was applied and verified", at: now) : nil)
            if r.state == .lockFailed {
                logger.notice(
                    "locked \(r.user): the lock that had failed now holds",
                    metadata:
                        journalFields(r, action: "lock", trigger: r.lockTrigger ?? .resume, reason: "retry of a failed lock", id: .locked))
            }
        }
        return nil
    }

    /// A lock that could not be applied or verified: the registration becomes
    /// `lock-failed` (never reported locked), the reason is kept for `status`, the journal
    /// gets a warning; the lock is retried.
    func lockFailed(_ r: RegistrationRecord, _ error: any Error) async -> ManagerError {
        let text = "\(error)"
        let now = clock.now().wall
        let changed = r.vaultError != text || r.state != .lockFailed
        try? await store.setVaultError(
            r.user, text, lockFailed: true,
            event: changed ? event(r.user, .lockFailed, r.lockTrigger, text, at: now) : nil)
        if changed {
            var meta = journalFields(
                r, action: "lock", trigger: r.lockTrigger ?? .resume, reason: text,
                id: error is VaultOpenError ? .vaultUnreachable : .lockFailed)
            meta["error"] = .string(text)
            logger.warning("the lock of \(r.user) FAILED and is not in force (it is retried): \(text)", metadata: meta)
        }
        return ManagerError.actionFailed("lock of \(r.user) FAILED, the vault is not locked (the lock is retried): \(text)")
    }

    /// An unlock (or other action) that could not reach the vault: the warning, the reason
    /// in `status`, and the caller's `ActionFailed`. Other errors are plain failures.
    func vaultFailure(_ r: RegistrationRecord, _ action: String, _ error: any Error) async -> ManagerError {
        guard let vaultError = error as? VaultOpenError else { return failure(r.user, action, error) }
        await vaultWarning(r, action, vaultError)
        return ManagerError.actionFailed("\(action) of \(r.user) failed, nothing was touched: \(vaultError)")
    }

    /// The journal warning (MESSAGE_ID `vaultUnreachable`) and the `vault_error` of `r`.
    func vaultWarning(_ r: RegistrationRecord, _ action: String, _ error: VaultOpenError) async {
        let text = "\(error)"
        if r.vaultError != text { try? await store.setVaultError(r.user, text) }
        logger.warning(
            "\(action) of \(r.user): the vault cannot be reached as registered; nothing was touched: \(text)",
            metadata: [
                "user": .string(r.user), "uid": "\(r.uid)", "action": .string(action), "path": .string(error.path),
                "error": .string(text), "message_id": MessageID.vaultUnreachable.metadata,
            ])
    }
}
