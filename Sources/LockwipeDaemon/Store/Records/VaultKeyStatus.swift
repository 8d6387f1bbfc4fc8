import LockwipeVaultIO

/// What `status` shows of a vault key: read from the database only (no key file opened).
public struct VaultKeyStatus: Sendable, Equatable {
    public var wrapping: WrappedKey.Wrapping
    public var passcodeSetAt: Int64?
    public var failedAttempts: Int
}
