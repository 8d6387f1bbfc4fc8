/// `OfflineCodeChallenge`: a new challenge for `user` (nil: the caller's own single
/// registration), asking to lift its lock, or (`extendDays`) to extend its offline lease.
public struct OfflineCodeChallengeRequest: Codable, Sendable, Equatable {
    public var user: String?
    public var extendDays: Int?
    public init(user: String? = nil, extendDays: Int? = nil) {
        self.user = user
        self.extendDays = extendDays
    }

    // The wire's snake-case keys, explicit: decoding with the default key strategy is cheaper.
    enum CodingKeys: String, CodingKey {
        case user
        case extendDays = "extend_days"
    }
}

/// The challenge to read to the helpdesk, and what it asks in words.
public struct OfflineCodeChallengeReply: Codable, Sendable, Equatable {
    public var user: String
    public var challenge: String
    /// The machine id the challenge carries (10 hex digits; never the raw machine-id).
    public var machine: String
    public var request: String
    public init(user: String, challenge: String, machine: String, request: String) {
        self.user = user
        self.challenge = challenge
        self.machine = machine
        self.request = request
    }
}

/// `OfflineCodeEnter`: the helpdesk's response to the registration's outstanding challenge.
/// Secret until used: never logged.
public struct OfflineCodeEnterRequest: Codable, Sendable, Equatable {
    public var user: String?
    public var code: String
    public init(user: String? = nil, code: String) {
        self.user = user
        self.code = code
    }
}

/// `ProvisionOfflineCodes`: this machine's key, derived from the fleet secret by the caller
/// (`lockwipectl offline-code provision`), for the machine id it was derived for. The fleet
/// secret itself never reaches the daemon. Secret: never logged.
public struct ProvisionOfflineCodesRequest: Codable, Sendable, Equatable {
    public var machine: String
    /// The 32-byte key, in hex.
    public var machineKey: String
    public init(machine: String, machineKey: String) {
        self.machine = machine
        self.machineKey = machineKey
    }

    // The wire's snake-case keys, explicit: decoding with the default key strategy is cheaper.
    enum CodingKeys: String, CodingKey {
        case machine
        case machineKey = "machine_key"
    }
}

public struct ProvisionOfflineCodesReply: Codable, Sendable, Equatable {
    public var machine: String
    public var detail: String
    public init(machine: String, detail: String) {
        self.machine = machine
        self.detail = detail
    }
}

/// `status`: whether this machine answers offline codes, and the machine id they carry.
public struct OfflineCodesInfo: Codable, Sendable, Equatable {
    public var provisioned: Bool
    public var machine: String?
    /// The key epoch `provision` derives the key for: the current one, or the next once
    /// the current one's challenges are used up (docs/offline-codes.md, "Single use").
    public var provisionEpoch: Int?
    public init(provisioned: Bool, machine: String?, provisionEpoch: Int? = nil) {
        self.provisioned = provisioned
        self.machine = machine
        self.provisionEpoch = provisionEpoch
    }

    enum CodingKeys: String, CodingKey {
        case provisioned
        case machine
        case provisionEpoch = "provision_epoch"
    }
}
