import LockwipeCore

/// A registration's offline lease as `status` shows it (`OfflineLease`): until when the
/// offline policy neither locks nor wipes it, who granted it and for what.
public struct LeaseInfo: Codable, Sendable, Equatable {
    /// ISO 8601, UTC: when the lease ends.
    public var until: String
    /// ISO 8601, UTC: when it was granted.
    public var grantedAt: String
    /// "offline-code" or "server".
    public var source: String
    /// The challenge an offline code answered, or the policy server's URL.
    public var reference: String
    /// True while its end is ahead on the offline clock.
    public var inForce: Bool
    /// Seconds left (0 once it ended).
    public var remainingSeconds: Int64
    /// ISO 8601, UTC: when its end was recorded (`lease-ended`); null while in force.
    public var endedAt: String?

    public init(until: String, grantedAt: String, source: String, reference: String, inForce: Bool, remainingSeconds: Int64, endedAt: String?) {
        self.until = until
        self.grantedAt = grantedAt
        self.source = source
        self.reference = reference
        self.inForce = inForce
        self.remainingSeconds = remainingSeconds
        self.endedAt = endedAt
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(until, forKey: .until)
        try c.encode(grantedAt, forKey: .grantedAt)
        try c.encode(source, forKey: .source)
        try c.encode(reference, forKey: .reference)
        try c.encode(inForce, forKey: .inForce)
        try c.encode(remainingSeconds, forKey: .remainingSeconds)
        try c.encode(endedAt, forKey: .endedAt)  // explicit null while in force
    }

    // The wire's snake-case keys, explicit: decoding with the default key strategy is cheaper.
    enum CodingKeys: String, CodingKey {
        case until
        case grantedAt = "granted_at"
        case source, reference
        case inForce = "in_force"
        case remainingSeconds = "remaining_seconds"
        case endedAt = "ended_at"
    }
}
