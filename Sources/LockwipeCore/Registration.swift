/// Where a registration is in its life. Transitions only go forward except
/// `locked -> active` (unlock): `active -> locked -> wipe-pending -> wiping -> wiped`, and
/// `active -> wipe-pending` directly.
public enum RegistrationState: String, Sendable, Codable, Equatable, CaseIterable {
    case active
    case locked
    case wipePending = "wipe-pending"
    case wiping
    case wiped

    /// A wipe was committed to and may not be undone; the registration is unusable.
    public var isWipeCommitted: Bool {
        switch self {
        case .wipePending, .wiping, .wiped: return true
        case .active, .locked: return false
        }
    }
}

/// How a vault is protected when locked (SPEC: `status` says which).
public enum Protection: String, Sendable, Codable, Equatable {
    /// Owner and mode are recorded, then the directory becomes `root:root 0000`.
    case permissions
    /// An fscrypt v2 directory whose key is removed from the kernel.
    case encrypted
}
