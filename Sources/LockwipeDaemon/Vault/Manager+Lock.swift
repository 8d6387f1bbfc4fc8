import Foundation
import LockwipeBase
import LockwipeCore
import LockwipeProtocol
import LockwipeVaultIO
import Logging

/// Lock and the unlock request: the lock is committed first, then applied and verified
/// on the thread pool (ending the processes that hold the vault when configured to).
extension Manager {
    public func lock(user: String, trigger: Trigger, reason: String) async throws -> ActionResult {
        let result = try await registration(named: user).withTurn { turn in try await lock(in: turn, trigger: trigger, reason: reason) }
        await reschedule()
        return result
    }

    public func unlock(user: String, by caller: Caller, passcode: String? = nil, newPasscode: String? = nil) async throws -> ActionResult {
        if try await checkInBeforeUserUnlock(user: user, caller: caller) {
            return ActionResult(
                user: user, action: "unlock", state: .active,
                detail: "unlocked: the policy server lifted the lock at the check-in just made")
        }
        let result = try await registration(named: user).withTurn { turn in
            try await unlock(in: turn, caller: caller, passcode: passcode, newPasscode: newPasscode)
        }
        await reschedule()
        return result
    }

    // MARK: Lock

    /// Locks the registration whose turn this is.
    func lock(in turn: borrowing RegistrationTurn, trigger: Trigger, reason: String) async throws -> ActionResult {
        let r = turn.record
        let user = r.user
        switch r.state.lockStep {
        case .alreadyLocked: return ActionResult(user: user, action: "lock", state: .locked, detail: "already locked")
        case .retry:
            if let failed = await retryLock(r) { throw failed }
            return ActionResult(user: user, action: "lock", state: .locked, detail: "locked (the lock that had failed was applied and verified)")
        case .refuse:
            throw ManagerError.wrongState(
                user: user, current: r.state, reason: "\(user) cannot be locked: the registration is \(r.state.rawValue); \(r.state.nextStep(user: user) ?? "")")
        case .lock: break
        }
        let event = LockWipeEvent(user: user, uid: r.uid, action: .lock, reason: reason, trigger: trigger, directories: r.directories)
        await observers.notify(.willLock, event)
        // What can be reached now is recorded (after taking back what its user mounted
        // over it); a directory that cannot is recorded at the retry that reaches it (the
        // lock is committed either way, and fails below).
        let records = await recordableState(r)
        let now = clock.now().wall
        try await store.commitLock(user, records: records, trigger: trigger, event: self.event(user, .lock, trigger, reason, at: now))
        let ended: [Int32]
        do {
            ended = try await applyLock(r, trigger: trigger)
        } catch {
            throw await lockFailed(r, error)
        }
        if r.vaultError != nil { await setVaultErrorOrLog(user, nil) }
        var meta = journalFields(r, action: "lock", trigger: trigger, reason: reason, id: .locked)
        if !ended.isEmpty { meta["terminated_pids"] = .string(ended.map(String.init).joined(separator: " ")) }
        logger.notice("locked \(user): \(reason)", metadata: meta)
        await observers.notify(.didLock, event)
        let detail = ended.isEmpty ? "locked" : "locked; ended \(ended.count) process(es) of \(user)"
        return ActionResult(user: user, action: "lock", state: .locked, detail: detail)
    }

    /// The protection of `r`: the fscrypt lock for an encrypted vault, the permission lock otherwise.
    func protection(for r: RegistrationRecord) -> any VaultProtecting {
        r.protection == .encrypted ? encryption : protection
    }

    /// Applies `r`'s lock (idempotent), ending all of the user's processes when
    /// `[lock] terminate_processes` is on (before the vault is opened, so even when it
    /// cannot be); returns the pids that were ended. First takes back what the user
    /// mounted on or inside the vault (`VaultMountTakeback`). It all runs as one vault call
    /// (`VaultCalls`): bounded by a deadline, off the actor and the pool. When the vault is
    /// unresponsive, so that the call cannot even start, her processes are still ended (on
    /// the pool: ending them touches no vault) and the lock fails. `trigger` is who ordered
    /// the lock or wipe: only her own (`.user`) spares the client asking.
    func applyLock(_ r: RegistrationRecord, trigger: Trigger) async throws -> [Int32] {
        let p = protection(for: r)
        let vaults = r.vaults
        let uid = r.uid
        let terminator = terminator(for: r, trigger: trigger)
        let ending = terminator.map { Duration.seconds($0.grace + $0.limit) } ?? .zero
        let outcome: Result<[Int32], any Error>
        let takebacks: [VaultMountTakeback.Report]
        do {
            (outcome, takebacks) = try await vaultCalls.run(user: r.user, "the lock", timeout: Self.vaultCallTimeout + ending) {
                let takebacks = vaults.map(VaultMountTakeback.takeBack)
                return (Result { try p.lock(vaults, uid: uid, ending: terminator) }, takebacks)
            }
        } catch let error as VaultUnresponsive {
            if let terminator, error.earlier {
                do {
                    _ = try await BlockingPool.run { terminator.terminate(uid: uid) }
                } catch {
                    logger.error(
                        "the processes of \(r.user) could not be ended: \(ErrorWords.of(error))",
                        metadata: ["user": .string(r.user), "message_id": MessageID.lockFailed.metadata])
                }
            }
            throw error
        }
        journalTakebacks(r, takebacks, action: "lock")
        return try outcome.get()
    }
}
