import Foundation
import LockwipeBase
import LockwipeCore
import LockwipeProcesses
import LockwipeVaultIO
import LockwipeWipe
import Logging
import Synchronization

/// The lock of one registration: committed first, then applied and verified in one vault
/// call (ending the processes of its user when configured to); a lock that cannot be
/// applied or verified is `lock-failed` (never reported locked), said in the journal and in
/// `status`, and retried (`retryLock`) at start-up, at every evaluation and when the vault
/// answers again.
extension Registration {
    /// Locks the registration whose turn this is.
    nonisolated(nonsending) func lock(in turn: borrowing RegistrationTurn, trigger: Trigger, reason: String) async throws -> Outcome {
        let r = turn.record
        let user = r.user
        switch r.state.lockStep {
        case .alreadyLocked: return Outcome(user: user, operation: .lock, state: .locked, reason: "already locked")
        case .retry:
            if let failed = await retryLock(r, in: turn) { throw failed }
            return Outcome(user: user, operation: .lock, state: .locked, reason: "locked (the lock that had failed was applied and verified)")
        case .refuse:
            throw ManagerError.wrongState(
                user: user, current: r.state, reason: "\(user) cannot be locked: the registration is \(r.state.rawValue); \(r.state.nextStep(user: user) ?? "")")
        case .lock: break
        }
        var event = LockWipeEvent(user: user, uid: r.uid, action: .lock, reason: reason, trigger: trigger, directories: r.directories)
        event.outboxDirectories = outboxDirectories(r)
        await context.observers.notify(.willLock, event)
        // After willLock (a hook's last chance to put work there), before the lock takes
        // the vault away from its applications.
        let outbox = await sealOutbox(r, before: .lock, trigger: trigger)
        event.outbox = outbox?.words
        // At once, beside the lock, with this registration's credentials: nothing waits.
        if outbox?.sealed != nil { startOutboxUploads(r, sealed: true) }
        // What can be reached now is recorded (after taking back what its user mounted
        // over it); a directory that cannot is recorded at the retry that reaches it (the
        // lock is committed either way, and fails below).
        let records = await recordableState(r, in: turn)
        let now = context.clock.now().wall
        try await context.store.commitLock(turn.held, records: records, trigger: trigger, event: context.event(user, .lock, trigger, reason, at: now))
        let ended: [Int32]
        do {
            ended = try await applyLock(r, trigger: trigger)
        } catch {
            throw await lockFailed(r, error, in: turn)
        }
        if r.vaultError != nil { await context.setVaultErrorOrLog(r, nil, in: turn) }
        var meta = context.journalFields(r, action: "lock", trigger: trigger, reason: reason, id: .locked)
        if !ended.isEmpty { meta["terminated_pids"] = .string(ended.map(String.init).joined(separator: " ")) }
        context.logger.notice("locked \(user): \(reason)", metadata: meta)
        await context.observers.notify(.didLock, event)
        let detail = ended.isEmpty ? "locked" : "locked; ended \(ended.count) process(es) of \(user)"
        return Outcome(user: user, operation: .lock, state: .locked, reason: detail)
    }

    /// Applies `r`'s lock (idempotent), ending all of the user's processes when
    /// `[lock] terminate_processes` is on (before the vault is opened, so even when it
    /// cannot be); returns the pids that were ended. First takes back what the user
    /// mounted on or inside the vault (`VaultMountTakeback`). It all runs as one vault call
    /// (`VaultCalls`): bounded by a deadline, off the actor and the pool. When the vault is
    /// unresponsive, so that the call cannot even start, her processes are still ended (on
    /// the pool: ending them touches no vault) and the lock fails. `trigger` is who ordered
    /// the lock or wipe: only her own (`.user`) spares the client asking.
    nonisolated(nonsending) func applyLock(_ r: RegistrationRecord, trigger: Trigger) async throws -> [Int32] {
        let p = context.lock(for: r)
        let vaults = r.vaults
        let uid = r.uid
        let terminator = terminator(for: r, trigger: trigger)
        let ending = terminator.map { Duration.seconds($0.grace + $0.limit) } ?? .zero
        let outcome: Result<[Int32], any Error>
        let takebacks: [VaultMountTakeback.Report]
        do {
            (outcome, takebacks) = try await context.vaultCalls.run(for: vaultOwner, "the lock", timeout: RegistrationContext.vaultCallTimeout + ending) {
                let takebacks = vaults.map(VaultMountTakeback.takeBack)
                return (Result { try p.lock(vaults, uid: uid, ending: terminator) }, takebacks)
            }
        } catch let error as VaultUnresponsive {
            if let terminator, error.earlier {
                do {
                    _ = try await BlockingPool.run { terminator.terminate(uid: uid) }
                } catch {
                    context.logger.error(
                        "the processes of \(r.user) could not be ended: \(ErrorWords.of(error))",
                        metadata: ["user": .string(r.user), "message_id": MessageID.lockFailed.metadata])
                }
            }
            throw error
        }
        journalTakebacks(r, takebacks, action: "lock")
        return try outcome.get()
    }

