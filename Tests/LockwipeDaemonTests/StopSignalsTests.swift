import Foundation
import Testing

@testable import LockwipeBase

/// lockwiped's own SIGTERM/SIGINT handling (`StopSignals`). The handler stays in this test
/// process until the end of the test, which then puts the default actions back.
@Suite(.serialized)
struct StopSignalsTests {
    /// `lockwipe_spawn_signal_as` forks a child that becomes the user whose processes it
    /// signals; she may signal it back. Her SIGTERM must end that child as it would without
    /// the handler, and never reach the daemon's pipe: that would stop lockwiped for her.
    @Test func aStopSignalToAForkedChildEndsTheChildAndNeverStopsTheDaemon() async throws {
        try StopSignals.install()
        defer {
            for signal in StopSignals.signals { Glibc.signal(signal, SIG_DFL) }
        }
        let child = fork()
        if child == 0 {
            // Only raw system calls in the child of this multi-threaded process.
            kill(getpid(), SIGTERM)
            _exit(0)
        }
        try #require(child > 0)
        var status: Int32 = 0
        while waitpid(child, &status, 0) < 0 && errno == EINTR {}
        #expect(status & 0x7F == SIGTERM, "the child was not ended by its SIGTERM (wait status \(status))")

        // The daemon's own signal is the first thing in the pipe: the child wrote nothing.
        kill(getpid(), SIGINT)
        #expect(await StopSignals.next() == SIGINT)
    }
}
