/// The passcode policy that protects an encrypted vault's key: SAP MAF's data-vault
/// passcode policy (`[passcode]` in lockwiped.toml(5), or the server's `passwordPolicy*`
/// fields, docs/server-protocol.md). Pure:
/// it judges a passcode and dates, it stores nothing.
public struct PasscodePolicy: Sendable, Equatable, Codable {
    public var minLength = 8
    public var requiresDigit = false
    public var requiresLower = false
    public var requiresUpper = false
    public var requiresSpecial = false
    /// At least this many different characters (0 = no rule).
    public var minUniqueChars = 0
    /// At least this many of the four character classes (digit, lower, upper, special),
    /// whether or not each is required on its own (0 = no rule).
    public var minCharacterClasses = 0
    /// A passcode must be changed this many days after it was set (0 = never).
    public var expirationDays = 0
    /// Failed unlocks in a row that wipe the vault (0 = unlimited).
    public var retryLimit = 0
    /// Seconds after the user's last session ends until the vault locks (0 = not on logout).
    public var lockTimeout = 0
    /// Without a passcode of the user's own, the key may be wrapped by the machine key.
    public var defaultPasswordAllowed = true

    public init() {}

    /// One rule a passcode breaks, named as in the configuration.
    public struct Violation: Sendable, Equatable, CustomStringConvertible {
        public var rule: String
        public var message: String
        public var description: String { "\(rule): \(message)" }
    }

    /// Every rule `passcode` breaks as one sentence ("min_length: ...; digits: ..."); nil
    /// when it is acceptable.
    public func problem(with passcode: String) -> String? {
        let found = violations(of: passcode)
        return found.isEmpty ? nil : found.map(\.description).joined(separator: "; ")
    }

    /// Every rule `passcode` breaks, in a fixed order; empty when it is acceptable.
    public func violations(of passcode: String) -> [Violation] {
        var found: [Violation] = []
        let characters = Array(passcode)
        if characters.count < minLength {
            found.append(.init(rule: "min_length", message: "needs at least \(minLength) characters, has \(characters.count)"))
        }
        let classes = CharacterClass.allCases.filter { c in characters.contains(where: c.contains) }
        for (required, c) in [(requiresDigit, CharacterClass.digit), (requiresLower, .lower), (requiresUpper, .upper), (requiresSpecial, .special)]
        where required && !classes.contains(c) {
            found.append(.init(rule: "requires_\(c.rawValue)", message: "needs at least one \(c.noun)"))
        }
        let unique = Set(characters).count
        if unique < minUniqueChars {
            found.append(.init(rule: "min_unique_chars", message: "needs at least \(minUniqueChars) different characters, has \(unique)"))
        }
        if classes.count < minCharacterClasses {
            found.append(
                .init(
                    rule: "min_character_classes",
                    message: "needs characters of at least \(minCharacterClasses) of digits, lower case, upper case and special characters, has \(classes.count)"))
        }
        return found
    }

    /// Whether a passcode set at `setAt` (seconds since the epoch) must be changed at `now`.
    public func isExpired(setAt: Int64, now: Int64) -> Bool {
        expirationDays > 0 && now - setAt >= Int64(expirationDays) * 86_400
    }

    /// Whether `failedAttempts` failed unlocks in a row reach the retry limit.
    public func retriesExhausted(failedAttempts: Int) -> Bool {
        retryLimit > 0 && failedAttempts >= retryLimit
    }

    /// This policy with every rule the server sent (`passwordPolicy*`) in place of the
    /// local one: the server wins rule by rule, what it did not send stays local. A server
    /// that sends `passwordPolicyEnabled: false` imposes nothing, and the local policy stays.
    public func overridden(by server: PasscodeSettings?) -> PasscodePolicy {
        guard let server, server.enabled != false else { return self }
        var p = self
        if let v = server.minLength { p.minLength = v }
        if let v = server.requiresDigit { p.requiresDigit = v }
        if let v = server.requiresLower { p.requiresLower = v }
        if let v = server.requiresUpper { p.requiresUpper = v }
        if let v = server.requiresSpecial { p.requiresSpecial = v }
        if let v = server.minUniqueChars { p.minUniqueChars = v }
        if let v = server.expirationDays { p.expirationDays = v }
        if let v = server.retryLimit { p.retryLimit = v }
        if let v = server.lockTimeout { p.lockTimeout = v }
        if let v = server.defaultPasswordAllowed { p.defaultPasswordAllowed = v }
        return p
    }

    /// Settings that cannot be satisfied or make no sense, by key: nothing is fixed up.
    public var problems: [(key: String, message: String)] {
        var out: [(String, String)] = []
        for (key, value) in [
            ("min_length", minLength), ("min_unique_chars", minUniqueChars), ("min_character_classes", minCharacterClasses),
            ("expiration_days", expirationDays), ("retry_limit", retryLimit), ("lock_timeout", lockTimeout),
        ] where value < 0 {
            out.append((key, "must be 0 or more, not \(value)"))
        }
        if minCharacterClasses > 4 { out.append(("min_character_classes", "there are only 4 character classes, not \(minCharacterClasses)")) }
        return out
    }
}

/// The character classes the passcode rules speak of.
public enum CharacterClass: String, CaseIterable, Sendable {
    case digit, lower, upper, special

    var noun: String {
        switch self {
        case .digit: return "digit"
        case .lower: return "lower-case letter"
        case .upper: return "upper-case letter"
        case .special: return "special character (not a letter or digit)"
        }
    }

    func contains(_ c: Character) -> Bool {
        switch self {
        case .digit: return c.isNumber
        case .lower: return c.isLowercase
        case .upper: return c.isUppercase
        case .special: return !c.isLetter && !c.isNumber
        }
    }
}
