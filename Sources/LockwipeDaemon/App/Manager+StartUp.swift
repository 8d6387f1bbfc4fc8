import Foundation
import LockwipeBase
import LockwipeCore
import LockwipeVaultIO
import LockwipeWipe
import Logging

/// The start-up checks of vaults and what waited for a vault that answers again. Each
/// registration's part runs in its turn.
extension Manager {
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
                    found = try await context.vaultCalls.run(for: VaultOwner(registration: r.id, user: r.user), "the start-up check") {
                        let problems = VaultPath.ancestorProblems(path)
                        guard problems.isEmpty else { return (problems, nil) }
                        do {
                            return (problems, try VaultDirectory.current(path).identity)
                        } catch {
                            return (["cannot be read: \(ErrorWords.of(error))"], nil)
                        }
                    }
                } catch {
                    await context.vaultStalled(r, "start-up check", error)
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
                        r.user, path: v.path, identity, event: context.event(r.user, .vaultIdentity, .resume, detail, at: context.clock.now().wall))
                    context.logger.notice("\(detail)", metadata: ["user": .string(r.user), "path": .string(v.path)])
                } catch {
                    context.logger.error(
                        "cannot record the identity of the vault directory \(v.path) of \(r.user); it is not acted on until it is: \(error)",
                        metadata: ["user": .string(r.user), "path": .string(v.path), "message_id": MessageID.stateDamaged.metadata])
                }
            }
        }
        for r in await registrationsOrLog("the start-up check of vaults") where r.state != .wiped {
            let vaults = r.vaults
            let errors: [VaultOpenError]
            do {
                errors = try await context.vaultCalls.run(for: VaultOwner(registration: r.id, user: r.user), "the start-up check") {
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
                await context.vaultStalled(r, "start-up check", error)
                continue
            }
            if let first = errors.first {
                await context.vaultWarning(r, "start-up check", first)
            } else if r.vaultError != nil, r.state != .lockFailed {
                await context.setVaultErrorOrLog(r.user, nil)
            }
        }
    }

    /// Every registration, or none after logging why (a start-up check that cannot read
    /// the store checks nothing, and says so).
    func registrationsOrLog(_ purpose: String) async -> [RegistrationRecord] {
        do {
            return try await context.store.registrations()
        } catch {
            context.stateNotice("\(purpose): cannot read the registrations", error)
            return []
        }
    }

    /// After a reboot the kernel holds no vault keys, so an `active` encrypted vault is in
    /// fact locked. One the machine key wraps is opened again (the default passcode asks
    /// nobody); one a passcode wraps is recorded as locked (trigger `resume`) so that
    /// `status` tells the truth and its user can unlock it with the passcode. Each in its turn.
    func reopenEncryptedVaults() async {
        for r in await registrationsOrLog("the start-up reopen of encrypted vaults") where r.protection == .encrypted && r.state == .active {
            await inTurn(of: registration(of: r), "the start-up reopen of the encrypted vault") { turn in
                await turn.registration.reopenAfterStart(in: turn)
            }
        }
    }

    /// The vault of a registration answers again (a call that had timed out returned at
    /// last): what waited for it runs now, in that registration's turn (never in that of a
    /// registration made again for the same name), instead of at the next start-up (issue
    /// 40, finding 2: the wipe of a vault held by a process in an uninterruptible wait was
    /// retried only then).
    func vaultAnswersAgain(_ owner: VaultOwner) async {
        guard !stopped else { return }
        await inTurn(of: registration(id: owner.registration, user: owner.user), "what waited for the vault") { turn in
            await turn.registration.vaultAnswersAgain(in: turn)
        }
        await reschedule()
    }

    /// `r` as it is in force: a lock whose failure could not be recorded reads lock-failed
    /// (`Registration.unrecordedLockFailure`), never locked.
    func inForce(_ r: RegistrationRecord) -> RegistrationRecord {
        registry.byID[r.id]?.inForce(r) ?? r
    }
}
