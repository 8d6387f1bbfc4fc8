public struct NoParameters: Codable, Sendable, Equatable {
    public init() {}
}

/// `GetStatus`, `CheckIn`: one registration or (nil) all that the caller may see.
public struct UserFilter: Codable, Sendable, Equatable {
    public var user: String?
    public init(user: String? = nil) { self.user = user }
}

/// `GetStatus`: `UserFilter`'s user, and whether the login gate asks (then the start-up
/// pass is refused with `StartingUp` instead of answered with what it has done so far).
public struct StatusRequest: Codable, Sendable, Equatable {
    public var user: String?
    public var loginGate: Bool?
    public init(user: String? = nil, loginGate: Bool? = nil) {
        self.user = user
        self.loginGate = loginGate
    }

    // The wire's snake-case keys, explicit: decoding with the default key strategy is cheaper.
    enum CodingKeys: String, CodingKey {
        case user
        case loginGate = "login_gate"
    }
}

/// `Lock`, `Wipe`: exactly one of `user` or `all` (a `Lock` by an ordinary user: neither
/// means her own registration). `preview` (`Lock` only): change nothing, list the
/// processes the lock would end.
public struct TargetSelection: Codable, Sendable, Equatable {
    public var user: String?
    public var all: Bool?
    public var preview: Bool?
    public init(user: String? = nil, all: Bool? = nil, preview: Bool? = nil) {
        self.user = user
        self.all = all
        self.preview = preview
    }
}

/// `Unlock`, `Unregister`.
public struct UserParameter: Codable, Sendable, Equatable {
    public var user: String
    public init(user: String) { self.user = user }
}

/// `Unlock`. `passcode` opens a passcode-wrapped vault key; `newPasscode` replaces an
/// expired passcode in the same request (it must satisfy the passcode policy). Secret:
/// never logged or stored in the clear.
public struct UnlockRequest: Codable, Sendable, Equatable {
    public var user: String
    public var passcode: String?
    public var newPasscode: String?
    public init(user: String, passcode: String? = nil, newPasscode: String? = nil) {
        self.user = user
        self.passcode = passcode
        self.newPasscode = newPasscode
    }

    // The wire's snake-case keys, explicit: decoding with the default key strategy is cheaper.
    enum CodingKeys: String, CodingKey {
        case user, passcode
        case newPasscode = "new_passcode"
    }
}

/// `SetPasscode`: without `current`, sets the first passcode of a vault whose key the
/// machine key wraps (`passcode set`); with it, changes the passcode (`passcode change`).
public struct PasscodeRequest: Codable, Sendable, Equatable {
    public var user: String
    public var current: String?
    public var new: String
    public init(user: String, current: String? = nil, new: String) {
        self.user = user
        self.current = current
        self.new = new
    }
}

/// `Register`. The credentials are secret: the daemon stores them root-only and never
/// logs or shows them.
public struct RegisterRequest: Codable, Sendable, Equatable {
    public var user: String
    public var directories: [String]
    /// Bearer token for the policy server.
    public var token: String?
    /// PEM certificate (chain) and private key for TLS client authentication.
    public var clientCertificate: String?
    public var clientKey: String?
    /// Refuse unless every directory can become an encrypted (fscrypt) vault.
    public var requireEncryption: Bool?
    /// The first passcode of an encrypted vault (needed where the passcode policy does
    /// not allow the default passcode).
    public var passcode: String?
    /// OAuth 2.0 refresh token (`[server.oauth]`).
    public var refreshToken: String?
    /// The vault's outbox, relative to each directory, in place of `[outbox] directory`.
    public var outbox: String?

    public init(
        user: String, directories: [String], token: String? = nil, clientCertificate: String? = nil, clientKey: String? = nil,
        requireEncryption: Bool? = nil, passcode: String? = nil, refreshToken: String? = nil, outbox: String? = nil
    ) {
        self.refreshToken = refreshToken
        self.outbox = outbox
        self.user = user
        self.directories = directories
        self.token = token
        self.clientCertificate = clientCertificate
        self.clientKey = clientKey
        self.requireEncryption = requireEncryption
        self.passcode = passcode
    }

    // The wire's snake-case keys, explicit: decoding with the default key strategy is cheaper.
    enum CodingKeys: String, CodingKey {
        case user, directories, token
        case clientCertificate = "client_certificate"
        case clientKey = "client_key"
        case requireEncryption = "require_encryption"
        case passcode
        case refreshToken = "refresh_token"
        case outbox
    }
}

/// `SetCredentials`: replaces all stored credentials of a registration (a field left out
/// is removed), e.g. to rotate a token.
public struct CredentialsRequest: Codable, Sendable, Equatable {
    public var user: String
    public var token: String?
    public var clientCertificate: String?
    public var clientKey: String?
    /// OAuth 2.0 refresh token (`[server.oauth]`).
    public var refreshToken: String?

    public init(user: String, token: String? = nil, clientCertificate: String? = nil, clientKey: String? = nil, refreshToken: String? = nil) {
        self.refreshToken = refreshToken
        self.user = user
        self.token = token
        self.clientCertificate = clientCertificate
        self.clientKey = clientKey
    }

    // The wire's snake-case keys, explicit: decoding with the default key strategy is cheaper.
    enum CodingKeys: String, CodingKey {
        case user, token
        case clientCertificate = "client_certificate"
        case clientKey = "client_key"
        case refreshToken = "refresh_token"
    }
}

/// `GetCertificate`: the newest certificate of the user's wipes, or the one with `id`.
public struct CertificateRequest: Codable, Sendable, Equatable {
    public var user: String
    public var id: String?
    public init(user: String, id: String? = nil) {
        self.user = user
        self.id = id
    }
}

/// `GetHistory`: the newest `limit` events (of `user`), only those at or after `since`
/// (seconds since the epoch) when given.
public struct HistoryRequest: Codable, Sendable, Equatable {
    public var user: String?
    public var limit: Int?
    public var since: Int64?
    public init(user: String? = nil, limit: Int? = nil, since: Int64? = nil) {
        self.user = user
        self.limit = limit
        self.since = since
    }
}
