#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The settings document a policy server answers a check-in with, modelled on SAP Mobile
/// Services' `settingsExchange` (see docs/server-protocol.md).
///
/// Decoding is tolerant the way SAP's own clients are: booleans may come as `true` or
/// `"true"`, numbers as `8` or `"8"`, and the document may be wrapped in
/// `{"mobileservices": {"settingsExchange": ...}}` or be the `settingsExchange` object
/// itself. It is strict about everything else: the body must be a JSON object, and a value
/// that is neither form (`"eight"`, `8.5`, `[]`) makes the section it is in invalid, never
/// silently zero.
public struct ServerSettings: Sendable, Equatable, Codable {
    /// `blockWipingPolicy`: nil when the server sent none (the current policy is kept).
    public var lockWipe: LockWipeSettings?
    /// `passwordPolicy`: stored and shown; enforced by the passcode feature.
    public var passcode: PasscodeSettings?
    /// `sharedDevice`: stored and shown.
    public var sharedDevice: SharedDeviceSettings?
    /// `registration.locked`: the server's view of this registration's lock, when it says.
    public var registrationLocked: Bool?
    /// `offlineLease.until` (lockwipe's own protocol only, not SAP's: see
    /// docs/server-protocol.md): the server grants an offline lease until this wall-clock
    /// time (seconds since the epoch), capped by `[offline_codes] max_lease_days`. Nil when
    /// it sent none (the lease in force, if any, is kept).
    public var offlineLeaseUntil: Int64?
    /// Things in the document that could not be used, as (key path, message).
    public var problems: [Problem]
    /// SAP Mobile Services: `passwordPolicy.passwordPolicyLockTimeout` (seconds), kept to be
    /// shown; lockwipe does not enforce it (`ServerProtocol.interpret`).
    public var sapLockTimeout: Int? = nil

    public struct Problem: Sendable, Equatable, Codable, CustomStringConvertible {
        public var key: String
        public var message: String
        public init(key: String, message: String) {
            self.key = key
            self.message = message
        }
        public var description: String { "\(key): \(message)" }
    }

    public init(
        lockWipe: LockWipeSettings? = nil, passcode: PasscodeSettings? = nil, sharedDevice: SharedDeviceSettings? = nil,
        registrationLocked: Bool? = nil, problems: [Problem] = []
    ) {
        self.lockWipe = lockWipe
        self.passcode = passcode
        self.sharedDevice = sharedDevice
        self.registrationLocked = registrationLocked
        self.problems = problems
    }

    /// The offline policy the server asks for, when it sent a usable one.
    ///
    /// `blockWipeEnabled` false means the server switches offline lock and wipe off for this
    /// registration: the policy is "never" (0/0), whatever the periods say. Server-initiated
    /// lock and wipe (HTTP 403) are commands, not policy, and do not depend on it.
    public var policy: Policy? {
        guard let lw = lockWipe else { return nil }
        guard lw.enabled else { return .never }
        return Policy(offlineDaysBeforeLock: lw.blockDisconnectedPeriod, offlineDaysBeforeWipe: lw.wipeDisconnectedPeriod)
    }

    /// Why the document's policy cannot be applied: unusable values, or a policy that fails
    /// the same rules as a local one (`Policy.problems`). Empty when it can be applied (or
    /// when there is no policy in it).
    public var policyProblems: [Problem] {
        var found = problems.filter { $0.key.hasPrefix("blockWipingPolicy") }
        if found.isEmpty, let policy {
            let names = [
                "offline_days_before_lock": "blockWipingPolicy.blockDisconnectedPeriod",
                "offline_days_before_wipe": "blockWipingPolicy.wipeDisconnectedPeriod",
            ]
            found += policy.problems.map { Problem(key: names[$0.key] ?? $0.key, message: $0.message) }
        }
        return found
    }

    /// Largest body a check-in accepts; anything larger is not a contact.
    public static let maxBodyBytes = 1 << 20

    public enum DecodingFailure: Error, Equatable, CustomStringConvertible {
        case notJSON(String)
        case notAnObject
        public var description: String {
            switch self {
            case .notJSON(let why): return "the body is not valid JSON (\(why))"
            case .notAnObject: return "the body is not a JSON object"
            }
        }
    }

