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

    /// What a lock does to a registration in this state.
    public enum LockStep: Equatable, Sendable {
        /// Commit the lock, then apply it.
        case lock
        /// Nothing: the lock is in force.
        case alreadyLocked
        /// Apply the committed lock that had failed again (`retryLock`).
        case retry
        /// Refuse: a wipe was committed to (`nextStep` says what to do instead).
        case refuse
    }

    /// What a lock does to a registration in this state (one decision, asked in the
    /// registration's turn).
    public var lockStep: LockStep {
        switch self {
        case .active: return .lock
        case .locked: return .alreadyLocked
        case .lockFailed: return .retry
        case .wipePending, .wiping, .wiped: return .refuse
        }
    }

    /// What an operator can do next with `user`'s registration in this state, in words
    /// (status and every refusal on a wiped or wiping registration end with it); nil when
    /// the state needs nothing. A wipe is never undone: the way forward from one is a new
    /// registration, which gives the user the directory the wipe left (`ExistingVault`).
    public func nextStep(user: String) -> String? {
        switch self {
        case .wiped:
            return "the data of \(user) was wiped; to give \(user) a vault again: lockwipectl unregister --user \(user), "
                + "then lockwipectl register --user \(user) --dir DIR (the wiped directory may be registered again: it is given back to \(user))"
        case .wiping:
            return "the wipe of \(user) is running: lockwipectl status shows its progress; once it is done, unregister and register \(user) again"
        case .wipePending:
            return "the wipe of \(user) is pending: it is retried at the next start of lockwiped (lockwipectl status shows why it stopped); "
                + "it cannot be cancelled"
        case .active, .locked, .lockFailed:
            return nil
        }
    }
}

/// How a vault is protected when locked (`status` says which: README.md "Encrypted vaults").
public enum Protection: String, Sendable, Codable, Equatable {
    /// Owner and mode are recorded, then the directory becomes `root:root 0000`.
    case permissions
    /// An fscrypt v2 directory whose key is removed from the kernel.
    case encrypted
}
