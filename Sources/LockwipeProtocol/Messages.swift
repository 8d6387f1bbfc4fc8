import LockwipeCore

/// The methods of `io.lockwipe.Manager` (see `InterfaceDescription`).
public enum ManagerMethod: String, Sendable, CaseIterable {
    case getStatus = "io.lockwipe.Manager.GetStatus"
    case getPolicy = "io.lockwipe.Manager.GetPolicy"
    case getHistory = "io.lockwipe.Manager.GetHistory"
    case lock = "io.lockwipe.Manager.Lock"
    case unlock = "io.lockwipe.Manager.Unlock"
    case wipe = "io.lockwipe.Manager.Wipe"
    case register = "io.lockwipe.Manager.Register"
    case unregister = "io.lockwipe.Manager.Unregister"
    case checkIn = "io.lockwipe.Manager.CheckIn"
    case setCredentials = "io.lockwipe.Manager.SetCredentials"
    case setPasscode = "io.lockwipe.Manager.SetPasscode"
}

// MARK: Requests

public struct NoParameters: Codable, Sendable, Equatable {
    public init() {}
}

/// `GetStatus`, `CheckIn`: one registration or (nil) all that the caller may see.
public struct UserFilter: Codable, Sendable, Equatable {
    public var user: String?
    public init(user: String? = nil) { self.user = user }
}

/// `Lock`, `Wipe`: exactly one of `user` or `all`.
public struct TargetSelection: Codable, Sendable, Equatable {
    public var user: String?
    public var all: Bool?
    public init(user: String? = nil, all: Bool? = nil) {
        self.user = user
        self.all = all
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

    public init(user: String, directories: [String], token: String? = nil, clientCertificate: String? = nil, clientKey: String? = nil,
                requireEncryption: Bool? = nil, passcode: String? = nil) {
        self.user = user
        self.directories = directories
        self.token = token
        self.clientCertificate = clientCertificate
        self.clientKey = clientKey
        self.requireEncryption = requireEncryption
        self.passcode = passcode
    }
}

/// `SetCredentials`: replaces all stored credentials of a registration (a field left out
/// is removed), e.g. to rotate a token.
public struct CredentialsRequest: Codable, Sendable, Equatable {
    public var user: String
    public var token: String?
    public var clientCertificate: String?
    public var clientKey: String?

    public init(user: String, token: String? = nil, clientCertificate: String? = nil, clientKey: String? = nil) {
        self.user = user
        self.token = token
        self.clientCertificate = clientCertificate
        self.clientKey = clientKey
    }
}

public struct HistoryRequest: Codable, Sendable, Equatable {
    public var user: String?
    public var limit: Int?
    public init(user: String? = nil, limit: Int? = nil) {
        self.user = user
        self.limit = limit
    }
}

// MARK: Replies

/// `GetStatus` reply: the stable `status --json` contract of SPEC. Fields may be added,
/// never renamed.
public struct StatusReport: Codable, Sendable, Equatable {
    public var version: String
    public var server: ServerInfo
    public var policy: PolicyInfo
    public var registrations: [RegistrationInfo]
    public var warnings: [String]

    public init(version: String, server: ServerInfo, policy: PolicyInfo, registrations: [RegistrationInfo], warnings: [String]) {
        self.version = version
        self.server = server
        self.policy = policy
        self.registrations = registrations
        self.warnings = warnings
    }
}

public struct ServerInfo: Codable, Sendable, Equatable {
    public var configured: Bool
    public var url: String?
    /// The server is reached over plain http:// (`[server] allow_insecure_http = true`).
    public var insecureHttp: Bool

    public init(configured: Bool, url: String?, insecureHttp: Bool = false) {
        self.configured = configured
        self.url = url
        self.insecureHttp = insecureHttp
    }

    enum CodingKeys: String, CodingKey { case configured, url, insecureHttp }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        configured = try c.decode(Bool.self, forKey: .configured)
        url = try c.decodeIfPresent(String.self, forKey: .url)
        insecureHttp = try c.decodeIfPresent(Bool.self, forKey: .insecureHttp) ?? false  // added in 1.x: absent from older daemons
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(configured, forKey: .configured)
        try c.encode(url, forKey: .url)  // explicit null: the key is part of the contract
        try c.encode(insecureHttp, forKey: .insecureHttp)
    }
}

public struct PolicyInfo: Codable, Sendable, Equatable {
    public var offlineDaysBeforeLock: Int
    public var offlineDaysBeforeWipe: Int
    /// "local" or "server".
    public var source: String

