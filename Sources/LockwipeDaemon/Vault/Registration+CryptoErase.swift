import Foundation
import LockwipeBase
import LockwipeCore
import LockwipeSystemd
import Logging

/// Crypto-erase: the wipe of an encrypted vault destroys its key, after which what is
/// left is ciphertext and the files are only unlinked.
extension Registration {
    /// Destroys the vault key of a committed wipe: the lock already removed it from the
    /// kernel (checked here), and every wrapped copy is deleted from the context.store. Returns when
    /// and how long after the request, or nil when the key is not verifiably gone from
    /// the kernel (files held open by processes that were not ended): the wrapped copies
    /// are destroyed anyway, and the wipe then falls back to overwriting, which cannot open
    /// such files and so stays incomplete and pending until they close.
    nonisolated(nonsending) func destroyVaultKey(
        _ r: RegistrationRecord, trigger: Trigger, reason: String, requested: ContinuousClock.Instant, in turn: borrowing RegistrationTurn
    ) async -> (at: Int64, seconds: Double?)? {
        let user = r.user
        // Decided from the key itself (key status on the recorded vault's filesystem), never
        // from the path: a vault that cannot be opened is not known to be locked.
        let (encryption, vaults) = (context.encryption, r.vaults)
        let kernelGone: Bool
        do {
            kernelGone = try await context.vaultCalls.run(for: vaultOwner, "the check that the key left the kernel") { encryption.isLocked(vaults) }
        } catch {
            await context.vaultStalled(r, "wipe", error, in: turn)
            kernelGone = false
        }
        let elapsed = ContinuousClock.now - requested
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let now = context.clock.now().wall
        do {
            let detail = "vault key destroyed (removed from the kernel, wrapped copy overwritten and deleted) \(String(format: "%.3f", seconds)) s after the wipe request"
            if try await context.store.destroyVaultKey(turn.held, at: now, secondsSinceRequest: seconds, event: context.event(user, .keyDestroyed, trigger, detail, at: now)) {
                var meta = context.journalFields(r, action: "wipe", trigger: trigger, reason: reason, id: .keyDestroyed)
                meta["key_destroyed_usec"] = .string(JournalFields.microseconds(seconds: seconds))
                meta["key_in_kernel"] = kernelGone ? "absent" : "still in use"
                context.logger.notice("vault key of \(user) destroyed: its data is unrecoverable", metadata: meta)
            }
        } catch {
            context.logger.critical(
                "cannot destroy the wrapped vault key; overwriting the files instead",
                metadata: ["user": .string(user), "error": .string(ErrorWords.of(error)), "message_id": MessageID.actionFailed.metadata])
            return nil
        }
        guard kernelGone else {
            context.logger.error(
                "the vault key of \(user) is still in kernel memory: files in the vault are held open by processes that were not ended",
                metadata: ["user": .string(user), "message_id": MessageID.actionFailed.metadata])
            return nil
        }
        do {
            // nil: not destroyed by this call (an earlier attempt did), as recorded then.
            return try await context.store.keyDestroyed(registration: id) ?? (now, seconds)
        } catch {
            context.stateNotice("the time the vault key of \(user) was destroyed is not read back; the certificate gives this attempt's", user: user, error)
            return (now, seconds)
        }
    }
}
