import LockwipeCore

/// An audit event as stored.
public struct StoredEvent: Sendable, Equatable {
    public var time: Int64
    public var user: String
    public var kind: EventKind
    public var trigger: Trigger?
    public var detail: String
    /// The sanitization certificate of a wipe's result event.
    public var certificate: String? = nil
    /// Whose event it is: the uid and id of the registration `user` had when it was
    /// recorded (filled in by the store, `StateStore.append`); nil when it had none, or for
    /// an event recorded before `v11-event-owners` that cannot be attributed: such an event
    /// is shown to administrators only.
    public var uid: UInt32? = nil
    public var registrationID: RegistrationID? = nil
    /// Who asked for it on the control socket (`v12-event-requesters`); nil for what the
    /// daemon did of its own accord (offline, server, logout, start-up) and for events
    /// recorded before requesters were.
    public var requester: Requester? = nil
    /// A run of refusals recorded as one event (`HistoryRetention.merges`,
    /// `v18-event-repeats`): how many, and the time of the last (`time` is the first's).
    /// nil for an event that is no such run.
    public var repeats: Int? = nil
    public var lastTime: Int64? = nil

    public struct Requester: Sendable, Equatable {
        public var uid: UInt32
        public var pid: Int32
        /// The client's `/proc/PID/comm`: its own choice of name, informative only.
        public var comm: String?
    }
}