    public init(policy: Policy, source: String) {
        self.offlineDaysBeforeLock = policy.offlineDaysBeforeLock
        self.offlineDaysBeforeWipe = policy.offlineDaysBeforeWipe
        self.source = source
    }

    public var policy: Policy {
        Policy(offlineDaysBeforeLock: offlineDaysBeforeLock, offlineDaysBeforeWipe: offlineDaysBeforeWipe)
    }
}

public struct NextAction: Codable, Sendable, Equatable {
    public var action: Action
    /// ISO 8601, UTC.
    public var at: String
    public init(action: Action, at: String) {
        self.action = action
        self.at = at
    }
}

public struct RegistrationInfo: Codable, Sendable, Equatable {
    public var user: String
    public var uid: UInt32
    public var state: RegistrationState
    public var protection: Protection
    public var directories: [String]
    public var blocked: Bool
    /// ISO 8601, UTC: the last successful contact (or registration / admin unlock).
    public var lastContact: String
    public var offlineSeconds: Int64
    public var nextAction: NextAction?
    /// Why and when the vault was locked, when it is.
    public var lockTrigger: Trigger?
    /// The last wipe's report, once a wipe ran.
    public var wipe: WipeSummary?
    /// How far the wipe that is running now has come (state `wiping`).
    public var wipeProgress: WipeProgressInfo?
    /// The policy in force for this registration: the server's once it sent a valid one.
    public var policy: PolicyInfo?
    /// "local" or "server" (the same as `policy.source`).
    public var policySource: String?
    /// The x-message-code the server blocked this registration with, while blocked.
    public var blockedCode: String?
    /// ISO 8601, UTC: the last check-in attempt and why it was not a contact (null when it was).
    public var lastAttempt: String?
    public var lastError: String?
    /// ISO 8601, UTC: when the next check-in is planned (null without a server).
    public var nextCheckIn: String?
    /// Which credentials are stored: "none", "token", "certificate", "token+certificate".
    public var credentials: String?
    /// The server's passcode policy (stored and shown; enforced by the passcode feature).
    public var passcodePolicy: PasscodeSettings?
    /// The server's shared-device settings (stored and shown).
    public var sharedDevice: SharedDeviceSettings?
    /// ISO 8601, UTC: when the vault locks because its user has no login session
    /// (`lock_timeout`); null when no such lock is pending.
    public var logoutLockAt: String?
    /// Encrypted vaults: what wraps the vault key, "machine" (the default passcode) or
    /// "passcode" (the user's own).
    public var keyWrapping: String?
    /// Encrypted vaults: ISO 8601, UTC, when the passcode expires (null: never).
    public var passcodeExpires: String?
    /// Encrypted vaults: failed unlocks in a row, and how many the policy allows (0 = unlimited).
    public var failedUnlocks: Int?
    public var retryLimit: Int?
    /// Why the vault cannot be reached as registered (missing, renamed, replaced, a
    /// symlink on its path) or its lock did not verify; null when it can. Always present.
    public var vaultError: String?

    public init(
        user: String, uid: UInt32, state: RegistrationState, protection: Protection, directories: [String],
        blocked: Bool, lastContact: String, offlineSeconds: Int64, nextAction: NextAction?,
        lockTrigger: Trigger? = nil, wipe: WipeSummary? = nil, wipeProgress: WipeProgressInfo? = nil
    ) {
        self.user = user
        self.uid = uid
        self.state = state
        self.protection = protection
        self.directories = directories
        self.blocked = blocked
        self.lastContact = lastContact
        self.offlineSeconds = offlineSeconds
        self.nextAction = nextAction
        self.lockTrigger = lockTrigger
        self.wipe = wipe
        self.wipeProgress = wipeProgress
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(user, forKey: .user)
        try c.encode(uid, forKey: .uid)
        try c.encode(state, forKey: .state)
        try c.encode(protection, forKey: .protection)
        try c.encode(directories, forKey: .directories)
        try c.encode(blocked, forKey: .blocked)
        try c.encode(lastContact, forKey: .lastContact)
        try c.encode(offlineSeconds, forKey: .offlineSeconds)
        try c.encode(nextAction, forKey: .nextAction)  // explicit null when nothing is due
        try c.encode(vaultError, forKey: .vaultError)  // explicit null when the vault is reachable
        try c.encodeIfPresent(lockTrigger, forKey: .lockTrigger)
        try c.encodeIfPresent(wipe, forKey: .wipe)
        try c.encodeIfPresent(wipeProgress, forKey: .wipeProgress)
        try c.encodeIfPresent(policy, forKey: .policy)
        try c.encodeIfPresent(policySource, forKey: .policySource)
        try c.encodeIfPresent(blockedCode, forKey: .blockedCode)
        if policySource != nil {
            // Check-in fields: explicit nulls, so scripts can rely on the keys.
            try c.encode(lastAttempt, forKey: .lastAttempt)
            try c.encode(lastError, forKey: .lastError)
            try c.encode(nextCheckIn, forKey: .nextCheckIn)
        }
        try c.encodeIfPresent(credentials, forKey: .credentials)
        try c.encodeIfPresent(passcodePolicy, forKey: .passcodePolicy)
        try c.encodeIfPresent(sharedDevice, forKey: .sharedDevice)
        if keyWrapping != nil {
            try c.encode(keyWrapping, forKey: .keyWrapping)
            try c.encode(passcodeExpires, forKey: .passcodeExpires)
            try c.encodeIfPresent(failedUnlocks, forKey: .failedUnlocks)
            try c.encodeIfPresent(retryLimit, forKey: .retryLimit)
        }
    }
}

