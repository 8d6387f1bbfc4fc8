import Foundation
import LockwipeBase
import LockwipeCore
import LockwipeSystemd
import Logging

/// How lockwiped records what it does: history events (one kind per `EventKind`), the
/// journal fields every action carries, and failures turned into `ManagerError`.
extension RegistrationContext {
    /// A history event; one asked for on the control socket records who asked
    /// (`RequestingClient.current`), as its journal entries do.
    func event(_ user: String, _ kind: EventKind, _ trigger: Trigger?, _ detail: String, at time: Int64) -> StoredEvent {
        var e = StoredEvent(time: time, user: user, kind: kind, trigger: trigger, detail: detail)
        if let client = RequestingClient.current {
            e.requester = StoredEvent.Requester(uid: client.uid, pid: client.pid, comm: client.comm)
        }
        return e
    }

    func journalFields(_ r: RegistrationRecord, action: String, trigger: Trigger, reason: String, id: MessageID) -> Logger.Metadata {
        [
            "message_id": id.metadata, "user": .string(r.user), "uid": "\(r.uid)", "action": .string(action),
            "trigger": .string(trigger.rawValue), "reason": .string(reason),
            "offline_seconds": "\(r.clock.offlineSeconds)", "directories": .string(r.directories.joined(separator: "\n")),
        ]
    }

    /// Logs a failed filesystem step and returns the caller's `ActionFailed`.
    func failure(_ user: String, _ action: String, _ error: any Error) -> ManagerError {
        logger.error(
            "\(action) of \(user) failed: \(ErrorWords.of(error))",
            metadata: [
                "user": .string(user), "action": .string(action), "message_id": MessageID.actionFailed.metadata,
            ])
        return ManagerError.actionFailed("\(action) of \(user) failed: \(ErrorWords.of(error))")
    }

    /// A read or write of the state database that failed where the daemon carries on: the
    /// journal says what was not read or recorded and what follows (MESSAGE_ID
    /// `stateUnavailable`, or `stateDamaged` when the database is damaged).
    func stateNotice(_ what: String, user: String? = nil, _ error: any Error) {
        var meta: Logger.Metadata = [
            "error": .string(ErrorWords.of(error)), "path": .string(store.path),
            "message_id": (error is StateStoreDamage ? MessageID.stateDamaged : MessageID.stateUnavailable).metadata,
        ]
        if let user { meta["user"] = .string(user) }
        logger.error("\(what): the state database cannot be read or written: \(ErrorWords.of(error))", metadata: meta)
    }

    /// A request that failed because the state database could not be read or written:
    /// logged (`stateNotice`), and the caller's `ActionFailed` in words.
    func stateFailure(_ user: String, _ action: String, _ error: any Error) -> ManagerError {
        if let known = error as? ManagerError { return known }
        stateNotice("\(action) of \(user) failed, nothing was changed", user: user, error)
        return ManagerError.actionFailed("\(action) of \(user) failed, nothing was changed: the state database cannot be read or written: \(ErrorWords.of(error))")
    }
}
