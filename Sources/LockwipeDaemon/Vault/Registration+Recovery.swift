import Foundation
import LockwipeBase
import LockwipeCore
import LockwipeVaultIO
import Logging

/// Recovery with the organisation's recovery key (docs/key-material.md, "Recovery"): the
/// vault key, opened by `lockwipectl recover` from its recovery wrap, is checked and
/// wrapped again, on a machine whose sealed machine key no longer opens (a cleared TPM, a
/// new board, a changed PCR), or for a forgotten passcode.
extension Registration {
    /// Takes back this vault's key (`recovered`, opened by an administrator from the
    /// recovery wrap) in its turn: it must be the key the vault was made with (its fscrypt
    /// identifier). It is wrapped again under `newPasscode`, or under the machine key; a
    /// machine key that cannot be opened is first set aside and made anew
    /// (`VaultKeys.replaceUnavailableMachineKey`). A passcode wrap gets a new passcode: the
    /// old one cannot be checked without the old machine key. A vault locked at start-up
    /// because its key could not be opened (trigger `resume`) is opened; any other lock
    /// stays, for the way back it has.
    nonisolated(nonsending) func recover(in turn: borrowing RegistrationTurn, key recovered: [UInt8], newPasscode: String?, by caller: Caller) async throws -> Outcome {
        let r = turn.record
        let user = r.user
        guard r.protection == .encrypted else {
            throw ManagerError.actionFailed("\(user) has no encrypted vault (protection: permissions): there is no vault key to recover")
        }
        guard !r.state.isWipeCommitted else {
            throw ManagerError.wrongState(user: user, current: r.state, reason: "\(user) is \(r.state.rawValue): there is no vault key to recover")
        }
        guard let stored = try await context.store.vaultKey(registration: id) else {
            throw ManagerError.actionFailed("no key is stored for the encrypted vault of \(user): there is nothing to recover")
        }
        let matches = try recovered.count == Fscrypt.keySize && VaultKeys.keyIdentifier(recovered) == stored.identifier.bytes
        guard matches else {
            throw ManagerError.invalidParameter(
                "key", reason: "the key given is not the key of the vault of \(user) (its identifier is another): nothing was changed")
        }
        // A wrap made under the machine key as it is now opens: there is nothing to recover
        // (but a forgotten passcode, when a new one is given).
        if newPasscode == nil, let current = context.keys.machineKeyStateNow?.key, stored.wrapped.machineKeyID == KeyWrap.machineKeyIdentifier(current) {
            return Outcome(user: user, operation: .recover, state: r.state, reason: "nothing to recover: its vault key opens with the machine key as it is")
        }
        let policy = context.passcodePolicy(for: r).policy
        if let newPasscode {
            if let problem = policy.problem(with: newPasscode) { throw ManagerError.actionFailed("the new passcode breaks the passcode policy: " + problem) }
        } else if stored.wrapped.wrapping == .passcode || !policy.defaultPasswordAllowed {
            let why =
                stored.wrapped.wrapping == .passcode
                ? "a passcode wraps the vault key of \(user), and it cannot be checked without the machine key it was wrapped with"
                : "the passcode policy does not allow the default passcode"
            throw ManagerError.actionFailed("\(why): give the vault a new passcode (lockwipectl recover \(user) --passcode-stdin); nothing was changed")
        }
        let (state, setAside) = await context.keys.replaceUnavailableMachineKey()
        if let reason = state.problem {
            throw ManagerError.actionFailed("the machine key cannot be opened or made again (\(reason)): the vault key of \(user) was not wrapped again")
        }
        if let setAside {
            context.logger.notice(
                "the machine key could not be opened: it was set aside as \(setAside) (kept, not destroyed) and a new one made, \(Manager.words(state.sealing ?? .plain, context.keys.sealer)); every other vault the old one wrapped needs lockwipectl recover too",
                metadata: [
                    "message_id": MessageID.keyRecovered.metadata, "set_aside": .string(setAside), "peer_uid": "\(caller.credentials.uid)",
                ])
        }
        let wrapped: WrappedKey
        do {
            if let newPasscode {
                wrapped = try await context.keys.wrap(recovered, passcode: newPasscode, binding: keyBinding(r))
            } else {
                wrapped = try await context.keys.wrapWithMachineKey(recovered, binding: keyBinding(r))
            }
        } catch {
            throw context.failure(user, "recover", error)
        }
        let now = context.clock.now().wall
        let under = newPasscode == nil ? "the machine key" : "a new passcode"
        let detail = "vault key recovered with the organisation's recovery key by uid \(caller.credentials.uid) and wrapped again under \(under)"
        let leftover = try await context.store.rewrapVaultKey(
            turn.held, wrapped, passcodeSetAt: newPasscode == nil ? nil : now, event: context.event(user, .keyRecovered, .admin, detail, at: now))
        if let leftover { context.logger.error("recover for \(user): \(leftover)", metadata: ["user": .string(user), "message_id": MessageID.actionFailed.metadata]) }
        context.logger.notice(
            "\(detail) for \(user)",
            metadata: [
                "message_id": MessageID.keyRecovered.metadata, "user": .string(user), "registration_id": .string(id.rawValue),
                "peer_uid": "\(caller.credentials.uid)",
            ])
        guard r.state == .locked, r.lockTrigger == .resume else {
            let still = r.state == .active ? "" : "; it stays \(r.state.rawValue)" + (r.lockTrigger.map { " (trigger \($0.rawValue))" } ?? "") + ": unlock it as that lock says"
            return Outcome(user: user, operation: .recover, state: r.state, reason: detail + still)
        }
        // Locked because its key could not be opened at start-up: opened now, as an
        // administrator's unlock (the passcode just given, or the machine key).
        let opened = try await unlock(in: turn, caller: caller, passcode: newPasscode, newPasscode: nil)
        return Outcome(user: user, operation: .recover, state: opened.state, reason: detail + "; " + opened.reason)
    }
}
