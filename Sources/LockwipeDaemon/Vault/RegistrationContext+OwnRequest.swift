import Foundation
import LockwipeBase
import LockwipeProcesses
import Logging

/// A user's own lock or wipe spares the client that asked, so that it can read the answer:
/// after the answer, that client is ended (`ControlServer` calls this when the connection closes).
extension RegistrationContext {
    /// After a request that ended its own user's processes has been answered and its
    /// connection closed: the client (spared so that it could read the answer) has
    /// `clientExit` to exit, and is ended if it has not (a client of her own making gains
    /// no more than that moment). Her other processes are not touched again: she may go
    /// on using the machine, to unlock with her passcode for one.
    func endClientAfterOwnRequest(user: String, _ client: RequestingClient, clientExit: TimeInterval = 1) async {
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
