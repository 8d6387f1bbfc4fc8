/// Which registration something belongs to: a fresh random id at every registration, so
/// that a check-in answer, a key wrap, a running wipe or any other late result is tied to
/// the registration it belongs to, and not to a later one of the same user name.
///
/// It is the id's text and nothing more: encoded as the plain string (a single value), so
/// every JSON document and database value that held the bare string before holds the same
/// bytes now. The wire (`LockwipeProtocol`) keeps the string: convert at the boundary
/// (`rawValue`, `init(_:)`).
public struct RegistrationID: Hashable, Sendable, Codable, CustomStringConvertible, Comparable {
    public let rawValue: String

    public init(_ rawValue: String) { self.rawValue = rawValue }

    /// A new id: 128 random bits as 32 lowercase hex digits.
    public static func new() -> RegistrationID {
        var rng = SystemRandomNumberGenerator()
        return RegistrationID(
            (0..<2).map { _ in
                let hex = String(rng.next() as UInt64, radix: 16)
                return String(repeating: "0", count: 16 - hex.count) + hex
            }.joined())
    }

    public var description: String { rawValue }

    public static func < (a: RegistrationID, b: RegistrationID) -> Bool { a.rawValue < b.rawValue }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}
