import LockwipeCore

/// `GetStatus` reply: the stable `status --json` contract (README.md "lockwipectl",
/// docs/server-protocol.md "Status and journal"). Fields may be added, never renamed.
public struct StatusReport: Codable, Sendable, Equatable {
    public var version: String
    public var server: ServerInfo
    public var policy: PolicyInfo
    public var registrations: [RegistrationInfo]
    public var warnings: [String]
    /// True while lockwiped is in its start-up pass (before READY=1): the registrations
    /// show what it has done so far, and other requests are refused (`StartingUp`).
    /// Absent once it has ended.
    public var startingUp: Bool?
    /// Whether offline codes are provisioned (administrators only; absent for others).
    public var offlineCodes: OfflineCodesInfo?
    /// How the machine key is kept (docs/key-material.md).
    public var machineKey: MachineKeyInfo?

    public init(
        version: String, server: ServerInfo, policy: PolicyInfo, registrations: [RegistrationInfo], warnings: [String], startingUp: Bool? = nil,
        offlineCodes: OfflineCodesInfo? = nil
    ) {
        self.version = version
        self.server = server
        self.policy = policy
        self.registrations = registrations
        self.warnings = warnings
        self.startingUp = startingUp
        self.offlineCodes = offlineCodes
    }

    // The wire's snake-case keys, explicit: decoding with the default key strategy is cheaper.
    enum CodingKeys: String, CodingKey {
        case version, server, policy, registrations, warnings
        case startingUp = "starting_up"
        case offlineCodes = "offline_codes"
        case machineKey = "machine_key"
    }
}

/// `status`' `machine_key`: how lockwiped's machine key is kept at rest ("tpm2": sealed to
/// this machine's TPM2 and the host key; "host": the host key only; "plain": a plain
/// file; null: none made yet), and why it cannot be opened (null when it can).
public struct MachineKeyInfo: Codable, Sendable, Equatable {
    public var sealing: KeySealing?
    public var problem: String?
    /// The organisation recovery key (`[keys] recovery_public_key`) every vault key is also
    /// sealed to, by its identifier ("lwr-" and 16 hex digits); null when none is configured.
    public var recoveryKey: String?

    public init(sealing: KeySealing?, problem: String?, recoveryKey: String? = nil) {
        self.sealing = sealing
        self.problem = problem
        self.recoveryKey = recoveryKey
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(sealing, forKey: .sealing)
        try c.encode(problem, forKey: .problem)
        try c.encode(recoveryKey, forKey: .recoveryKey)
    }

    enum CodingKeys: String, CodingKey {
        case sealing, problem
        case recoveryKey = "recovery_key"
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

    // The wire's snake-case keys, explicit: decoding with the default key strategy is cheaper.
    enum CodingKeys: String, CodingKey {
        case configured, url
        case insecureHttp = "insecure_http"
    }

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
    /// `[notify] warn_before` (seconds; 0: no warnings), for a client that plans the
    /// warnings (`lockwipectl policy --plan`); in the machine's policy only, not a
    /// registration's.
    public var warnBeforeSeconds: Int64?

    public init(policy: Policy, source: String, warnBeforeSeconds: Int64? = nil) {
        self.offlineDaysBeforeLock = policy.offlineDaysBeforeLock
        self.offlineDaysBeforeWipe = policy.offlineDaysBeforeWipe
        self.source = source
        self.warnBeforeSeconds = warnBeforeSeconds
    }

    public var policy: Policy {
        Policy(offlineDaysBeforeLock: offlineDaysBeforeLock, offlineDaysBeforeWipe: offlineDaysBeforeWipe)
    }

    // The wire's snake-case keys, explicit: decoding with the default key strategy is cheaper.
    enum CodingKeys: String, CodingKey {
        case offlineDaysBeforeLock = "offline_days_before_lock"
        case offlineDaysBeforeWipe = "offline_days_before_wipe"
        case source
        case warnBeforeSeconds = "warn_before_seconds"
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

/// An offline-triggered action due within `[notify] warn_before`, as `status` shows it.
public struct WarningInfo: Codable, Sendable, Equatable {
    public var action: Action
    /// ISO 8601, UTC: when the action is due.
    public var at: String
    /// Seconds from the report until it is due.
    public var inSeconds: Int64
    public init(action: Action, at: String, inSeconds: Int64) {
        self.action = action
        self.at = at
        self.inSeconds = inSeconds
    }

