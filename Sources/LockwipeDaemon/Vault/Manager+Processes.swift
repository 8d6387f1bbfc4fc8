import Foundation
import Logging

/// Ending a user's processes (`[lock] terminate_processes`): all of them, at every lock
/// (`ProcessTerminator`); after a lock she asked for herself, the client that asked, once
/// it has had the answer.
extension Manager {
    /// The terminator the configuration asks for; nil when `terminate_processes` is off.
    func terminator(sparing: Int32? = nil) -> ProcessTerminator? {
        guard configuration.terminateProcesses else { return nil }
        return ProcessTerminator(grace: TimeInterval(configuration.terminateGraceSeconds), sparing: sparing)
    }

    /// After a user's own lock has been answered and its connection closed: the client
    /// that asked (spared by the lock so that it could read the answer) has `clientExit`
    /// to exit, and is ended if it has not (a client of her own making gains no more than
    /// that moment). Her other processes are not touched again: she may go on using the
    /// machine, to unlock with her passcode for one.
    public func endClientAfterOwnLock(user: String, uid: UInt32, client: Int32, clientExit: TimeInterval = 1) async {
        guard let terminator = terminator() else { return }
        let outcome: ProcessTerminator.Outcome
        do {
            outcome = try await BlockingPool.run {
                let deadline = Date().addingTimeInterval(clientExit)
                while ProcessTerminator.isRunning(client), Date() < deadline { usleep(20_000) }
                return terminator.terminate(uid: uid, only: client)
            }
        } catch {
            logger.error("cannot end the client of \(user)'s own lock: \(error)", metadata: ["user": .string(user)])
            return
        }
        if !outcome.ended.isEmpty {
            logger.notice(
                "ended the client (pid \(client)) that was still running after the lock \(user) asked for",
                metadata: ["user": .string(user), "terminated_pids": .string(outcome.ended.map(String.init).joined(separator: " "))])
        }
        if !outcome.survivors.isEmpty {
            logger.error(
                "after the lock \(user) asked for: \(ProcessesSurvived(uid: uid, pids: outcome.survivors))",
                metadata: ["user": .string(user)])
        }
    }
}
