import Foundation
import LockwipeBase
import LockwipeCore
import LockwipeProcesses
import LockwipeProtocol
import Logging
import Synchronization

/// Ending a user's processes (`[lock] terminate_processes`): all of them, at every lock
/// (`ProcessTerminator`), but the client asking when the request is hers.
extension Manager {
    /// The terminator for a lock of `r` that the configuration asks for; nil when
    /// `terminate_processes` is off. The client asking is spared only when the lock or
    /// wipe is her own, asked by a client of her uid: her lock or wipe (`.user`), or the
    /// wipe her own wrong passcode set off (`.retryLimit`). A lock the server orders in the
    /// answer to a check-in she asked, or an administrator's, spares nothing of hers
    /// (issue 40, finding 4).
    func terminator(for r: RegistrationRecord, trigger: Trigger) -> ProcessTerminator? {
        guard configuration.terminateProcesses else { return nil }
        var spared: Int32?
        if trigger == .user || trigger == .retryLimit, let client = RequestingClient.current, client.uid == r.uid, r.uid != 0 {
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
