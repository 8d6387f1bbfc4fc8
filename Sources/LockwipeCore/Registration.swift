/// Where a registration is in its life. Transitions only go forward except
/// `locked -> active` (unlock): `active -> locked -> wipe-pending -> wiping -> wiped`, and
/// `active -> wipe-pending` directly. `lock-failed` is a committed lock that is not in
/// force (the vault is missing, is not the recorded inode, or the lock did not verify):
/// `locked <-> lock-failed` as the daemon retries it at start-up and at every evaluation.
public enum RegistrationState: String, Sendable, Codable, Equatable, CaseIterable {
    case active
    case locked
    case lockFailed = "lock-failed"
    case wipePending = "wipe-pending"
    case wiping
    case wiped

    /// A wipe was committed to and may not be undone; the registration is unusable.
    public var isWipeCommitted: Bool {
        switch self {
        case .wipePending, .wiping, .wiped: return true
        case .active, .locked, .lockFailed: return false
        }
    }

    /// A lock was committed (in force or not): the offline policy does not lock again,
    /// an unlock lifts it.
    public var isLockCommitted: Bool { self == .locked || self == .lockFailed }
}

/// How a vault is protected when locked (`status` says which: README.md "Encrypted vaults").
public enum Protection: String, Sendable, Codable, Equatable {
    /// Owner and mode are recorded, then the directory becomes `root:root 0000`.
    case permissions
    /// An fscrypt v2 directory whose key is removed from the kernel.
    case encrypted
}