    // The wire's snake-case keys, explicit: decoding with the default key strategy is cheaper.
    enum CodingKeys: String, CodingKey {
        case action, at
        case inSeconds = "in_seconds"
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
    /// A lock by the policy server or the offline policy: whether a contact made it
    /// liftable (`[lock] lift_after_contact = "at-login"`), and what it waits for, in words.
    /// Absent for any other state or lock.
    public var lockLiftable: Bool?
    public var lockWaitsFor: String?
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
    /// While the server rejects the registration (reached, but refusing it): the answer's
    /// HTTP status and text, since when, and what to check; null when it does not.
    public var rejected: RejectionInfo?
    /// ISO 8601, UTC: the last check-in attempt and why it was not a contact (null when it was).
    public var lastAttempt: String?
    public var lastError: String?
    /// SAP Mobile Services: the registration's application connection id (`X-SMP-APPCID`),
    /// and why there is none yet (retried at the next check-in).
    public var sapConnection: String?
    public var sapConnectionProblem: String?
    /// SAP Mobile Services: the full reset after a server or offline wipe, once it was made.
    public var sapReset: ServerResetInfo?
    /// SAP Mobile Services: why the server's settings did not set the policy (no
    /// `blockWipingPolicy`: the policy in force is kept).
    public var serverPolicyNote: String?
    /// SAP Mobile Services: the tenant's `passwordPolicyLockTimeout` (seconds), shown, not
    /// enforced: lock on logout comes from `[passcode] lock_timeout`.
    public var sapPasswordPolicyLockTimeout: Int?
    /// ISO 8601, UTC: when the next check-in is planned (null without a server).
    public var nextCheckIn: String?
    /// Which credentials are stored: "none", or "token", "refresh-token", "certificate" joined by "+".
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
    /// The offline lock or wipe due within `[notify] warn_before`; null when none is.
    /// Always present.
    public var warning: WarningInfo?
    /// Which registration this is (a random id, new at every registration): the label of
    /// its metrics series without user labels, and what its history events belong to.
    public var registrationId: String?
    /// The offline lease granted last (in force or ended); null when none was. Always present.
    public var lease: LeaseInfo?
    /// What a copy of the disk gets of the vault (`AtRest`); absent once wiped.
    public var atRest: AtRest?
    /// Its outbox (`[outbox]`); absent without one and with nothing of it kept.
    public var outbox: OutboxInfo?

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
        try c.encode(warning, forKey: .warning)  // explicit null outside the warning window
        try c.encodeIfPresent(lockTrigger, forKey: .lockTrigger)
        try c.encodeIfPresent(lockLiftable, forKey: .lockLiftable)
        try c.encodeIfPresent(lockWaitsFor, forKey: .lockWaitsFor)
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
            try c.encode(rejected, forKey: .rejected)
        }
        try c.encodeIfPresent(sapConnection, forKey: .sapConnection)
        try c.encodeIfPresent(sapConnectionProblem, forKey: .sapConnectionProblem)
        try c.encodeIfPresent(sapReset, forKey: .sapReset)
        try c.encodeIfPresent(serverPolicyNote, forKey: .serverPolicyNote)
        try c.encodeIfPresent(sapPasswordPolicyLockTimeout, forKey: .sapPasswordPolicyLockTimeout)
        try c.encodeIfPresent(credentials, forKey: .credentials)
        try c.encodeIfPresent(passcodePolicy, forKey: .passcodePolicy)
        try c.encodeIfPresent(sharedDevice, forKey: .sharedDevice)
        try c.encodeIfPresent(logoutLockAt, forKey: .logoutLockAt)
        if keyWrapping != nil {
            try c.encode(keyWrapping, forKey: .keyWrapping)
            try c.encode(passcodeExpires, forKey: .passcodeExpires)
            try c.encodeIfPresent(failedUnlocks, forKey: .failedUnlocks)
            try c.encodeIfPresent(retryLimit, forKey: .retryLimit)
        }
        try c.encodeIfPresent(registrationId, forKey: .registrationId)
        try c.encode(lease, forKey: .lease)  // explicit null when no lease was granted
        try c.encodeIfPresent(atRest, forKey: .atRest)
        try c.encodeIfPresent(outbox, forKey: .outbox)
    }

    // The wire's snake-case keys, explicit: decoding with the default key strategy is cheaper.
    enum CodingKeys: String, CodingKey {
        case user, uid, state, protection, directories, blocked
        case lastContact = "last_contact"
        case offlineSeconds = "offline_seconds"
        case nextAction = "next_action"
        case lockTrigger = "lock_trigger"
        case lockLiftable = "lock_liftable"
        case lockWaitsFor = "lock_waits_for"
        case wipe
        case wipeProgress = "wipe_progress"
        case policy
        case policySource = "policy_source"
        case blockedCode = "blocked_code"
        case rejected
        case lastAttempt = "last_attempt"
        case lastError = "last_error"
        case sapConnection = "sap_connection"
        case sapConnectionProblem = "sap_connection_problem"
        case sapReset = "sap_reset"
        case serverPolicyNote = "server_policy_note"
        case sapPasswordPolicyLockTimeout = "sap_password_policy_lock_timeout"
        case nextCheckIn = "next_check_in"
        case credentials
        case passcodePolicy = "passcode_policy"
        case sharedDevice = "shared_device"
        case logoutLockAt = "logout_lock_at"
        case keyWrapping = "key_wrapping"
        case passcodeExpires = "passcode_expires"
        case failedUnlocks = "failed_unlocks"
        case retryLimit = "retry_limit"
        case vaultError = "vault_error"
        case warning
        case registrationId = "registration_id"
        case lease
        case atRest = "at_rest"
        case outbox
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

    // The wire's snake-case keys, explicit: decoding with the default key strategy is cheaper.
    enum CodingKeys: String, CodingKey {
        case phase
        case filesOverwritten = "files_overwritten"
        case bytesOverwritten = "bytes_overwritten"
        case entriesRemoved = "entries_removed"
        case skipped
        case filesTotal = "files_total"
        case bytesTotal = "bytes_total"
        case elapsedSeconds = "elapsed_seconds"
        case bytesPerSecond = "bytes_per_second"
        case entriesPerSecond = "entries_per_second"
        case etaSeconds = "eta_seconds"
    }
}