/// A running wipe, as `status` shows it. Totals come from a census taken before the
/// overwrite starts; an unlink-only wipe has none, so it shows a rate but no ETA.
public struct WipeProgressInfo: Codable, Sendable, Equatable {
    /// "counting" (the census before overwriting) or "erasing".
    public var phase: String
    public var filesOverwritten: Int
    public var bytesOverwritten: Int64
    public var entriesRemoved: Int
    public var skipped: Int
    public var filesTotal: Int?
    public var bytesTotal: Int64?
    public var elapsedSeconds: Double
    /// Bytes overwritten per second so far (entries per second for an unlink-only wipe).
    public var bytesPerSecond: Double
    public var entriesPerSecond: Double
    public var etaSeconds: Double?

    public init(
        phase: String, filesOverwritten: Int, bytesOverwritten: Int64, entriesRemoved: Int, skipped: Int,
        filesTotal: Int?, bytesTotal: Int64?, elapsedSeconds: Double, bytesPerSecond: Double,
        entriesPerSecond: Double, etaSeconds: Double?
    ) {
        self.phase = phase
        self.filesOverwritten = filesOverwritten
        self.bytesOverwritten = bytesOverwritten
        self.entriesRemoved = entriesRemoved
        self.skipped = skipped
        self.filesTotal = filesTotal
        self.bytesTotal = bytesTotal
        self.elapsedSeconds = elapsedSeconds
        self.bytesPerSecond = bytesPerSecond
        self.entriesPerSecond = entriesPerSecond
        self.etaSeconds = etaSeconds
    }
}

/// What a wipe did, honestly: a wipe with skipped entries is incomplete.
public struct WipeSummary: Codable, Sendable, Equatable {
    public struct Skipped: Codable, Sendable, Equatable {
        public var path: String
        public var reason: String
        public init(path: String, reason: String) {
            self.path = path
            self.reason = reason
        }
    }

    /// Regular files whose data was overwritten and made durable before they were unlinked.
    public var filesOverwritten: Int
    /// Bytes written over file data, all passes together.
    public var bytesOverwritten: Int64
    /// Names unlinked: files, symlinks, special files and directories.
    public var entriesRemoved: Int
    public var skipped: [Skipped]
    public var elapsedSeconds: Double
    /// Overwrite passes configured for this wipe (0 = unlink only).
    public var passes: Int
    /// "random" or "zeros".
    public var pattern: String
    /// Immutable or append-only attributes the wipe had to clear.
    public var attributesCleared: Int
    /// Crypto-erase (encrypted vaults): ISO 8601, UTC, when the key was destroyed (removed
    /// from the kernel and every wrapped copy deleted), and how many seconds after the wipe
    /// request. From that moment the data is unrecoverable; the files removed afterwards
    /// are ciphertext, so no overwrite pass is needed.
    public var keyDestroyedAt: String?
    public var keyDestroyedSeconds: Double?
    public var cryptoErased: Bool { keyDestroyedAt != nil }
    public var complete: Bool { skipped.isEmpty }

    public init(
        filesOverwritten: Int, bytesOverwritten: Int64, entriesRemoved: Int, skipped: [Skipped], elapsedSeconds: Double,
        passes: Int = 0, pattern: String = "random", attributesCleared: Int = 0
    ) {
        self.filesOverwritten = filesOverwritten
        self.bytesOverwritten = bytesOverwritten
        self.entriesRemoved = entriesRemoved
        self.skipped = skipped
        self.elapsedSeconds = elapsedSeconds
        self.passes = passes
        self.pattern = pattern
        self.attributesCleared = attributesCleared
    }