    /// Decodes a settings document. Throws only when the body is not a JSON object at all
    /// (a malformed answer, which is not a contact); unusable values inside are `problems`.
    public static func decode(_ data: Data) throws(DecodingFailure) -> ServerSettings {
        let root: JSONValue
        do {
            root = try JSONDecoder().decode(JSONValue.self, from: data)
        } catch let error as DecodingError {
            throw .notJSON(Self.describe(error))
        } catch {
            throw .notJSON("\(error)")
        }
        guard case .object(var doc) = root else { throw .notAnObject }
        // {"mobileservices": {"settingsExchange": {...}}} or {"settingsExchange": {...}} or the bare object.
        if case .object(let ms)? = doc["mobileservices"], case .object(let se)? = ms["settingsExchange"] {
            doc = se
        } else if case .object(let se)? = doc["settingsExchange"] {
            doc = se
        }

        var reader = Reader()
        var settings = ServerSettings()
        if let section = reader.section(doc, "blockWipingPolicy") {
            let enabled = reader.bool(section, "blockWipingPolicy", "blockWipeEnabled") ?? true
            let lock = reader.int(section, "blockWipingPolicy", "blockDisconnectedPeriod") ?? 0
            let wipe = reader.int(section, "blockWipingPolicy", "wipeDisconnectedPeriod") ?? 0
            settings.lockWipe = LockWipeSettings(enabled: enabled, blockDisconnectedPeriod: lock, wipeDisconnectedPeriod: wipe)
        }
        if let section = reader.section(doc, "passwordPolicy") {
            let p = "passwordPolicy"
            var pc = PasscodeSettings()
            pc.enabled = reader.bool(section, p, "passwordPolicyEnabled")
            pc.minLength = reader.int(section, p, "passwordPolicyMinLength")
            pc.requiresDigit = reader.bool(section, p, "passwordPolicyDigitRequired")
            pc.requiresLower = reader.bool(section, p, "passwordPolicyLowerRequired")
            pc.requiresUpper = reader.bool(section, p, "passwordPolicyUpperRequired")
            pc.requiresSpecial = reader.bool(section, p, "passwordPolicySpecialRequired")
            pc.minUniqueChars = reader.int(section, p, "passwordPolicyMinUniqueChars")
            pc.expirationDays = reader.int(section, p, "passwordPolicyExpiresInNDays")
            pc.retryLimit = reader.int(section, p, "passwordPolicyRetryLimit")
            pc.lockTimeout = reader.int(section, p, "passwordPolicyLockTimeout")
            pc.defaultPasswordAllowed = reader.bool(section, p, "passwordPolicyDefaultPasswordAllowed")
            settings.passcode = pc
        }
        if let section = reader.section(doc, "sharedDevice") {
            var sd = SharedDeviceSettings()
            sd.enabled = reader.bool(section, "sharedDevice", "sharedDeviceEnabled")
            sd.maxUsers = reader.int(section, "sharedDevice", "maxUsers")
            sd.lockOnLogout = reader.bool(section, "sharedDevice", "lockOnLogout")
            settings.sharedDevice = sd
        }
        if let section = reader.section(doc, "registration") {
            settings.registrationLocked = reader.bool(section, "registration", "locked")
        }
        if let section = reader.section(doc, "offlineLease") {
            settings.offlineLeaseUntil = reader.time(section, "offlineLease", "until")
        }
        settings.problems = reader.problems
        return settings
    }

    private static func describe(_ error: DecodingError) -> String {
        switch error {
        case .dataCorrupted(let c): return c.underlyingError.map { "\($0)" } ?? c.debugDescription
        default: return "\(error)"
        }
    }

    /// Reads values the SAP way, collecting what cannot be read.
    private struct Reader {
        var problems: [Problem] = []

        mutating func section(_ doc: [String: JSONValue], _ name: String) -> [String: JSONValue]? {
            switch doc[name] {
            case nil, .null?: return nil
            case .object(let o)?: return o
            case let other?:
                problems.append(Problem(key: name, message: "must be an object, not \(other.kind)"))
                return nil
            }
        }

        mutating func bool(_ o: [String: JSONValue], _ section: String, _ key: String) -> Bool? {
            switch o[key] {
            case nil, .null?: return nil
            case .bool(let b)?: return b
            case .string(let s)?:
                switch s.trimmingBlanks().lowercased() {
                case "true": return true
                case "false": return false
                default: break
                }
            default: break
            }
            problems.append(Problem(key: "\(section).\(key)", message: "must be true or false (or \"true\"/\"false\"), not \(o[key]!.shown)"))
            return nil
        }

        /// An ISO 8601 date and time with a time zone (`2026-12-16T08:00:00Z`), as seconds
        /// since the epoch.
        mutating func time(_ o: [String: JSONValue], _ section: String, _ key: String) -> Int64? {
            switch o[key] {
            case nil, .null?: return nil
            case .string(let s)?:
                if let date = try? Date(s.trimmingBlanks(), strategy: .iso8601) { return Int64(date.timeIntervalSince1970.rounded(.down)) }
            default: break
            }
            problems.append(
                Problem(key: "\(section).\(key)", message: "must be an ISO 8601 date and time with its time zone (\"2026-12-16T08:00:00Z\"), not \(o[key]!.shown)"))
            return nil
        }