    /// The terminator for a lock of `r` that the configuration asks for; nil when
    /// `terminate_processes` is off. The client asking is spared only when the lock or
    /// wipe is her own, asked by a client of her uid: her lock or wipe (`.user`), or the
    /// wipe her own wrong passcode set off (`.retryLimit`). A lock the server orders in the
    /// answer to a check-in she asked, or an administrator's, spares nothing of hers
    /// (issue 40, finding 4).
    func terminator(for r: RegistrationRecord, trigger: Trigger) -> ProcessTerminator? {
        guard context.configuration.terminateProcesses else { return nil }
        var spared: Int32?
        if trigger == .user || trigger == .retryLimit, let client = RequestingClient.current, client.uid == r.uid, r.uid != 0 {
            client.spared.withLock { $0 = r.user }
            spared = client.pid
        }
        return ProcessTerminator(grace: TimeInterval(context.configuration.terminateGraceSeconds), sparing: spared)
    }

    /// The permission state of every vault directory that can be reached now (the lock
    /// records), after taking back what its user mounted over it; one that cannot is
    /// recorded by the retry that reaches it.
    /// The take-back runs again in the lock's own vault call (`applyLock`), on purpose:
    /// between the two calls the lock is committed to the store and she may mount again,
    /// and each call must act on the vault, never on what she mounted over it.
    nonisolated(nonsending) func recordableState(_ r: RegistrationRecord, in turn: borrowing RegistrationTurn) async -> [LockRecord] {
        let (p, vaults, user) = (context.lock(for: r), r.vaults, r.user)
        do {
            let (records, takebacks) = try await context.vaultCalls.run(for: vaultOwner, "reading the vault's owner and mode") {
                let takebacks = vaults.map(VaultMountTakeback.takeBack)
                return (vaults.map { v in Result { try p.recordState(of: [v], user: user).first } }, takebacks)
            }
            journalTakebacks(r, takebacks, action: "lock")
            return readableLockRecords(r, records)
        } catch {
            await context.vaultStalled(r, "lock", error, in: turn)
            return []
        }
    }

