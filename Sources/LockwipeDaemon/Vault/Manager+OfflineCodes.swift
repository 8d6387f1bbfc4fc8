import Foundation
import LockwipeBase
import LockwipeCore
import Logging

/// Offline codes (docs/offline-codes.md): a challenge for the helpdesk, its response
/// entered once, and the machine's key. The encoding and the key derivation are
/// `OfflineCode`'s (LockwipeCore); what a response may lift is `PolicyLockLift`'s, with
/// proof `.offlineCode`; the lift itself is the server contact's (`openWithoutPasscode`),
/// and the lease that comes with it `grantLease`'s. Wrong responses back off as wrong
/// passcodes do (`PasscodeBackoff`) and never count toward `retry_limit`.
extension Manager {

    // MARK: Provision

    /// Stores this machine's key (derived by the caller from the fleet secret for `machine`).
    func provisionOfflineCodes(machine: String, machineKey: String, by caller: Caller) async throws -> (machine: String, detail: String) {
        guard let key = Registration.bytes(hex: machineKey), key.count == 32 else {
            throw ManagerError.invalidParameter("machine_key", reason: "the machine key must be 32 bytes in hex (64 hex digits)")
        }
        // The key is for the current epoch, or for the next once the current one's
        // counters are used up; the counters move to it before its key is stored, so that
        // no crash leaves a used-up epoch counting again, nor the old key with new counters.
        let now: RegistrationContext.OfflineCodeEpoch
        let this: UInt64
        do {
            now = try await context.offlineCodeEpoch()
            let target = now.usedUp ? now.epoch + 1 : now.epoch
            this = now.usedUp ? try await BlockingPool.run { try OfflineCodeKeyFile.thisMachine(epoch: target) } : now.machine
        } catch {
            throw ManagerError.actionFailed("offline codes cannot be provisioned: \(ErrorWords.of(error))")
        }
        let target = now.usedUp ? now.epoch + 1 : now.epoch
        guard machine.lowercased() == OfflineCode.hex(machine: this) else {
            throw ManagerError.invalidParameter(
                "machine",
                reason: "the key was derived for machine \(machine), but this machine is \(OfflineCode.hex(machine: this)) at key epoch \(target) (from /etc/machine-id)")
        }
        context.knownOfflineCodes.forget()
        if now.usedUp {
            let moved: Bool
            do {
                moved = try await context.store.advanceOfflineCodeEpoch(to: target, event: nil)
            } catch {
                throw context.stateFailure("this machine", "provisioning the offline codes", error)
            }
            guard moved else { throw ManagerError.actionFailed("the offline codes were provisioned meanwhile: run provision again") }
        }
        let file = context.offlineCodeKeyFile
        let replaced: Bool
        do {
            replaced = try await BlockingPool.run { try file.store(.init(machine: this, key: key)) }
        } catch {
            throw ManagerError.actionFailed("cannot store the offline-code key in \(file.path): \(ErrorWords.of(error))")
        }
        context.knownOfflineCodes.set(OfflineCodesStatus(provisioned: true, machine: OfflineCode.hex(machine: this), provisionEpoch: target))
        let detail =
            (replaced ? "offline-code key replaced" : "offline codes provisioned") + " for machine \(OfflineCode.hex(machine: this))"
            + (target > 0 ? " at key epoch \(target)" : "") + "; the fleet secret was not stored"
        context.logger.notice(
            "\(detail)",
            metadata: [
                "message_id": MessageID.offlineCodesProvisioned.metadata, "machine": .string(OfflineCode.hex(machine: this)),
                "peer_uid": "\(caller.credentials.uid)",
            ])
        return (OfflineCode.hex(machine: this), detail)
    }

    // MARK: Enter

    // MARK: Helpers

}
