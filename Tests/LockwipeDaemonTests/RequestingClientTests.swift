import Foundation
import LockwipeCore
import LockwipeProtocol
import LockwipeTestSupport
import Logging
import Testing

@testable import LockwipeDaemon

/// Who asked: the client of a control request is in every journal entry (the metadata
/// provider) and history event (`Manager.event`) of that request, and in nothing else.
@Suite struct RequestingClientTests {
    var root: Caller { ManagerFixture.root }

    @Test func theJournalFieldsAreThoseOfTheRequestBeingAnswered() {
        #expect(RequestingClient.journalMetadata.get() == [:])
        let client = RequestingClient(uid: 1001, pid: 4242, comm: "lockwipectl")
        let fields = RequestingClient.$current.withValue(client) { RequestingClient.journalMetadata.get() }
        #expect(fields == ["peer_uid": "1001", "peer_pid": "4242", "peer_comm": "lockwipectl"])
        let nameless = RequestingClient.$current.withValue(RequestingClient(uid: 0, pid: 7)) { RequestingClient.journalMetadata.get() }
        #expect(nameless == ["peer_uid": "0", "peer_pid": "7"])
    }

    @Test func theCommOfThisProcessIsReadWithoutItsNewline() {
        let name = RequestingClient.comm(of: getpid())
        #expect(name != nil && name?.contains("\n") == false && name?.isEmpty == false)
        #expect(RequestingClient.comm(of: 0) == nil)
    }

    @Test func historyNamesTheRequesterOfWhatWasAskedAndNoneOfWhatTheDaemonDid() async throws {
        try await ManagerFixture.run(Configuration()) { f in
            let client = RequestingClient(uid: 0, pid: 4242, comm: "lockwipectl")
            _ = try await RequestingClient.$current.withValue(client) {
                try await f.manager.register(user: "root", directories: [f.directory + "/data/vault"], by: root)
            }
            // Not from the control socket: the daemon's own (say, a logout lock).
            _ = try await f.manager.lock(user: "root", trigger: .logout, reason: "test")
            let events = try await f.manager.history(user: "root", owner: nil, limit: 100).events
            #expect(events.map(\.kind) == ["register", "lock"])
            #expect(events[0].requester == HistoryEvent.Requester(uid: 0, pid: 4242, comm: "lockwipectl"))
            #expect(events[0].registrationId != nil)
            #expect(events[1].requester == nil)
        }
    }

    @Test func aLimitOfZeroIsNoEventsAndANegativeOneIsRefused() async throws {
        try await ManagerFixture.run(Configuration()) { f in
            _ = try await f.manager.register(user: "root", directories: [f.directory + "/data/vault"], by: root)
            #expect(try await f.manager.history(user: nil, owner: nil, limit: 0).events.isEmpty)
            #expect(try await f.manager.history(user: nil, owner: nil, limit: 1).events.count == 1)
            await #expect(throws: ManagerError.self) { try await f.manager.history(user: nil, owner: nil, limit: -5) }
        }
    }
}
