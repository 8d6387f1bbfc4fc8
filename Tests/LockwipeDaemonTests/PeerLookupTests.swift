import LockwipeSystemd
import Synchronization
import Testing

@testable import LockwipeDaemon

/// When a connection's peer is looked up through NSS: root's as soon as it connects (from
/// the connection's set-up in `ControlServer.bind`; what NSS says decides nothing for it),
/// anyone else's at her first request, never earlier, and once per connection.
@Suite struct PeerLookupTests {
    /// A lookup that counts its calls and answers from the credentials alone.
    final class CountingLookup: Sendable {
        let calls = Mutex(0)

        func callAsFunction(_ credentials: PeerCredentials) async -> Caller {
            calls.withLock { $0 += 1 }
            return Caller(credentials: credentials, userName: "u\(credentials.uid)", isAdmin: credentials.uid == 0)
        }

        var count: Int { calls.withLock { $0 } }
    }

    @Test func rootIsLookedUpWhenItConnectsAndOnlyOnce() async throws {
        let early = CountingLookup()
        let credentials: PeerCredentials? = PeerCredentials(pid: 1, uid: 0, gid: 0)
        let peer = ControlServer.Peer(credentials, early: ControlServer.Peer.lookUpRootEarly(credentials) { await early($0) })
        let deadline = ContinuousClock.now + .seconds(10)
        while early.count == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(1)) }
        #expect(early.count == 1, "root's lookup starts before its first request")
        let perRequest = CountingLookup()
        let first = try await peer.caller { await perRequest($0) }
        let second = try await peer.caller { await perRequest($0) }
        #expect(perRequest.count == 0, "the first request uses the lookup started at connect")
        #expect(early.count == 1)
        #expect(first == second && first.isAdmin && first.userName == "u0")
    }

    @Test func anotherUserIsLookedUpAtHerFirstRequestNotEarlier() async throws {
        let early = CountingLookup()
        let credentials: PeerCredentials? = PeerCredentials(pid: 1, uid: 1000, gid: 1000)
        let peer = ControlServer.Peer(credentials, early: ControlServer.Peer.lookUpRootEarly(credentials) { await early($0) })
        let perRequest = CountingLookup()
        let caller = try await peer.caller { await perRequest($0) }
        _ = try await peer.caller { await perRequest($0) }
        #expect(early.count == 0, "her group membership is not read before she asks for something")
        #expect(perRequest.count == 1)
        #expect(!caller.isAdmin && caller.userName == "u1000")
    }

    @Test func aPeerWithoutCredentialsIsRefusedAndNeverLookedUp() async {
        let early = CountingLookup()
        let credentials: PeerCredentials? = nil
        let peer = ControlServer.Peer(credentials, early: ControlServer.Peer.lookUpRootEarly(credentials) { await early($0) })
        await #expect(throws: (any Error).self) { try await peer.caller { await early($0) } }
        #expect(early.count == 0)
    }
}
