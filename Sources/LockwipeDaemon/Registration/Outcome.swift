import LockwipeCore

/// What an operation did to one registration, in the domain's words. Operations return it;
/// `Control/` turns it into the wire's `Outcome` (`Outcome+Outcome.swift`), as
/// homed's `-varlink.c` files turn a Home into JSON. Nothing outside `Control/` builds a reply.
public struct Outcome: Sendable, Equatable {
    /// The operation, as `lockwipectl` and the reply name it.
    public enum Operation: String, Sendable, Equatable {
        case lock, unlock, wipe, register, unregister, credentials, login
        case checkIn = "check-in"
        case offlineCode = "offline-code"
        case passcodeSet = "passcode-set"
        case passcodeChanged = "passcode-changed"
        case recover
    }

    /// What a lift at login did to a server or offline lock (`PolicyLockLift`): lifted with
    /// the vault opened, or handed back to the passcode with the vault still locked.
    public enum Lift: Sendable, Equatable {
        case lifted
        case handedBack
    }

    /// One process a lock would end.
    public struct Process: Sendable, Equatable {
        public var pid: Int32
        /// Its command name, control characters shown as "?".
        public var comm: String
        public var uid: UInt32
    }

    public var user: String
    public var operation: Operation
    /// The registration's state afterwards; nil when there is none to tell.
    public var state: RegistrationState?
    /// One human sentence: what happened, or why nothing did.
    public var reason: String
    public var wipe: WipeSummary? = nil
    /// True when the operation did not achieve what was asked (a check-in that was not a
    /// contact).
    public var failed = false
    /// A lock's preview: the processes of the user it would end.
    public var processes: [Process]? = nil
    /// A lock's preview: what will undo the lock, for the one asking (`UnlockRule.undo`).
    public var undo: UnlockRule.Undo? = nil
    /// Set on a login's outcome when a lock was lifted or handed back.
    public var lift: Lift? = nil
}
