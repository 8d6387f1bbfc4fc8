import LockwipeCore

/// The check-in side of a registration, as persisted (table `server_state`).
public struct ServerRecord: Sendable, Equatable {
    /// The last valid policy the server sent; nil before the first one (local policy applies).
    public var policy: Policy?
    /// The settings document that policy came with (passcode and shared-device settings).
    public var settings: ServerSettings?
    /// Wall time the server policy was last received.
    public var policyReceivedAt: Int64?
    /// Wall time of the last check-in attempt, and its error (nil when it was a contact).
    public var lastAttempt: Int64?
    public var lastError: String?
    /// Failed attempts in a row (drives the backoff).
    public var failures = 0
    /// The x-message-code that blocked the registration, while it is blocked.
    public var blockedCode: String?
    /// Which credentials are stored: "none", or "token", "refresh-token", "certificate" joined by "+".
    public var credentials = "none"

    public init() {}
}
