import Foundation
import LockwipeCore

/// A successful contact as one transaction: what the answer changed and every history
/// event that records it, so that history and state never disagree after a crash.
public struct ContactCommit: Sendable {
    public enum Lock: Sendable, Equatable {
        /// The lock (if any) stays as it is.
        case keep
        /// A server or offline lock was lifted on the filesystem: the record follows.
        case lifted
        /// The server's or the offline lock is lifted but the vault stays locked until its
        /// user unlocks it with the passcode: the lock trigger becomes `user`.
        case handedBack
        /// The lock stays and is recorded as liftable (`lift_after_contact = "at-login"`).
        case liftable
        /// The lock stays and is no longer liftable (the server says it stays locked).
        case notLiftable
    }

    public var clock: OfflineClock
    public var time: Int64
    public var policy: Policy?
    public var settings: ServerSettings?
    public var policyError: String?
    public var lock: Lock
    public var events: [StoredEvent]
}
