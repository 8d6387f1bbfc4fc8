import Foundation
import LockwipeBase
import LockwipeCore
import LockwipeVaultIO
import Logging

/// A lock lifted at its user's login (`LiftAtLogin`, from `lockwipectl pam-auth` in the PAM
/// auth stack, pam_fscrypt's model): `PolicyLockLift` decides with proof `.login`; this
/// tries what the login password opens. The password was checked by the PAM stack before
/// (the caller is root: `WhoMay`), so a password that does not open a passcode-wrapped
/// vault key is not a wrong passcode: it never counts toward `retry_limit` nor its back-off,
/// and the back-off does not hold it up.
extension Registration {
    nonisolated(nonsending) func liftAtLogin(in turn: borrowing RegistrationTurn, password: String) async throws -> Outcome {
        let r = turn.record
        let user = r.user
        let setting = context.configuration.liftAfterContact
        let lock = PolicyLockLift.Lock(state: r.state, trigger: r.lockTrigger, liftable: r.lockLiftable)
        switch PolicyLockLift.decide(lock, proof: .login, setting: setting, opens: true) {
        case .notAPolicyLock:
            return Outcome(user: user, operation: .login, state: r.state, reason: "no lock by the policy server or the offline policy to lift")
        case .stays(let why):
            return Outcome(user: user, operation: .login, state: r.state, reason: "the lock stays: \(why)")
        case .becomesLiftable, .lift, .handBack:
            break
        }
        // What the login opens: a permission lock always; an encrypted vault when the
        // machine key wraps its key, or when the login password is its passcode.
        var key: [UInt8]?
        var stored: StoredVaultKey?
        var notOpened = ""
        if r.protection == .encrypted {
            guard let found = try await context.store.vaultKey(registration: id) else {
                throw ManagerError.actionFailed("no key is stored for the encrypted vault of \(user); it cannot be unlocked (wipe it to start again)")
            }
            stored = found
            do {
                switch found.wrapped.wrapping {
                case .machine:
                    key = try await context.keys.openWithMachineKey(found.wrapped, binding: keyBinding(r))
                case .passcode:
                    key = try await context.keys.open(found.wrapped, passcode: password, binding: keyBinding(r))
                    let policy = context.passcodePolicy(for: r).policy
                    if let setAt = found.passcodeSetAt, policy.isExpired(setAt: setAt, now: context.clock.now().wall) {
                        key?.wipe()
                        key = nil
                        notOpened = "the passcode has expired: replace it with lockwipectl unlock"
                    }
                }
            } catch KeyWrapError.wrongPasscode {
                notOpened = "the login password is not the vault passcode (not counted toward retry_limit): unlock with lockwipectl unlock and the passcode"
            } catch {
                throw context.failure(user, "lift at login", error)
            }
        }
        defer { key?.wipe() }
        let reading = context.clock.now()
        switch PolicyLockLift.decide(lock, proof: .login, setting: setting, opens: r.protection != .encrypted || key != nil) {
        case .lift:
            let by = lock.trigger == .server ? "server" : "offline"
            if let stored, let key {
                if stored.wrapped.wrapping == .passcode { try await context.store.resetFailedUnlocks(turn.held) }
                await bindToRegistration(r, stored, key: key, passcode: stored.wrapped.wrapping == .passcode ? password : nil, trigger: .user, in: turn)
            }
            try await liftLock(r, context.lock(for: r), records: try await context.store.lockRecords(registration: id), key: key, in: turn)
            let reason = "the \(by) lock, made liftable by a contact with the policy server, was lifted at the login of \(user)"
            try await context.store.commitUnlock(turn.held, clock: nil, event: context.event(user, .unlock, .user, reason, at: reading.wall))
            context.logger.notice("lifted the lock of \(user) at login", metadata: context.journalFields(r, action: "unlock", trigger: .user, reason: reason, id: .liftedAtLogin))
            return Outcome(user: user, operation: .login, state: .active, reason: "unlocked at login", lift: .lifted)
        case .handBack:
            let by = lock.trigger == .server ? "server" : "offline"
            let reason = "the \(by) lock was lifted at the login of \(user); the encrypted vault stays locked: \(notOpened)"
            try await context.store.commitHandBack(turn.held, event: context.event(user, .lockLifted, .user, reason, at: reading.wall))
            context.logger.notice(
                "lifted the \(by) lock of \(user) at login; the vault stays locked",
                metadata: context.journalFields(r, action: "lock-lifted", trigger: .user, reason: reason, id: .liftedAtLogin))
            return Outcome(user: user, operation: .login, state: r.state, reason: "lock lifted; the vault stays locked: \(notOpened)", lift: .handedBack)
        case .notAPolicyLock, .stays, .becomesLiftable:
            return Outcome(user: user, operation: .login, state: r.state, reason: "nothing lifted")
        }
    }
}
