import Foundation
import LockwipeVaultIO
import Synchronization
import Testing

@testable import LockwipeDaemon

/// `VaultCalls`: a call that never returns costs its caller the deadline and no more,
/// holds one thread, makes the vault unresponsive until it returns, and stalls nobody
/// else's calls.
@Suite struct VaultCallsTests {
    @Test func aCallThatDoesNotReturnFailsAtItsDeadlineAndBlocksOnlyItsUser() async throws {
        let recovered = Mutex<[String]>([])
        let calls = VaultCalls(timeout: .seconds(1)) { user, what in recovered.withLock { $0.append("\(user): \(what)") } }
        let release = DispatchSemaphore(value: 0)

        // The call never returns by itself: that this returns at all is the deadline's doing.
        await #expect(throws: VaultUnresponsive.self) {
            try await calls.run(user: "alice", "the lock") { release.wait() }
        }
        #expect(calls.unresponsive("alice") == "the lock")

        // Her next call fails at once (it is refused before any thread is made for it).
        do {
            try await calls.run(user: "alice", "the unlock") {}
            Issue.record("a call on an unresponsive vault ran")
        } catch let error as VaultUnresponsive {
            #expect(error.earlier && error.what == "the lock")
            #expect("\(error)".contains("has not answered since the lock"))
        }

        // Everyone else is served meanwhile.
        #expect(try await calls.run(user: "bob", "the lock") { 42 } == 42)

        // When the stuck call returns at last, the vault answers again.
        release.signal()
        for _ in 0..<100 where calls.unresponsive("alice") != nil { try await Task.sleep(for: .milliseconds(20)) }
        #expect(calls.unresponsive("alice") == nil)
        #expect(recovered.withLock { $0 } == ["alice: the lock"])
        #expect(try await calls.run(user: "alice", "the unlock") { "done" } == "done")
    }

    @Test func errorsAndResultsComeBackAsTheyWere() async throws {
        let calls = VaultCalls(timeout: .seconds(5))
        struct Refused: Error {}
        await #expect(throws: Refused.self) { try await calls.run(user: "carol", "x") { throw Refused() } }
        #expect(calls.unresponsive("carol") == nil)
        #expect(try await calls.run(user: "carol", "y", timeout: .seconds(1)) { [1, 2] } == [1, 2])
    }
}