    enum CodingKeys: String, CodingKey {
        case filesOverwritten, bytesOverwritten, entriesRemoved, skipped, elapsedSeconds, passes, pattern, attributesCleared, complete
        case keyDestroyedAt, keyDestroyedSeconds
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        filesOverwritten = try c.decode(Int.self, forKey: .filesOverwritten)
        bytesOverwritten = try c.decode(Int64.self, forKey: .bytesOverwritten)
        entriesRemoved = try c.decode(Int.self, forKey: .entriesRemoved)
        skipped = try c.decode([Skipped].self, forKey: .skipped)
        elapsedSeconds = try c.decode(Double.self, forKey: .elapsedSeconds)
        // Absent in reports stored by 0.1.0, which never overwrote.
        passes = try c.decodeIfPresent(Int.self, forKey: .passes) ?? 0
        pattern = try c.decodeIfPresent(String.self, forKey: .pattern) ?? "random"
        attributesCleared = try c.decodeIfPresent(Int.self, forKey: .attributesCleared) ?? 0
        keyDestroyedAt = try c.decodeIfPresent(String.self, forKey: .keyDestroyedAt)
        keyDestroyedSeconds = try c.decodeIfPresent(Double.self, forKey: .keyDestroyedSeconds)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(filesOverwritten, forKey: .filesOverwritten)
        try c.encode(bytesOverwritten, forKey: .bytesOverwritten)
        try c.encode(entriesRemoved, forKey: .entriesRemoved)
        try c.encode(skipped, forKey: .skipped)
        try c.encode(elapsedSeconds, forKey: .elapsedSeconds)
        try c.encode(passes, forKey: .passes)
        try c.encode(pattern, forKey: .pattern)
        try c.encode(attributesCleared, forKey: .attributesCleared)
        try c.encode(complete, forKey: .complete)
        try c.encodeIfPresent(keyDestroyedAt, forKey: .keyDestroyedAt)
        try c.encodeIfPresent(keyDestroyedSeconds, forKey: .keyDestroyedSeconds)
    }
}

/// The outcome of an action on one registration.
public struct ActionResult: Codable, Sendable, Equatable {
    public var user: String
    /// "lock", "unlock", "wipe", "register", "unregister", "check-in".
    public var action: String
    /// The registration's state afterwards.
    public var state: RegistrationState?
    /// One human sentence: what happened.
    public var detail: String
    public var wipe: WipeSummary?
    /// True when the action did not achieve what was asked (a check-in that was not a
    /// contact); absent otherwise.
    public var failed: Bool?

    public init(user: String, action: String, state: RegistrationState?, detail: String, wipe: WipeSummary? = nil, failed: Bool? = nil) {
        self.user = user
        self.action = action
        self.state = state
        self.detail = detail
        self.wipe = wipe
        self.failed = failed
    }
}

public struct ActionReply: Codable, Sendable, Equatable {
    public var results: [ActionResult]
    public init(results: [ActionResult]) { self.results = results }
}

/// One entry of the audit history.
public struct HistoryEvent: Codable, Sendable, Equatable {
    /// ISO 8601, UTC.
    public var time: String
    public var user: String
    /// "register", "unregister", "lock", "unlock", "wipe-started", "wipe-resumed", "wipe",
    /// "wipe-incomplete", "clock-rollback", "server-policy", "server-policy-rejected",
    /// "blocked", "unblocked", "credentials".
    public var kind: String
    public var trigger: Trigger?
    public var detail: String

    public init(time: String, user: String, kind: String, trigger: Trigger?, detail: String) {
        self.time = time
        self.user = user
        self.kind = kind
        self.trigger = trigger
        self.detail = detail
    }
}

public struct HistoryReply: Codable, Sendable, Equatable {
    public var events: [HistoryEvent]
    public init(events: [HistoryEvent]) { self.events = events }
}

/// `org.varlink.service.GetInfo` reply.
public struct ServiceInfo: Codable, Sendable, Equatable {
    public var vendor: String
    public var product: String
    public var version: String
    public var url: String
    public var interfaces: [String]

    public init(vendor: String, product: String, version: String, url: String, interfaces: [String]) {
        self.vendor = vendor
        self.product = product
        self.version = version
        self.url = url
        self.interfaces = interfaces
    }
}

public struct InterfaceDescriptionRequest: Codable, Sendable, Equatable {
    public var interface: String
    public init(interface: String) { self.interface = interface }
}

public struct InterfaceDescriptionReply: Codable, Sendable, Equatable {
    public var description: String
    public init(description: String) { self.description = description }
}
