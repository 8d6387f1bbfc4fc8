import LockwipeVaultIO

/// An encrypted vault's key as the store keeps it: wrapped only (see `WrappedKey`), in a
/// file of its own (`keyFile`, see `KeyFiles`), with the kernel's identifier of the key
/// (not secret: derived from it one-way), when the passcode was set (nil while the machine
/// key wraps it) and the failed unlocks in a row.
public struct StoredVaultKey: Sendable, Equatable {
    public var identifier: Fscrypt.KeyIdentifier
    public var wrapped: WrappedKey
    public var passcodeSetAt: Int64?
    public var failedAttempts: Int
    /// The name of the file in `keys/` holding `wrapped`; nil until it is written.
    public var keyFile: String?
    /// When the last of the `failedAttempts` was made (wall-clock seconds).
    public var lastFailedAt: Int64?

    public init(identifier: Fscrypt.KeyIdentifier, wrapped: WrappedKey, passcodeSetAt: Int64?, failedAttempts: Int = 0, keyFile: String? = nil) {
        self.identifier = identifier
        self.wrapped = wrapped
        self.passcodeSetAt = passcodeSetAt
        self.failedAttempts = failedAttempts
        self.keyFile = keyFile
    }
}
