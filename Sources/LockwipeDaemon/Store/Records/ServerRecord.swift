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
    /// While the server rejects the registration (reached, but refusing it: 403 without a
    /// known message code, 401 a refresh did not cure): the answer's HTTP status, what it
    /// said, and when it first did. The next contact clears them.
    public var rejectedStatus: Int?
    public var rejectedText: String?
    public var rejectedSince: Int64?
    /// Which credentials are stored: "none", or "token", "refresh-token", "certificate" joined by "+".
    public var credentials = "none"
    /// Any credentials are stored.
    public var hasCredentials: Bool { credentials != "none" }

    public init() {}
}
