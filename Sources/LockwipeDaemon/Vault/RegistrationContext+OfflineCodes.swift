import LockwipeBase
import LockwipeCore

/// The machine's offline-code key (`OfflineCodeKeyFile`) and the key epoch its challenges
/// are of: what a registration's code entry checks, and `status` and provisioning read.
extension RegistrationContext {
    var offlineCodeKeyFile: OfflineCodeKeyFile { OfflineCodeKeyFile(stateDirectory: paths.stateDirectory) }

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
            stored = try await BlockingPool.run { try file.load()?.machine }
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
}
