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
}
