import Foundation
import LockwipeBase
import LockwipeCore
import LockwipeSystemd
import Logging

/// How the Manager records what it does: history events (one kind per `EventKind`), the
/// journal fields every action carries, and failures turned into `ManagerError`.
extension Manager {
    /// A history event; one asked for on the control socket records who asked
    /// (`RequestingClient.current`), as its journal entries do.
    func event(_ user: String, _ kind: EventKind, _ trigger: Trigger?, _ detail: String, at time: Int64) -> StoredEvent {
        var e = StoredEvent(time: time, user: user, kind: kind.rawValue, trigger: trigger, detail: detail)
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
}
