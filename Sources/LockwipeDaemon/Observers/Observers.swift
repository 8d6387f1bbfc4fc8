import LockwipeCore

/// What is about to happen, or just happened, to one registration's vault.
public struct LockWipeEvent: Sendable, Equatable {
    public var user: String
    public var uid: UInt32
    public var action: Action
    /// One human sentence, e.g. "offline for 8d 2h (policy: lock after 7d)".
    public var reason: String
    public var trigger: Trigger
    public var directories: [String]
    /// Warnings (`warnLock`, `warnWipe`): wall time (Unix seconds) when the action is due;
    /// nil for the other events.
    public var dueAt: Int64?
    /// Locks, wipes: the outbox directories of the vault (`[outbox] directory` in each of
    /// them); empty when no outbox is configured.
    public var outboxDirectories: [String] = []
    /// `didLock`, `didWipe`: what became of the outbox before the lock or wipe, in words
    /// ("sealed 50 file(s), ...", "empty, nothing sealed", "not sealed: ..."); nil when
    /// nothing was to be sealed.
    public var outbox: String?

    public init(user: String, uid: UInt32, action: Action, reason: String, trigger: Trigger, directories: [String], dueAt: Int64? = nil) {
        self.user = user
        self.uid = uid
        self.action = action
        self.reason = reason
        self.trigger = trigger
        self.directories = directories
        self.dueAt = dueAt
    }
}

/// In-process observers of locks and wipes; the hooks (`HookRunner`, README.md "Hooks")
/// are one of them.
///
/// Observers are told; they cannot veto. The daemon enforces whatever an observer does:
/// an observer that throws or never returns is logged and passed over after its timeout.
public protocol LockAndWipeEventObserving: Sendable {
    func willLock(_ event: LockWipeEvent) async
    func didLock(_ event: LockWipeEvent) async
    func willWipe(_ event: LockWipeEvent) async
    func didWipe(_ event: LockWipeEvent) async
    /// An offline-triggered lock is due within `[notify] warn_before` (`event.dueAt`); told
    /// once per threshold, and again after a contact moved it.
    func warnLock(_ event: LockWipeEvent) async
    /// An offline-triggered wipe is due within `[notify] warn_before` (`event.dueAt`).
    func warnWipe(_ event: LockWipeEvent) async
    /// The policy server is reached but rejects the registration (`CheckInOutcome.rejected`):
    /// its check-ins are no contact, so the offline clock runs on toward `event.action`
    /// (due at `event.dueAt`, nil when the policy has nothing due); `event.reason` says
    /// what the server answered and what to check. Told once, when the rejection starts.
    func warnRejected(_ event: LockWipeEvent) async
}

extension LockAndWipeEventObserving {
    /// Observers written before warnings existed ignore them.
    public func warnLock(_ event: LockWipeEvent) async {}
    public func warnWipe(_ event: LockWipeEvent) async {}
    /// Observers written before rejections existed ignore them.
    public func warnRejected(_ event: LockWipeEvent) async {}
}

/// The observer callbacks by name, as hooks receive them in `$1` and `LOCKWIPE_EVENT`.
public enum ObserverCallback: String, Sendable, CaseIterable {
    case willLock, didLock, willWipe, didWipe, warnLock, warnWipe, warnRejected
}

/// Fans an event out to every registered observer, in registration order.
public final class ObserverHub: Sendable {
    private let observers: [any LockAndWipeEventObserving]

    public init(_ observers: [any LockAndWipeEventObserving]) {
        self.observers = observers
    }

    public func notify(_ callback: ObserverCallback, _ event: LockWipeEvent) async {
        for observer in observers {
            switch callback {
            case .willLock: await observer.willLock(event)
            case .didLock: await observer.didLock(event)
            case .willWipe: await observer.willWipe(event)
            case .didWipe: await observer.didWipe(event)
            case .warnLock: await observer.warnLock(event)
            case .warnWipe: await observer.warnWipe(event)
            case .warnRejected: await observer.warnRejected(event)
            }
        }
    }
}
