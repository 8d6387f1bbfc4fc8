import Foundation

/// SIGTERM and SIGINT, caught from the daemon's first steps to its exit.
///
/// systemd may stop lockwiped at any moment of its start (`systemctl stop` or `restart`
/// while it is still activating). A stop signal that arrives before anything catches it
/// kills the daemon where it stands: requests its control socket has already read go
/// unanswered and the exit is not clean. swift-service-lifecycle catches signals only from
/// `ServiceGroup.run()`, and when it starts catching it sets them to be ignored first,
/// which would drop one that arrived just before. So lockwiped catches them itself:
/// `install()` sets a handler that writes the signal to a pipe (the one thing a handler
/// may safely do), then unblocks them, so that a signal held pending since before
/// `exec` (a parent that blocked it) is delivered now; `next()` returns it, and the daemon
/// asks its service group for a graceful shutdown (`Daemon.run`).
package enum StopSignals {
    /// The signals that stop the daemon.
    package static let signals: [Int32] = [SIGTERM, SIGINT]

    /// The pipe's write end, for the handler; -1 until `install()`.
    nonisolated(unsafe) private static var writeEnd: Int32 = -1
    /// The daemon's pid: a child forked from it keeps the handler and the pipe until it
    /// execs or exits.
    nonisolated(unsafe) private static var daemon: pid_t = 0
    nonisolated(unsafe) private static var readEnd: Int32 = -1

    /// Catches the stop signals from now on, as early as the daemon starts; once (a second
    /// call changes nothing).
    package static func install() throws {
        guard writeEnd < 0 else { return }
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { throw FileSystemError("create a pipe for", "the stop signals") }
        // Not passed to hooks or helpers; the write end does not block: a handler never
        // waits, and a full pipe already holds a stop.
        _ = fcntl(ends[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(ends[1], F_SETFD, FD_CLOEXEC)
        _ = fcntl(ends[1], F_SETFL, O_NONBLOCK)
        readEnd = ends[0]
        writeEnd = ends[1]
        var action = sigaction()
        daemon = getpid()
        action.__sigaction_handler.sa_handler = { signal in
            // In a forked child (`lockwipe_spawn_signal_as` becomes the user whose
            // processes it signals, and she may signal it back) a stop signal must not
            // reach the daemon's pipe: the child gets the signal's default action, as
            // without this handler.
            guard getpid() == StopSignals.daemon else {
                var standard = sigaction()
                standard.__sigaction_handler.sa_handler = SIG_DFL
                sigaction(signal, &standard, nil)
                raise(signal)
                return
            }
            let saved = errno
            var byte = UInt8(truncatingIfNeeded: signal)
            _ = write(StopSignals.writeEnd, &byte, 1)
            errno = saved
        }
        sigemptyset(&action.sa_mask)
        action.sa_flags = SA_RESTART
        var unblock = sigset_t()
        sigemptyset(&unblock)
        for signal in signals {
            sigaction(signal, &action, nil)
            sigaddset(&unblock, signal)
        }
        pthread_sigmask(SIG_UNBLOCK, &unblock, nil)
    }

    /// The first stop signal caught: at once when one already was, else when one arrives;
    /// nil without `install()` (a daemon run by the unit tests). Waits on a thread of its
    /// own (a blocking read of the pipe), never on the caller's.
    package static func next() async -> Int32? {
        let fd = readEnd
        guard fd >= 0 else { return nil }
        return await withCheckedContinuation { (caught: CheckedContinuation<Int32, Never>) in
            NamedThread.start("lw-stop-signal") {
                var byte: UInt8 = 0
                while true {
                    let n = read(fd, &byte, 1)
                    if n == 1 { break }
                    if n < 0 && errno == EINTR { continue }
                    // Cannot happen while the write end is open (it never closes); stop
                    // rather than never stopping.
                    byte = UInt8(SIGTERM)
                    break
                }
                caught.resume(returning: Int32(byte))
            }
        }
    }
}
