import Foundation
import Testing

@testable import LockwipeDaemon
@testable import LockwipeWipe

@Suite struct ProcessTerminatorTests {
    /// A lock of uid 0 (which registration refuses anyway) must never signal root's
    /// processes, this test's among them.
    @Test func rootsProcessesAreNeverEnded() {
        let outcome = ProcessTerminator(grace: 0).terminate(uid: 0)
        #expect(outcome == ProcessTerminator.Outcome(ended: [], survivors: []))
        #expect(ProcessTerminator.isRunning(getpid()))
    }

    /// A uid with no process: nothing signalled, no survivor, no wait for the grace.
    @Test func aUserWithoutProcessesCostsOneScan() {
        let started = Date()
        let outcome = ProcessTerminator(grace: 5).terminate(uid: 4_000_000_123)
        #expect(outcome.ended.isEmpty && outcome.survivors.isEmpty)
        #expect(Date().timeIntervalSince(started) < 2)
    }
}
