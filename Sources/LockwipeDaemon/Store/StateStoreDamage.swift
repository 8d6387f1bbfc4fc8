/// Why the state database cannot be trusted. The daemon then enforces nothing (it cannot
/// know what it would be enforcing), says so loudly, and `status` shows this text.
public enum StateStoreDamage: Error, Sendable, Equatable, CustomStringConvertible {
    /// The database was created once (the marker says so) and is gone now.
    case missing(path: String)
    /// It exists but cannot be opened or read, or fails SQLite's integrity check.
    case damaged(path: String, reason: String)
    /// Deleted or replaced while the daemon had it open.
    case replaced(path: String)

    public var description: String {
        what
            + "; lockwiped enforces nothing until it is restored from a backup (lockwiped(8)). Starting afresh instead (moving it aside together with \(StateStore.markerName)) forgets every registration, lock record and pending wipe of this machine (the vaults stay as they are: a locked one stays locked, unknown to lockwipe)"
    }

    private var what: String {
        switch self {
        case .missing(let path):
            return "the state database \(path) is missing, but this machine had one (\(StateStore.markerName) is there): registrations, lock records and pending wipes are unknown"
        case .damaged(let path, let reason):
            return "the state database \(path) is damaged (\(reason))"
        case .replaced(let path):
            return "the state database \(path) was deleted or replaced while lockwiped was running"
        }
    }
}

/// The state database cannot be opened or read for a reason that says nothing about its
/// content (an I/O error, a full or read-only disk): the daemon exits 1 with this text.
public struct StateStoreUnavailable: Error, Sendable, CustomStringConvertible {
    public var path: String
    public var reason: String
    public var description: String { "cannot open the state database \(path): \(reason); it was not changed or moved" }
}
