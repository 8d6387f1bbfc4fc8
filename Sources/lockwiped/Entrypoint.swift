import Dispatch
import Foundation
import LockwipeDaemon
import LockwipeProtocol

@main
struct Entrypoint {
    /// Synchronous on purpose: SIGTERM and SIGINT are caught (`Daemon.catchStopSignals`)
    /// before anything else runs. An `async` main would first park the main thread in
    /// `dispatch_main`, which waits in `sigsuspend` with every signal unblocked: a SIGTERM
    /// sent meanwhile (systemd stopping a lockwiped that is still starting) killed it
    /// outright, even one its parent held pending. Then the command runs as a task, as the
    /// runtime would run an `async` main, and the process exits when it returns.
    static func main() {
        do {
            try Daemon.catchStopSignals()
        } catch {
            FileHandle.standardError.write(Data("lockwiped: cannot catch stop signals: \(error)\n".utf8))
            exit(1)
        }
        Task {
            await LockwipedCommand.main(ProcessArguments.current())
            exit(0)
        }
        dispatchMain()
    }
}
