import Foundation
import LockwipeBase
import LockwipeCore
import LockwipeProtocol
import LockwipeVaultIO
import Logging

/// What the Manager does when a vault cannot be reached as registered (missing, renamed,
/// replaced, reached through a symlink) or its lock does not verify: the action fails and
/// says so, nothing else is touched, the registration shows it (`lock-failed`,
/// `vault_error`), the journal gets a warning, and the lock is retried at start-up and at
/// every evaluation until it holds.
extension Manager {
    /// The deadline of one filesystem call on a vault (`VaultCalls`); a lock adds the
    /// grace it gives processes to end.
    static let vaultCallTimeout: Duration = .seconds(10)

    /// Start-up: records the device and inode of directories registered before they were
    /// kept (only when the path passes the ancestor rule now), then checks that every vault
    /// of a registration that is not wiped can be reached, and shows those that cannot.
    /// Every look at a vault is a vault call: one that never answers costs its deadline,
    /// and start-up goes on.
    func checkVaults() async {
        for r in await registrationsOrLog("the start-up check of vaults") where r.state != .wiped {
            for v in r.vaults where v.identity == nil {
                let path = v.path
                let found: (problems: [String], identity: VaultDirectory.Identity?)
                do {
                    found = try await vaultCalls.run(user: r.user, "the start-up check") {
                        let problems = VaultPath.ancestorProblems(path)
                        guard problems.isEmpty else { return (problems, nil) }
                        do {
                            return (problems, try VaultDirectory.current(path).identity)
                        } catch {
                            return (["cannot be read: \(ErrorWords.of(error))"], nil)
                        }
                    }
                } catch {
                    await vaultStalled(r, "start-up check", error)
                    continue
                }
                guard found.problems.isEmpty, let identity = found.identity else {
                    logger.warning(
                        "the vault directory \(v.path) of \(r.user) was registered before lockwipe recorded device and inode, and its path does not pass the ancestor rule: it is not acted on until it is unregistered and registered again",
                        metadata: [
                            "user": .string(r.user), "path": .string(v.path), "problems": .string(found.problems.joined(separator: "; ")),
                            "message_id": MessageID.vaultUnreachable.metadata,
                        ])
                    continue
                }
                let detail = "recorded the vault directory \(v.path) as \(identity) (registered before identities were kept)"
                do {
                    try await store.recordIdentity(r.user, path: v.path, identity, event: event(r.user, .vaultIdentity, .resume, detail, at: clock.now().wall))
                    logger.notice("\(detail)", metadata: ["user": .string(r.user), "path": .string(v.path)])
                } catch {
                    logger.error(
                        "cannot record the identity of the vault directory \(v.path) of \(r.user); it is not acted on until it is: \(error)",
                        metadata: ["user": .string(r.user), "path": .string(v.path), "message_id": MessageID.stateDamaged.metadata])
                }
            }
        }
        for r in await registrationsOrLog("the start-up check of vaults") where r.state != .wiped {
            let vaults = r.vaults
            let errors: [VaultOpenError]
            do {
                errors = try await vaultCalls.run(user: r.user, "the start-up check") {
                    vaults.compactMap { v -> VaultOpenError? in
                        do throws(VaultOpenError) {
                            try VaultPath.open(v).close()
                            return nil
                        } catch {
                            return error
                        }
                    }
                }
            } catch {
                await vaultStalled(r, "start-up check", error)
                continue
            }
            if let first = errors.first {
                await vaultWarning(r, "start-up check", first)
            } else if r.vaultError != nil, r.state != .lockFailed {
                await setVaultErrorOrLog(r.user, nil)
            }
        }
    }

    /// Every registration, or none after logging why (a start-up check that cannot read
    /// the store checks nothing, and says so).
    func registrationsOrLog(_ purpose: String) async -> [RegistrationRecord] {
        do {
            return try await store.registrations()
        } catch {
            stateNotice("\(purpose): cannot read the registrations", error)
            return []
        }
    }

    /// Records `text` as the vault error of `user`, or logs that it could not.
    func setVaultErrorOrLog(_ user: String, _ text: String?) async {
        do {
            try await store.setVaultError(user, text)
        } catch {
            stateNotice("cannot record the vault state of \(user)", user: user, error)
        }
    }

