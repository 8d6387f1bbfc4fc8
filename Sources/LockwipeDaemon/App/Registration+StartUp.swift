import LockwipeBase
import LockwipeCore
import LockwipeVaultIO
import Logging

/// The start-up pass of one registration, in its turn (`Manager.startUp`): an interrupted
/// wipe finished, the vaults checked, a committed lock applied again (a crash between
/// commit and chmod must still end locked), an encrypted vault opened again after a reboot.
extension Registration {
    nonisolated(nonsending) func startUp(in turn: borrowing RegistrationTurn, pendingWipe pending: StateStore.PendingWipe?) async {
        if let pending {
            await performWipe(in: turn, reason: pending.reason, trigger: pending.trigger, resumed: true)
            await resetServerIdentity(in: turn, trigger: pending.trigger)
            guard await reread(turn, "the start-up check after the resumed wipe") else { return }
        }
        await checkVaults(in: turn)
        guard await reread(turn, "the start-up retry of the lock") else { return }
        if turn.record.state.isLockCommitted {
            await retryLock(turn.record, in: turn)
            guard await reread(turn, "the start-up reopen of the encrypted vault") else { return }
        }
        await reopenAfterStart(in: turn)
    }

    /// Reads the turn's record again after a step that may have written it; false (logged:
    /// `what` did not run) when it cannot be read or the registration is gone.
    private nonisolated(nonsending) func reread(_ turn: borrowing RegistrationTurn, _ what: String) async -> Bool {
        do {
            try await turn.refresh()
            return true
        } catch ManagerError.noSuchRegistration {
            return false
        } catch {
            context.stateNotice("\(what) of \(user) did not run now (retried at the next start)", user: user, error)
            return false
        }
    }

    /// Checks that every vault can be reached, and shows those that cannot, after recording
    /// the device and inode of directories registered before they were kept. Every look at
    /// a vault is a vault call: one that never answers costs its deadline, and start-up goes on.
    private nonisolated(nonsending) func checkVaults(in turn: borrowing RegistrationTurn) async {
        guard turn.record.state != .wiped else { return }
        // The check opens each vault as its recorded identity: what was just recorded is read first.
        if await recordIdentities(in: turn) {
            guard await reread(turn, "the start-up check of the vaults") else { return }
        }
        let r = turn.record
        let vaults = r.vaults
        let errors: [VaultOpenError]
        do {
            errors = try await context.vaultCalls.run(for: vaultOwner, "the start-up check") {
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
            await context.vaultStalled(r, "start-up check", error, in: turn)
            return
        }
        if let first = errors.first {
            await context.vaultWarning(r, "start-up check", first, in: turn)
        } else if r.vaultError != nil, r.state != .lockFailed {
            await context.setVaultErrorOrLog(r, nil, in: turn)
        }
    }

    /// Records the device and inode of each directory registered before they were kept,
    /// when its path passes the ancestor rule now; returns whether it recorded any.
    private nonisolated(nonsending) func recordIdentities(in turn: borrowing RegistrationTurn) async -> Bool {
        let r = turn.record
        var recorded = false
        for v in r.vaults where v.identity == nil {
            let path = v.path
            let found: (problems: [String], identity: VaultDirectory.Identity?)
            do {
                found = try await context.vaultCalls.run(for: vaultOwner, "the start-up check") {
                    let problems = VaultPath.ancestorProblems(path)
                    guard problems.isEmpty else { return (problems, nil) }
                    do {
                        return (problems, try VaultDirectory.current(path).identity)
                    } catch {
                        return (["cannot be read: \(ErrorWords.of(error))"], nil)
                    }
                }
            } catch {
                await context.vaultStalled(r, "start-up check", error, in: turn)
                continue
            }
            guard found.problems.isEmpty, let identity = found.identity else {
                context.logger.warning(
                    "the vault directory \(v.path) of \(r.user) was registered before lockwipe recorded device and inode, and its path does not pass the ancestor rule: it is not acted on until it is unregistered and registered again",
                    metadata: [
                        "user": .string(r.user), "path": .string(v.path), "problems": .string(found.problems.joined(separator: "; ")),
                        "message_id": MessageID.vaultUnreachable.metadata,
                    ])
                continue
            }
            let detail = "recorded the vault directory \(v.path) as \(identity) (registered before identities were kept)"
            do {
                try await context.store.recordIdentity(
                    turn.held, path: v.path, identity, event: context.event(r.user, .vaultIdentity, .resume, detail, at: context.clock.now().wall))
                recorded = true
                context.logger.notice("\(detail)", metadata: ["user": .string(r.user), "path": .string(v.path)])
            } catch {
                context.logger.error(
                    "cannot record the identity of the vault directory \(v.path) of \(r.user); it is not acted on until it is: \(ErrorWords.of(error))",
                    metadata: ["user": .string(r.user), "path": .string(v.path), "message_id": MessageID.stateDamaged.metadata])
            }
        }
        return recorded
    }
}