        mutating func int(_ o: [String: JSONValue], _ section: String, _ key: String) -> Int? {
            switch o[key] {
            case nil, .null?: return nil
            case .number(let n)?:
                if n == n.rounded(), abs(n) <= Double(Int32.max) { return Int(n) }
            case .string(let s)?:
                if let n = Int(s.trimmingBlanks()), abs(n) <= Int(Int32.max) { return n }
            default: break
            }
            problems.append(Problem(key: "\(section).\(key)", message: "must be a whole number (or a string of one), not \(o[key]!.shown)"))
            return nil
        }
    }

    // The wire's snake-case keys, explicit: decoding with the default key strategy is cheaper.
    enum CodingKeys: String, CodingKey {
        case lockWipe = "lock_wipe"
        case passcode
        case sharedDevice = "shared_device"
        case registrationLocked = "registration_locked"
        case offlineLeaseUntil = "offline_lease_until"
        case problems
        case sapLockTimeout = "sap_lock_timeout"
    }
}

/// `blockWipingPolicy`: days without a successful contact before lock and before wipe.
public struct LockWipeSettings: Sendable, Equatable, Codable {
    public var enabled: Bool
    /// Days before the vault locks (SAP: `blockDisconnectedPeriod`); 0 = never.
    public var blockDisconnectedPeriod: Int
    /// Days before the vault is wiped (SAP: `wipeDisconnectedPeriod`); 0 = never.
    public var wipeDisconnectedPeriod: Int

    public init(enabled: Bool, blockDisconnectedPeriod: Int, wipeDisconnectedPeriod: Int) {
        self.enabled = enabled
        self.blockDisconnectedPeriod = blockDisconnectedPeriod
        self.wipeDisconnectedPeriod = wipeDisconnectedPeriod
    }

    // The wire's snake-case keys, explicit: decoding with the default key strategy is cheaper.
    enum CodingKeys: String, CodingKey {
        case enabled
        case blockDisconnectedPeriod = "block_disconnected_period"
        case wipeDisconnectedPeriod = "wipe_disconnected_period"
    }
}

/// `passwordPolicy` (SAP MAF names); nil fields were not sent.
public struct PasscodeSettings: Sendable, Equatable, Codable {
    public var enabled: Bool?
    public var minLength: Int?
    public var requiresDigit: Bool?
    public var requiresLower: Bool?
    public var requiresUpper: Bool?
    public var requiresSpecial: Bool?
    public var minUniqueChars: Int?
    public var expirationDays: Int?
    public var retryLimit: Int?
    /// Seconds.
    public var lockTimeout: Int?
    public var defaultPasswordAllowed: Bool?

    public init() {}

    // The wire's snake-case keys, explicit: decoding with the default key strategy is cheaper.
    enum CodingKeys: String, CodingKey {
        case enabled
        case minLength = "min_length"
        case requiresDigit = "requires_digit"
        case requiresLower = "requires_lower"
        case requiresUpper = "requires_upper"
        case requiresSpecial = "requires_special"
        case minUniqueChars = "min_unique_chars"
        case expirationDays = "expiration_days"
        case retryLimit = "retry_limit"
        case lockTimeout = "lock_timeout"
        case defaultPasswordAllowed = "default_password_allowed"
    }
}

/// Shared-device (multi-user) settings; nil fields were not sent.
public struct SharedDeviceSettings: Sendable, Equatable, Codable {
    public var enabled: Bool?
    public var maxUsers: Int?
    public var lockOnLogout: Bool?

    public init() {}

    // The wire's snake-case keys, explicit: decoding with the default key strategy is cheaper.
    enum CodingKeys: String, CodingKey {
        case enabled
        case maxUsers = "max_users"
        case lockOnLogout = "lock_on_logout"
    }
}

/// Any JSON value, for reading documents whose types vary (settings, SAP's and OAuth's
/// answers).
public enum JSONValue: Decodable, Equatable, Sendable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() {
            self = .null
        } else if let b = try? c.decode(Bool.self) {
            self = .bool(b)
        } else if let n = try? c.decode(Double.self) {
            self = .number(n)
        } else if let s = try? c.decode(String.self) {
            self = .string(s)
        } else if let a = try? c.decode([JSONValue].self) {
            self = .array(a)
        } else {
            self = .object(try c.decode([String: JSONValue].self))
        }
    }

    var kind: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .number: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }

    /// A short rendering for problem messages (never long: a server could send anything).
    var shown: String {
        switch self {
        case .string(let s): return "\"\(s.prefix(40))\(s.count > 40 ? "..." : "")\""
        case .number(let n): return n == n.rounded() && abs(n) < 1e15 ? "\(Int64(n))" : "\(n)"
        case .bool(let b): return "\(b)"
        default: return kind
        }
    }
}
