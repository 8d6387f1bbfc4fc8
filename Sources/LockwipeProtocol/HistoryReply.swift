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
    /// Who asked for it on the control socket; absent for what lockwiped did of its own
    /// accord (offline, server, logout, start-up) and for events recorded before requesters
    /// were.
    public var requester: Requester?
    /// A run of refusals recorded as one event (`HistoryRetention`): how many (2 or more),
    /// and when the last was (`time` is the first's, `detail` the last one's). Absent for
    /// a single event.
    public var repeats: Int?
    public var lastTime: String?

    /// The client that asked: its uid, pid and `/proc/PID/comm` (a name any process may
    /// choose, informative only) when it connected.
    public struct Requester: Codable, Sendable, Equatable {
        public var uid: UInt32
        public var pid: Int32
        public var comm: String?
        public init(uid: UInt32, pid: Int32, comm: String? = nil) {
            self.uid = uid
            self.pid = pid
            self.comm = comm
        }
    }

    public init(
        time: String, user: String, kind: String, trigger: Trigger?, detail: String, certificate: SanitizationCertificate? = nil, uid: UInt32? = nil,
        registrationId: String? = nil, requester: Requester? = nil, repeats: Int? = nil, lastTime: String? = nil
    ) {
        self.time = time
        self.user = user
        self.kind = kind
        self.trigger = trigger
        self.detail = detail
        self.certificate = certificate
        self.uid = uid
        self.registrationId = registrationId
        self.requester = requester
        self.repeats = repeats
        self.lastTime = lastTime
    }

    // The wire's snake-case keys, explicit: decoding with the default key strategy is cheaper.
    enum CodingKeys: String, CodingKey {
        case time, user, kind, trigger, detail, certificate, uid
        case registrationId = "registration_id"
        case requester, repeats
        case lastTime = "last_time"
    }
}

public struct HistoryReply: Codable, Sendable, Equatable {
    public var events: [HistoryEvent]
    /// True when older events were left out to keep the reply within its bound
    /// (`HistoryRetention.maxReplyBytes`): the newest are kept. Absent otherwise.
    public var truncated: Bool?
    public init(events: [HistoryEvent], truncated: Bool? = nil) {
        self.events = events
        self.truncated = truncated
    }
}

/// `GetCertificate`'s reply.
public struct CertificateReply: Codable, Sendable, Equatable {
    public var certificate: SanitizationCertificate
    public init(certificate: SanitizationCertificate) { self.certificate = certificate }
}
