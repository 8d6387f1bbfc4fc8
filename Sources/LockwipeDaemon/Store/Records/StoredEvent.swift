import LockwipeCore

/// An audit event as stored.
public struct StoredEvent: Sendable, Equatable {
    public var time: Int64
    public var user: String
    public var kind: String
    public var trigger: Trigger?
    public var detail: String
    /// The sanitization certificate of a wipe's result event.
    public var certificate: String? = nil
}
