import Synchronization

/// Whether this machine answers offline codes, as `status` shows it (the wire's
/// `OfflineCodesInfo`): a key that cannot be read, or was derived for another machine id,
/// is said so in `machine`'s place.
struct OfflineCodesStatus: Sendable, Equatable {
    var provisioned: Bool
    var machine: String?
    /// The key epoch a provisioning derives the key for.
    var provisionEpoch: Int?
}

/// The last `OfflineCodesStatus` read (the key file and /etc/machine-id), kept so that
/// `status` does no file I/O; forgotten when a provisioning or a challenge changes it.
final class KnownOfflineCodes: Sendable {
    private let value = Mutex<OfflineCodesStatus?>(nil)

    var current: OfflineCodesStatus? { value.withLock { $0 } }

    func forget() { value.withLock { $0 = nil } }

    func set(_ status: OfflineCodesStatus) { value.withLock { $0 = status } }

    /// Keeps `status` unless a newer one was set meanwhile (a provisioning that ended while
    /// it was read has said the newer state); returns the one kept.
    func keep(_ status: OfflineCodesStatus) -> OfflineCodesStatus {
        value.withLock { known in
            if known == nil { known = status }
            return known ?? status
        }
    }
}

/// A challenge issued for the helpdesk: its text, the machine id it carries, and what it asks.
struct IssuedChallenge: Sendable, Equatable {
    var user: String
    var text: String
    var machine: String
    var request: String
}
