import Foundation
import LockwipeBase
import LockwipeProtocol
import LockwipeWipe
import Logging
import Synchronization

/// The client whose request is being answered (its peer credentials), for the length of
/// the request (a task-local value the control server sets). When that request ends its
/// own user's processes (her own lock, her own wipe, the wrong passcode that wipes her
/// vault), the client is spared so that it can read the answer, and ended afterwards if
/// it has not exited (`Manager.endClientAfterOwnRequest`).
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

/// Ending a user's processes (`[lock] terminate_processes`): all of them, at every lock
/// (`ProcessTerminator`), but the client asking when the request is hers.
extension Manager {
    /// The terminator for a lock of `r` that the configuration asks for; nil when
    /// `terminate_processes` is off.
    func terminator(for r: RegistrationRecord) -> ProcessTerminator? {
        guard configuration.terminateProcesses else { return nil }
        var spared: Int32?
        if let client = RequestingClient.current, client.uid == r.uid, r.uid != 0 {
            client.spared.withLock { $0 = r.user }
            spared = client.pid
        }
        return ProcessTerminator(grace: TimeInterval(configuration.terminateGraceSeconds), sparing: spared)
    }

    /// What a lock of `user` would end now (`lockwipectl lock` lists it first): her
    /// processes, but the client asking when it is hers (a lock spares it). Changes nothing.
    public func lockPreview(user: String) async throws -> ActionResult {
        guard let r = try await store.registration(user) else { throw ManagerError.noSuchRegistration(user) }
        guard configuration.terminateProcesses else {
            return ActionResult(
                user: user, action: "lock", state: r.state, detail: "ends no processes ([lock] terminate_processes = false)", processes: [])
        }
        let client = RequestingClient.current
        let spared = client.flatMap { $0.uid == r.uid ? $0.pid : nil }
        let uid = r.uid
        let entries = try await BlockingPool.run {
            ProcessTerminator(grace: 0, sparing: spared).processes(of: uid).map { pid in
                // Her own choice of name (prctl): control characters shown as "?", never
                // passed on to an administrator's terminal.
                let raw = ProcFile.read("/proc/\(pid)/comm")?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "?"
                let comm = String(String.UnicodeScalarView(raw.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? "?" : $0 }))
                return ProcessEntry(pid: pid, comm: comm, uid: uid)
            }
        }
        let detail = entries.isEmpty ? "ends no processes (none running)" : "ends \(entries.count) process\(entries.count == 1 ? "" : "es")"
        return ActionResult(user: user, action: "lock", state: r.state, detail: detail, processes: entries)
    }

    /// After a request that ended its own user's processes has been answered and its
    /// connection closed: the client (spared so that it could read the answer) has
    /// `clientExit` to exit, and is ended if it has not (a client of her own making gains
    /// no more than that moment). Her other processes are not touched again: she may go
    /// on using the machine, to unlock with her passcode for one.
    public func endClientAfterOwnRequest(user: String, _ client: RequestingClient, clientExit: TimeInterval = 1) async {
        guard configuration.terminateProcesses else { return }
        let terminator = ProcessTerminator(grace: TimeInterval(configuration.terminateGraceSeconds))
        let (uid, pid) = (client.uid, client.pid)
        let outcome: ProcessTerminator.Outcome
        do {
            outcome = try await BlockingPool.run {
                let deadline = Date().addingTimeInterval(clientExit)
                while ProcessTerminator.isRunning(pid), Date() < deadline { usleep(20_000) }
                return terminator.terminate(uid: uid, only: pid)
            }
        } catch {
            logger.error("cannot end the client of \(user)'s own request: \(error)", metadata: ["user": .string(user)])
            return
        }
        if !outcome.ended.isEmpty {
            logger.notice(
                "ended the client (pid \(pid)) still running after the lock of \(user) it asked for",
                metadata: ["user": .string(user), "terminated_pids": .string(outcome.ended.map(String.init).joined(separator: " "))])
        }
        if !outcome.survivors.isEmpty {
            logger.error(
                "after the lock of \(user) its client asked for: \(ProcessesSurvived(uid: uid, pids: outcome.survivors))",
                metadata: ["user": .string(user)])
        }
    }
}
