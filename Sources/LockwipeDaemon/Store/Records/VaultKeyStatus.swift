import LockwipeVaultIO

/// What `status` shows of a vault key: read from the database only (no key file opened).
public struct VaultKeyStatus: Sendable, Equatable {
    public var wrapping: WrappedKey.Wrapping
    public var passcodeSetAt: Int64?
    public var failedAttempts: Int
    /// The wrap format of its key file (nil: recorded before issue 43, 2 or older).
    public var format: Int? = nil

    /// Whether the user's passcode alone opens it (a passcode wrap before format 3): a
    /// copy of the disk is then open to offline guessing.
    public var passcodeAlone: Bool { wrapping == .passcode && (format ?? 1) < 3 }
}
