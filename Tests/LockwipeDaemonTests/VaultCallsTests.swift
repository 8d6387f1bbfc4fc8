import Foundation
import LockwipeCore
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
        let calls = VaultCalls(timeout: .seconds(1)) { owner, what in recovered.withLock { $0.append("\(owner.user) (\(owner.registration)): \(what)") } }
        let (alice, bob) = (VaultOwner(registration: RegistrationID("r-alice"), user: "alice"), VaultOwner(registration: RegistrationID("r-bob"), user: "bob"))
        let release = DispatchSemaphore(value: 0)

        // The call never returns by itself: that this returns at all is the deadline's doing.
        await #expect(throws: VaultUnresponsive.self) {
            try await calls.run(for: alice, "the lock") { release.wait() }
        }
        #expect(calls.unresponsive(RegistrationID("r-alice")) == "the lock")

        // Her next call fails at once (it is refused before any thread is made for it).
        do {
            try await calls.run(for: alice, "the unlock") {}
            Issue.record("a call on an unresponsive vault ran")
        } catch let error as VaultUnresponsive {
            #expect(error.earlier && error.what == "the lock")
            #expect("\(error)".contains("has not answered since the lock"))
        }

        // Everyone else is served meanwhile.
        #expect(try await calls.run(for: bob, "the lock") { 42 } == 42)

        // When the stuck call returns at last, the vault answers again.
        release.signal()
        for _ in 0..<100 where calls.unresponsive(RegistrationID("r-alice")) != nil { try await Task.sleep(for: .milliseconds(20)) }
        #expect(calls.unresponsive(RegistrationID("r-alice")) == nil)
        #expect(recovered.withLock { $0 } == ["alice (r-alice): the lock"])
        #expect(try await calls.run(for: alice, "the unlock") { "done" } == "done")
    }

    @Test func errorsAndResultsComeBackAsTheyWere() async throws {
        let calls = VaultCalls(timeout: .seconds(5))
        let carol = VaultOwner(registration: RegistrationID("r-carol"), user: "carol")
        struct Refused: Error {}
        await #expect(throws: Refused.self) { try await calls.run(for: carol, "x") { throw Refused() } }
        #expect(calls.unresponsive(RegistrationID("r-carol")) == nil)
        #expect(try await calls.run(for: carol, "y", timeout: .seconds(1)) { [1, 2] } == [1, 2])
    }

    /// The mark is the registration's: a name unregistered and registered again (another
    /// id) is not held by the earlier registration's stuck call, and what the stuck call
    /// returns to names the registration it was made for.
    @Test func aStuckCallHoldsItsRegistrationNotTheName() async throws {
        let recovered = Mutex<[VaultOwner]>([])
        let calls = VaultCalls(timeout: .seconds(1)) { owner, _ in recovered.withLock { $0.append(owner) } }
        let release = DispatchSemaphore(value: 0)
        let (before, again) = (VaultOwner(registration: RegistrationID("r-1"), user: "dave"), VaultOwner(registration: RegistrationID("r-2"), user: "dave"))
        await #expect(throws: VaultUnresponsive.self) { try await calls.run(for: before, "the lock") { release.wait() } }
        await #expect(throws: VaultUnresponsive.self) { try await calls.run(for: before, "the unlock") {} }
        #expect(try await calls.run(for: again, "the start-up check") { "answered" } == "answered")
        release.signal()
        for _ in 0..<100 where calls.unresponsive(RegistrationID("r-1")) != nil { try await Task.sleep(for: .milliseconds(20)) }
        #expect(recovered.withLock { $0 } == [before])
    }
}