    /// A vault call that did not answer (`VaultUnresponsive`) or failed otherwise: the
    /// journal (MESSAGE_ID `vaultUnresponsive`) and the `vault_error` in `status`.
    /// The vault of `user` answers again (a call that had timed out returned at last): a
    /// wipe left pending because it would not answer runs now, and a lock that failed on it
    /// is retried, each in the registration's turn, instead of waiting for the next
    /// start-up (issue 40, finding 2: the wipe of a vault held by a process in an
    /// uninterruptible wait was retried only then).
    func vaultAnswersAgain(user: String) async {
        guard !stopped else { return }
        let pending: StateStore.PendingWipe?
        do {
            pending = try await store.pendingWipe(user)
        } catch {
            stateNotice("what waited for the vault of \(user) is not known; it is retried at the next start", user: user, error)
            return
        }
        if let pending {
            await inTurn(named: user, "the wipe retried once the vault answers again") { turn in
                guard turn.record.state.isWipeCommitted, turn.record.state != .wiped else { return }
                await self.performWipe(in: turn, reason: pending.reason, trigger: pending.trigger, resumed: true)
                await self.resetServerIdentity(in: turn, trigger: pending.trigger)
            }
        } else {
            await inTurn(named: user, "the lock retried once the vault answers again") { turn in
                guard turn.record.state == .lockFailed else { return }
                _ = await self.retryLock(turn.record)
            }
        }
        await reschedule()
    }

    func vaultStalled(_ r: RegistrationRecord, _ action: String, _ error: any Error) async {
        let text = ErrorWords.of(error)
        if r.vaultError != text { await setVaultErrorOrLog(r.user, text) }
        logger.warning(
            "\(action) of \(r.user): \(text)",
            metadata: [
                "user": .string(r.user), "uid": "\(r.uid)", "action": .string(action), "path": .string(r.directories.joined(separator: " ")),
                "error": .string(text),
                "message_id": (error is VaultUnresponsive ? MessageID.vaultUnresponsive : MessageID.vaultUnreachable).metadata,
            ])
    }

    /// The permission state of every vault directory that can be reached now (the lock
    /// records), after taking back what its user mounted over it; one that cannot is
    /// recorded by the retry that reaches it.
    func recordableState(_ r: RegistrationRecord) async -> [LockRecord] {
        let (p, vaults, user) = (protection(for: r), r.vaults, r.user)
        do {
            let (records, takebacks) = try await vaultCalls.run(user: user, "reading the vault's owner and mode") {
                let takebacks = vaults.map(VaultMountTakeback.takeBack)
                return (vaults.map { v in Result { try p.recordState(of: [v], user: user).first } }, takebacks)
            }
            journalTakebacks(r, takebacks, action: "lock")
            return unrecordable(r, records)
        } catch {
            await vaultStalled(r, "lock", error)
            return []
        }
    }

    /// The lock records that could be read; each vault that could not is said in the
    /// journal (MESSAGE_ID `vaultUnreachable`) and recorded by the retry that reaches it.
    /// A retry says it at debug level: its lock fails on the same vault and says so once.
    func unrecordable(_ r: RegistrationRecord, _ results: [Result<LockRecord?, any Error>], level: Logger.Level = .warning) -> [LockRecord] {
        results.compactMap { result in
            do {
                return try result.get()
            } catch {
                logger.log(
                    level: level,
                    "lock of \(r.user): the owner and mode of a vault cannot be read, it is recorded when the lock is retried: \(ErrorWords.of(error))",
                    metadata: ["user": .string(r.user), "error": .string(ErrorWords.of(error)), "message_id": MessageID.vaultUnreachable.metadata])
                return nil
            }
        }
    }

    /// Says in the journal what was taken back from `r`'s vault (MESSAGE_ID
    /// `mountDetached`), what could not be, and what was left (debug).
    func journalTakebacks(_ r: RegistrationRecord, _ reports: [VaultMountTakeback.Report], action: String) {
        for report in reports {
            for d in report.detached {
                logger.warning(
                    "\(action) of \(r.user): detached \(d.mount) from the vault\(d.aborted ? " and aborted its FUSE connection" : "")",
                    metadata: mountFields(r, d.mount, action: action, extra: ["fuse_aborted": .string(d.aborted ? "yes" : "no")]))
            }
            for f in report.failed {
                logger.error(
                    "\(action) of \(r.user): could not detach \(f.mount) from the vault: \(f.reason)",
                    metadata: mountFields(r, f.mount, action: action, extra: ["error": .string(f.reason)]))
            }
            for l in report.left {
                logger.debug("\(action) of \(r.user): left \(l.mount) in place: \(l.reason)", metadata: ["user": .string(r.user)])
            }
        }
    }

    private func mountFields(_ r: RegistrationRecord, _ m: MountEntry, action: String, extra: Logger.Metadata) -> Logger.Metadata {
        var meta: Logger.Metadata = [
            "user": .string(r.user), "uid": "\(r.uid)", "action": .string(action), "mount_point": .string(m.mountPoint),
            "mount_fstype": .string(m.fsType), "mount_source": .string(m.source), "message_id": MessageID.mountDetached.metadata,
        ]
        if let owner = m.fuseOwner { meta["mount_owner_uid"] = "\(owner)" }
        meta.merge(extra) { _, new in new }
        return meta
    }

