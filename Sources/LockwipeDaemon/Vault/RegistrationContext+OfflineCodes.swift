import LockwipeBase
import LockwipeCore
import Logging

/// The machine's offline-code key (`OfflineCodeKeyFile`) and the key epoch its challenges
/// are of: what a registration's code entry checks, and `status` and provisioning read.
extension RegistrationContext {
    var offlineCodeKeyFile: OfflineCodeKeyFile { OfflineCodeKeyFile(stateDirectory: paths.stateDirectory, sealer: keys.sealer) }

    /// The machine's offline codes now: the key epoch their counters are of, whether those
    /// are used up, and this machine's field in that epoch's challenges.
    struct OfflineCodeEpoch {
        var epoch: Int
        var usedUp: Bool
        var machine: UInt64
    }

    func offlineCodeEpoch() async throws -> OfflineCodeEpoch {
        let (epoch, usedUp) = try await store.offlineCodeEpoch()
        let machine = try await BlockingPool.run { try OfflineCodeKeyFile.thisMachine(epoch: epoch) }
        return OfflineCodeEpoch(epoch: epoch, usedUp: usedUp, machine: machine)
    }

    /// Whether offline codes are provisioned, for `status` (a key that cannot be read, or was
    /// derived for another machine id, is said so in `machine`'s place).
    /// Kept once read, so that `status` does no file I/O; a read that failed is tried again
    /// at the next call. Entering a code reads the key file itself.
    func offlineCodesStatus() async -> OfflineCodesStatus {
        if let known = knownOfflineCodes.current { return known }
        let file = offlineCodeKeyFile
        let stored: UInt64?
        let now: RegistrationContext.OfflineCodeEpoch
        do {
            stored = try await file.load()?.machine
            now = try await offlineCodeEpoch()
        } catch {
            // The key file, the counters, or /etc/machine-id, which the codes name the machine by.
            return OfflineCodesStatus(provisioned: false, machine: "cannot be checked: \(ErrorWords.of(error))")
        }
        let machine = now.machine
        let info: OfflineCodesStatus
        if now.usedUp {
            info = OfflineCodesStatus(
                provisioned: false,
                machine: "the \(OfflineCode.countersPerEpoch) challenges of key epoch \(now.epoch) are used up: provision again, for key epoch \(now.epoch + 1)",
                provisionEpoch: now.epoch + 1)
        } else if let stored, stored != machine {
            info = OfflineCodesStatus(
                provisioned: false,
                machine: "the key was derived for machine \(OfflineCode.hex(machine: stored)), not this one (\(OfflineCode.hex(machine: machine))): provision again",
                provisionEpoch: now.epoch)
        } else {
            info = OfflineCodesStatus(provisioned: stored != nil, machine: OfflineCode.hex(machine: machine), provisionEpoch: now.epoch)
        }
        // A provisioning that ended while this read was under way has said the newer state.
        return knownOfflineCodes.keep(info)
    }

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
            now = try await offlineCodeEpoch()
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
        knownOfflineCodes.forget()
        if now.usedUp {
            let moved: Bool
            do {
                moved = try await store.advanceOfflineCodeEpoch(to: target, event: nil)
            } catch {
                throw stateFailure("this machine", "provisioning the offline codes", error)
            }
            guard moved else { throw ManagerError.actionFailed("the offline codes were provisioned meanwhile: run provision again") }
        }
        let file = offlineCodeKeyFile
        let replaced: Bool
        do {
            replaced = try await file.store(.init(machine: this, key: key))
        } catch {
            throw ManagerError.actionFailed("cannot store the offline-code key in \(file.path): \(ErrorWords.of(error))")
        }
        knownOfflineCodes.set(OfflineCodesStatus(provisioned: true, machine: OfflineCode.hex(machine: this), provisionEpoch: target))
        let detail =
            (replaced ? "offline-code key replaced" : "offline codes provisioned") + " for machine \(OfflineCode.hex(machine: this))"
            + (target > 0 ? " at key epoch \(target)" : "") + "; the fleet secret was not stored"
        logger.notice(
            "\(detail)",
            metadata: [
                "message_id": MessageID.offlineCodesProvisioned.metadata, "machine": .string(OfflineCode.hex(machine: this)),
                "peer_uid": "\(caller.credentials.uid)",
            ])
        return (OfflineCode.hex(machine: this), detail)
    }
}
