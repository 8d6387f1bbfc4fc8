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
        what + "; lockwiped enforces nothing until it is restored from a backup, or moved aside together with \(StateStore.markerName) to start afresh (lockwiped(8))"
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
