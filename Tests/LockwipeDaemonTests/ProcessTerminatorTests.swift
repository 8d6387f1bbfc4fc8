import Foundation
import LockwipeBase
import LockwipeCore
import Testing

@testable import LockwipeDaemon
@testable import LockwipeProcesses

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

@Suite struct ProcessScanTests {
    /// The scan finds a process of the uid (a child of this test made nobody's), and
    /// reads the same `Uid:` line as the whole status text holds.
    @Test func aProcessOfTheUidIsFoundAndTheUidLineIsTheStatusOne() throws {
        let nobody: UInt32 = 65534
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        child.arguments = ["--reuid=\(nobody)", "--regid=\(nobody)", "--clear-groups", "/bin/sleep", "30"]
        try child.run()
        let pid = child.processIdentifier
        defer {
            kill(pid, SIGKILL)
            child.waitUntilExit()
        }
        let terminator = ProcessTerminator(grace: 0)
        var found: [Int32] = []
        for _ in 0..<100 {
            found = terminator.processes(of: nobody)
            if found.contains(pid) { break }
            usleep(20_000)
        }
        #expect(found.contains(pid))
        #expect(found == found.sorted())
        #expect(!terminator.processes(of: 4_000_000_123).contains(pid))
        var buffer = [UInt8](repeating: 0, count: 8)  // grown as the status needs
        let line = try #require(ProcessTerminator.uidLine(of: pid, buffer: &buffer))
        let status = try #require(ProcFile.read("/proc/\(pid)/status"))
        #expect(status.split(separator: "\n").first { $0.hasPrefix("Uid:") }.map(String.init) == line)
        #expect(ProcessOwnership.uids(status: line) == [nobody, nobody, nobody, nobody])
    }
}
