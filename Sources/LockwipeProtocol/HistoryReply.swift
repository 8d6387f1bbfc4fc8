import LockwipeCore

/// One entry of the audit history.
public struct HistoryEvent: Codable, Sendable, Equatable {
    /// ISO 8601, UTC.
    public var time: String
    public var user: String
    /// "register", "unregister", "lock", "unlock", "wipe-started", "wipe-resumed", "wipe",
    /// "wipe-incomplete", "clock-rollback", "server-policy", "server-policy-rejected",
    /// "blocked", "unblocked", "credentials", "warn-lock", "warn-wipe" (`EventKind`).
    public var kind: String
    public var trigger: Trigger?
    public var detail: String
    /// The sanitization certificate of a wipe's result event ("wipe", "wipe-incomplete").
    public var certificate: SanitizationCertificate?
    /// The uid and id of the registration the event belongs to; absent for an event that
    /// belongs to none (recorded before events were attributed, or for a name that was
    /// not registered), which only administrators see.
    public var uid: UInt32?
    public var registrationId: String?

    public init(
        time: String, user: String, kind: String, trigger: Trigger?, detail: String, certificate: SanitizationCertificate? = nil, uid: UInt32? = nil,
        registrationId: String? = nil
    ) {
        self.time = time
        self.user = user
        self.kind = kind
        self.trigger = trigger
        self.detail = detail
        self.certificate = certificate
        self.uid = uid
        self.registrationId = registrationId
    }
}

public struct HistoryReply: Codable, Sendable, Equatable {
    public var events: [HistoryEvent]
    public init(events: [HistoryEvent]) { self.events = events }
}

/// `GetCertificate`'s reply.
public struct CertificateReply: Codable, Sendable, Equatable {
    public var certificate: SanitizationCertificate
    public init(certificate: SanitizationCertificate) { self.certificate = certificate }
}