    /// Applies the committed lock of `r` again (start-up, evaluations, `lock` of a
    /// `lock-failed` registration): records what could not be recorded before, applies and
    /// verifies. Returns nil when the lock holds (the registration is `locked`), else the
    /// failure (it is `lock-failed`, said in the journal and in `status`).
    @discardableResult
    func retryLock(_ r: RegistrationRecord) async -> ManagerError? {
        if r.protection == .permissions {
            let known: Set<String>
            do {
                known = Set(try await store.lockRecords(r.user).map(\.path))
            } catch {
                // Fail closed: no lock without the records that let unlock restore the vault.
                return await lockFailed(r, error)
            }
            let missing = r.vaults.filter { !known.contains($0.path) }
            if !missing.isEmpty {
                let (protection, user) = (self.protection, r.user)
                let found: [LockRecord]
                do {
                    found = unrecordable(
                        r,
                        try await vaultCalls.run(user: user, "reading the vault's owner and mode") {
                            missing.map { v in Result { try protection.recordState(of: [v], user: user).first } }
                        }, level: .debug)
                } catch {
                    await vaultStalled(r, "lock", error)
                    found = []
                }
                let records = found.filter { !PermissionLock.isLockedForm(owner: $0.uid, group: $0.gid, mode: $0.mode) }
                if !records.isEmpty, let trigger = r.lockTrigger {
                    do {
                        try await store.commitLock(
                            r.user, records: records, trigger: trigger,
                            event: event(
                                r.user, .lockRecorded, trigger, "recorded owner and mode of \(records.map(\.path).joined(separator: ", ")) for the lock being retried",
                                at: clock.now().wall))
                        if r.state == .lockFailed { try await store.setVaultError(r.user, r.vaultError, lockFailed: true) }
                    } catch {
                        // Fail closed: a vault whose owner and mode are not recorded is not locked.
                        return await lockFailed(r, error)
                    }
                }
            }
        }
        do {
            _ = try await applyLock(r, trigger: r.lockTrigger ?? .resume)
        } catch {
            return await lockFailed(r, error)
        }
        if r.state == .lockFailed || r.vaultError != nil {
            let now = clock.now().wall
            do {
                try await store.setVaultError(
                    r.user, nil, lockHolds: true,
                    event: r.state == .lockFailed ? event(r.user, .lock, r.lockTrigger, "the lock that had failed was applied and verified", at: now) : nil)
                registration(of: r).unrecordedLockFailure = nil
            } catch {
                // It still reads lock-failed (the safe side): the next retry records it.
                stateNotice("the lock of \(r.user) holds again but this could not be recorded; it is retried", user: r.user, error)
                return nil
            }
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
        let text = ErrorWords.of(error)
        let now = clock.now().wall
        let changed = r.vaultError != text || r.state != .lockFailed
        do {
            try await store.setVaultError(
                r.user, text, lockFailed: true,
                event: changed ? event(r.user, .lockFailed, r.lockTrigger, text, at: now) : nil)
            registration(of: r).unrecordedLockFailure = nil
        } catch {
            // Never reads locked: lock-failed in memory (status, the login gate, the
            // retries) until a write succeeds.
            registration(of: r).unrecordedLockFailure = text
            stateNotice("the lock of \(r.user) FAILED and this could not be recorded; it shows lock-failed and is retried", user: r.user, error)
        }
        if changed {
            var meta = journalFields(
                r, action: "lock", trigger: r.lockTrigger ?? .resume, reason: text,
                id: error is VaultOpenError ? .vaultUnreachable : error is VaultUnresponsive ? .vaultUnresponsive : .lockFailed)
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
        if r.vaultError != text { await setVaultErrorOrLog(r.user, text) }
        logger.warning(
            "\(action) of \(r.user): the vault cannot be reached as registered; nothing was touched: \(text)",
            metadata: [
                "user": .string(r.user), "uid": "\(r.uid)", "action": .string(action), "path": .string(error.path),
                "error": .string(text), "message_id": MessageID.vaultUnreachable.metadata,
            ])
    }

    /// `r` as it is in force: a lock whose failure could not be recorded reads lock-failed
    /// (`Registration.unrecordedLockFailure`), never locked.
    func recorded(_ r: RegistrationRecord) -> RegistrationRecord {
        registrations[r.id]?.inForce(r) ?? r
    }
}
