import Foundation
import LockwipeBase
import LockwipeCore
import LockwipeVaultIO
import Logging

extension RegistrationContext {
    /// Records `text` as the vault error of `r`, or logs that it could not.
    nonisolated(nonsending) func setVaultErrorOrLog(_ r: RegistrationRecord, _ text: String?, in turn: borrowing RegistrationTurn) async {
        do {
            try await store.setVaultError(turn.held, text)
        } catch {
            stateNotice("cannot record the vault state of \(r.user)", user: r.user, error)
        }
    }

    nonisolated(nonsending) func vaultStalled(_ r: RegistrationRecord, _ action: String, _ error: any Error, in turn: borrowing RegistrationTurn) async {
        let text = ErrorWords.of(error)
        if r.vaultError != text { await setVaultErrorOrLog(r, text, in: turn) }
        logger.warning(
            "\(action) of \(r.user): \(text)",
            metadata: [
                "user": .string(r.user), "uid": "\(r.uid)", "action": .string(action), "path": .string(r.directories.joined(separator: " ")),
                "error": .string(text),
                "message_id": (error is VaultUnresponsive ? MessageID.vaultUnresponsive : MessageID.vaultUnreachable).metadata,
            ])
    }

    /// An unlock (or other action) that could not reach the vault: the warning, the reason
    /// in `status`, and the caller's `ActionFailed`. Other errors are plain failures.
    nonisolated(nonsending) func vaultFailure(_ r: RegistrationRecord, _ action: String, _ error: any Error, in turn: borrowing RegistrationTurn) async -> ManagerError {
        guard let vaultError = error as? VaultOpenError else { return failure(r.user, action, error) }
        await vaultWarning(r, action, vaultError, in: turn)
        return ManagerError.actionFailed("\(action) of \(r.user) failed, nothing was touched: \(vaultError)")
    }

    /// The journal warning (MESSAGE_ID `vaultUnreachable`) and the `vault_error` of `r`.
    nonisolated(nonsending) func vaultWarning(_ r: RegistrationRecord, _ action: String, _ error: VaultOpenError, in turn: borrowing RegistrationTurn) async {
        let text = "\(error)"
        if r.vaultError != text { await setVaultErrorOrLog(r, text, in: turn) }
        logger.warning(
            "\(action) of \(r.user): the vault cannot be reached as registered; nothing was touched: \(text)",
            metadata: [
                "user": .string(r.user), "uid": "\(r.uid)", "action": .string(action), "path": .string(error.path),
                "error": .string(text), "message_id": MessageID.vaultUnreachable.metadata,
            ])
    }
}