    /// The lock records that could be read; each vault that could not is said in the
    /// journal (MESSAGE_ID `vaultUnreachable`) and recorded by the retry that reaches it.
    /// A retry says it at debug level: its lock fails on the same vault and says so once.
    func readableLockRecords(_ r: RegistrationRecord, _ results: [Result<LockRecord?, any Error>], level: Logger.Level = .warning) -> [LockRecord] {
        results.compactMap { result in
            do {
                return try result.get()
            } catch {
                context.logger.log(
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
                context.logger.warning(
                    "\(action) of \(r.user): detached \(d.mount) from the vault\(d.aborted ? " and aborted its FUSE connection" : "")",
                    metadata: mountFields(r, d.mount, action: action, extra: ["fuse_aborted": .string(d.aborted ? "yes" : "no")]))
            }
            for f in report.failed {
                context.logger.error(
                    "\(action) of \(r.user): could not detach \(f.mount) from the vault: \(f.reason)",
                    metadata: mountFields(r, f.mount, action: action, extra: ["error": .string(f.reason)]))
            }
            for l in report.left {
                context.logger.debug("\(action) of \(r.user): left \(l.mount) in place: \(l.reason)", metadata: ["user": .string(r.user)])
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
    nonisolated(nonsending) func retryLock(_ r: RegistrationRecord, in turn: borrowing RegistrationTurn) async -> ManagerError? {
        if r.protection == .permissions {
            let known: Set<String>
            do {
                known = Set(try await context.store.lockRecords(registration: r.id).map(\.path))
            } catch {
                // Fail closed: no lock without the records that let unlock restore the vault.
                return await lockFailed(r, error, in: turn)
            }
            let missing = r.vaults.filter { !known.contains($0.path) }
            if !missing.isEmpty {
                let (protection, user) = (context.permissions, r.user)
                let found: [LockRecord]
                do {
                    found = readableLockRecords(
                        r,
                        try await context.vaultCalls.run(for: vaultOwner, "reading the vault's owner and mode") {
                            missing.map { v in Result { try protection.recordState(of: [v], user: user).first } }
                        }, level: .debug)
                } catch {
                    await context.vaultStalled(r, "lock", error, in: turn)
                    found = []
                }
                let records = found.filter { !PermissionLock.isLockedForm(owner: $0.uid, group: $0.gid, mode: $0.mode) }
                if !records.isEmpty, let trigger = r.lockTrigger {
                    do {
                        try await context.store.commitLock(
                            turn.held, records: records, trigger: trigger,
                            event: context.event(
                                r.user, .lockRecorded, trigger, "recorded owner and mode of \(records.map(\.path).joined(separator: ", ")) for the lock being retried",
                                at: context.clock.now().wall))
                        if r.state == .lockFailed { try await context.store.setVaultError(turn.held, r.vaultError, lockFailed: true) }
                    } catch {
                        // Fail closed: a vault whose owner and mode are not recorded is not locked.
                        return await lockFailed(r, error, in: turn)
                    }
                }
            }
        }
        do {
            _ = try await applyLock(r, trigger: r.lockTrigger ?? .resume)
        } catch {
            return await lockFailed(r, error, in: turn)
        }
        if r.state == .lockFailed || r.vaultError != nil {
            let now = context.clock.now().wall
            do {
                try await context.store.setVaultError(
                    turn.held, nil, lockHolds: true,
                    event: r.state == .lockFailed ? context.event(r.user, .lock, r.lockTrigger, "the lock that had failed was applied and verified", at: now) : nil)
                self.unrecordedLockFailure = nil
            } catch {
                // It still reads lock-failed (the safe side): the next retry records it.
                context.stateNotice("the lock of \(r.user) holds again but this could not be recorded; it is retried", user: r.user, error)
                return nil
            }
            if r.state == .lockFailed {
                context.logger.notice(
                    "locked \(r.user): the lock that had failed now holds",
                    metadata:
                        context.journalFields(r, action: "lock", trigger: r.lockTrigger ?? .resume, reason: "retry of a failed lock", id: .locked))
            }
        }
        return nil
    }

    /// A lock that could not be applied or verified: the registration becomes
    /// `lock-failed` (never reported locked), the reason is kept for `status`, the journal
    /// gets a warning; the lock is retried.
    nonisolated(nonsending) func lockFailed(_ r: RegistrationRecord, _ error: any Error, in turn: borrowing RegistrationTurn) async -> ManagerError {
        let text = ErrorWords.of(error)
        let now = context.clock.now().wall
        let changed = r.vaultError != text || r.state != .lockFailed
        do {
            try await context.store.setVaultError(
                turn.held, text, lockFailed: true,
                event: changed ? context.event(r.user, .lockFailed, r.lockTrigger, text, at: now) : nil)
            self.unrecordedLockFailure = nil
        } catch {
            // Never reads locked: lock-failed in memory (status, the login gate, the
            // retries) until a write succeeds.
            self.unrecordedLockFailure = text
            context.stateNotice("the lock of \(r.user) FAILED and this could not be recorded; it shows lock-failed and is retried", user: r.user, error)
        }
        if changed {
            var meta = context.journalFields(
                r, action: "lock", trigger: r.lockTrigger ?? .resume, reason: text,
                id: error is VaultOpenError ? .vaultUnreachable : error is VaultUnresponsive ? .vaultUnresponsive : .lockFailed)
            meta["error"] = .string(text)
            context.logger.warning("the lock of \(r.user) FAILED and is not in force (it is retried): \(text)", metadata: meta)
        }
        return ManagerError.actionFailed("lock of \(r.user) FAILED, the vault is not locked (the lock is retried): \(text)")
    }

    /// Its vault answers again (`Manager.vaultAnswersAgain`): a wipe left pending because
    /// the vault would not answer runs now, and a lock that failed on it is retried.
    nonisolated(nonsending) func vaultAnswersAgain(in turn: borrowing RegistrationTurn) async {
        let r = turn.record
        if r.state.isWipeCommitted {
            guard r.state != .wiped else { return }
            let pending: StateStore.PendingWipe?
            do {
                pending = try await context.store.pendingWipe(registration: id)
            } catch {
                return context.stateNotice("the wipe that waited for the vault of \(user) is retried at the next start", user: user, error)
            }
            guard let pending else { return }
            await performWipe(in: turn, reason: pending.reason, trigger: pending.trigger, resumed: true)
            await resetServerIdentity(in: turn, trigger: pending.trigger)
        } else if r.state == .lockFailed {
            _ = await retryLock(r, in: turn)
        }
    }
}
