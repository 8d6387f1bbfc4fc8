import LockwipeCore

/// The outcome of an action on one registration.
public struct ActionResult: Codable, Sendable, Equatable {
    public var user: String
    /// "lock", "unlock", "wipe", "register", "unregister", "check-in".
    public var action: String
    /// The registration's state afterwards.
    public var state: RegistrationState?
    /// One human sentence: what happened.
    public var detail: String
    public var wipe: WipeSummary?
    /// True when the action did not achieve what was asked (a check-in that was not a
    /// contact); absent otherwise.
    public var failed: Bool?
    /// A lock's preview (`Lock` with `preview`): the processes of the user it would end.
    public var processes: [ProcessEntry]?
    /// True on a `LiftAtLogin` result whose server or offline lock the login lifted (also
    /// when it was handed back to the passcode and the encrypted vault stays locked);
    /// absent otherwise. `lockwipectl pam-auth` tells the user only about these.
    public var lifted: Bool?
    /// A lock's preview: who will unlock the vault once locked, and how, in the asker's
    /// words; `undoneByAsker` false when the one asking cannot unlock it herself.
    public var undo: String?
    public var undoneByAsker: Bool?

    // The wire's snake-case keys, explicit: decoding with the default key strategy is cheaper.
    enum CodingKeys: String, CodingKey {
        case user, action, state, detail, wipe, failed, processes, lifted, undo
        case undoneByAsker = "undone_by_asker"
    }

    public init(
        user: String, action: String, state: RegistrationState?, detail: String, wipe: WipeSummary? = nil, failed: Bool? = nil,
        processes: [ProcessEntry]? = nil, lifted: Bool? = nil, undo: String? = nil, undoneByAsker: Bool? = nil
    ) {
        self.undo = undo
        self.undoneByAsker = undoneByAsker
        self.processes = processes
        self.lifted = lifted
        self.user = user
        self.action = action
        self.state = state
        self.detail = detail
        self.wipe = wipe
        self.failed = failed
    }
}

/// One process a lock would end: its pid, its command name (`/proc/PID/comm`) and uid.
public struct ProcessEntry: Codable, Sendable, Equatable {
    public var pid: Int32
    public var comm: String
    public var uid: UInt32
    public init(pid: Int32, comm: String, uid: UInt32) {
        self.pid = pid
        self.comm = comm
        self.uid = uid
    }
}

public struct ActionReply: Codable, Sendable, Equatable {
    public var results: [ActionResult]
    public init(results: [ActionResult]) { self.results = results }
}
