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

    public init(user: String, action: String, state: RegistrationState?, detail: String, wipe: WipeSummary? = nil, failed: Bool? = nil) {
        self.user = user
        self.action = action
        self.state = state
        self.detail = detail
        self.wipe = wipe
        self.failed = failed
    }
}

public struct ActionReply: Codable, Sendable, Equatable {
    public var results: [ActionResult]
    public init(results: [ActionResult]) { self.results = results }
}
