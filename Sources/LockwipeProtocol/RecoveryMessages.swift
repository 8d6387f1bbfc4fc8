/// `GetRecoveryWraps`: the organisation recovery wraps of the encrypted vaults of `user`,
/// or of every registration (administrators only; docs/key-material.md, "Recovery").
public struct RecoveryWrapsRequest: Codable, Sendable, Equatable {
    public var user: String?
    public init(user: String? = nil) { self.user = user }
}

/// One encrypted vault's key as sealed to the organisation's recovery key: what
/// `lockwipectl recover` opens with the private key. Not secret without that key.
public struct RecoveryWrapInfo: Codable, Sendable, Equatable {
    public var user: String
    /// The registration the wrap is bound to (HPKE's associated data), and the one
    /// `Recover` must name.
    public var registrationId: String
    /// The identifier of the recovery key it is sealed to.
    public var recoveryKey: String
    /// HPKE's encapsulated key, base64.
    public var encapsulated: String
    /// The sealed vault key, base64.
    public var sealed: String

    public init(user: String, registrationId: String, recoveryKey: String, encapsulated: String, sealed: String) {
        self.user = user
        self.registrationId = registrationId
        self.recoveryKey = recoveryKey
        self.encapsulated = encapsulated
        self.sealed = sealed
    }

    enum CodingKeys: String, CodingKey {
        case user, encapsulated, sealed
        case registrationId = "registration_id"
        case recoveryKey = "recovery_key"
    }
}

/// An encrypted vault that has no recovery wrap to read, and why.
public struct RecoveryMissing: Codable, Sendable, Equatable {
    public var user: String
    public var reason: String
    public init(user: String, reason: String) {
        self.user = user
        self.reason = reason
    }
}

public struct RecoveryWrapsReply: Codable, Sendable, Equatable {
    public var wraps: [RecoveryWrapInfo]
    public var missing: [RecoveryMissing]
    public init(wraps: [RecoveryWrapInfo], missing: [RecoveryMissing]) {
        self.wraps = wraps
        self.missing = missing
    }
}

/// `Recover`: the vault key of registration `registrationId` (of `user`), opened by the
/// caller with the organisation's private key. Secret: never logged.
public struct RecoverRequest: Codable, Sendable, Equatable {
    public var user: String
    public var registrationId: String
    /// The vault key, base64.
    public var key: String
    /// A passcode to wrap the key under from now on.
    public var newPasscode: String?

    public init(user: String, registrationId: String, key: String, newPasscode: String? = nil) {
        self.user = user
        self.registrationId = registrationId
        self.key = key
        self.newPasscode = newPasscode
    }

    enum CodingKeys: String, CodingKey {
        case user, key
        case registrationId = "registration_id"
        case newPasscode = "new_passcode"
    }
}
