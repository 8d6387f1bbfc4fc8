import LockwipeBase
import Logging
import Synchronization

/// The client whose request is being answered (its peer credentials), for the length of
/// the request (a task-local value the control server sets). When that request ends its
/// own user's processes (her own lock, her own wipe, the wrong passcode that wipes her
/// vault), the client is spared so that it can read the answer, and ended afterwards if
/// it has not exited (`RegistrationContext.endClientAfterOwnRequest`).
///
/// It is also who did it: every journal entry logged while the request is answered
/// carries `LOCKWIPE_PEER_UID`, `LOCKWIPE_PEER_PID` and `LOCKWIPE_PEER_COMM`
/// (`journalMetadata`, the logging system's metadata provider), and every history event
/// recorded meanwhile its requester (`Manager.event`): one mechanism, not one per call site.
/// Work that outlives the request (the check-in timer, the plan and the warnings it
/// announces) runs without it (`$current.withValue(nil)`): the daemon's own.
public final class RequestingClient: Sendable {
    public let uid: UInt32
    public let pid: Int32
    /// The client's `/proc/PID/comm` when it connected: a name the client chose (any
    /// process may rename itself), shown for what it is, never trusted.
    public let comm: String?
    /// The user whose processes were ended while the client was spared.
    let spared = Mutex<String?>(nil)

    public init(uid: UInt32, pid: Int32, comm: String? = nil) {
        self.uid = uid
        self.pid = pid
        self.comm = comm
    }

    @TaskLocal public static var current: RequestingClient?

    /// The journal fields of the request being answered, if any (swift-log's metadata
    /// provider: `LoggingSystem.bootstrap(_:metadataProvider:)` in lockwiped).
    public static let journalMetadata = Logger.MetadataProvider {
        guard let client = current else { return [:] }
        var fields: Logger.Metadata = ["peer_uid": "\(client.uid)", "peer_pid": "\(client.pid)"]
        if let comm = client.comm { fields["peer_comm"] = .string(comm) }
        return fields
    }

    /// `/proc/PID/comm` of `pid` without its newline; nil when it cannot be read.
    public static func comm(of pid: Int32) -> String? {
        guard pid > 0, let text = ProcFile.read("/proc/\(pid)/comm") else { return nil }
        let name = text.hasSuffix("\n") ? String(text.dropLast()) : text
        return name.isEmpty ? nil : name
    }

    /// The user whose processes this request ended while sparing the client, if any.
    public var sparedFor: String? { spared.withLock { $0 } }
}
