import LockwipeCheckIn
import LockwipeCore
import NIOCore
import Synchronization
import Testing

/// The requests of one check-in (`ServerExchange.run`): the SAP application connection made
/// before the settings are asked for, a refusal ending the check-in, and a stored id the
/// server no longer knows made again once.
@Suite struct ServerExchangeTests {
    /// A server that answers from a script and writes down each request, in order.
    final class Server: SettingsFetching {
        struct Script {
            var created: [SAPConnectionAnswer] = []
            var answers: [(outcome: CheckInOutcome, status: Int?)] = []
            var probe: StaleConnection.Probe = .present
            var requests: [String] = []
        }
        let script: Mutex<Script>
        init(_ script: Script) { self.script = Mutex(script) }
        var requests: [String] { script.withLock { $0.requests } }

        func fetch(user: String, credentials: ServerCredentials?, connection: String?, server: ServerConfiguration, deadline: NIODeadline?) async -> CheckInOutcome {
            await fetchAnswer(user: user, credentials: credentials, connection: connection, server: server, deadline: deadline).outcome
        }
        func fetchAnswer(
            user: String, credentials: ServerCredentials?, connection: String?, server: ServerConfiguration, deadline: NIODeadline?
        ) async -> (outcome: CheckInOutcome, status: Int?) {
            script.withLock {
                $0.requests.append("settings \(connection ?? "-")")
                return $0.answers.isEmpty ? (.failure("no answer scripted"), nil) : $0.answers.removeFirst()
            }
        }
        func createConnection(user: String, credentials: ServerCredentials?, server: ServerConfiguration, deadline: NIODeadline?) async -> SAPConnectionAnswer {
            script.withLock {
                $0.requests.append("create")
                return $0.created.isEmpty ? .refused(.failure("no connection scripted")) : $0.created.removeFirst()
            }
        }
        func probeConnection(
            _ id: String, user: String, credentials: ServerCredentials?, server: ServerConfiguration, deadline: NIODeadline?
        ) async -> StaleConnection.Probe {
            script.withLock {
                $0.requests.append("probe \(id)")
                return $0.probe
            }
        }
        func shutdown() async {}
    }

    static let sap: ServerConfiguration = {
        var server = ServerConfiguration()
        server.url = "https://mobile.example.com"
        server.serverProtocol = .sapMobileServices
        server.applicationID = "com.example.app"
        server.deviceID = "device-1"
        return server
    }()

    static func run(_ server: Server, known: String?, on configuration: ServerConfiguration = sap) async -> ServerExchange {
        await ServerExchange.run(server, user: "alice", credentials: nil, known: known, server: configuration, deadline: nil)
    }

    @Test func aConnectionIsMadeBeforeTheFirstCheckInAndSentWithIt() async {
        let server = Server(.init(created: [.created("c-1")], answers: [(.lock, 403)]))
        let exchanged = await Self.run(server, known: nil)
        #expect(server.requests == ["create", "settings c-1"])
        #expect(exchanged.connection == .created("c-1"))
        #expect(exchanged.outcome == .lock)
        #expect(exchanged.replaced == nil)
    }

    @Test func aRefusedConnectionEndsTheCheckIn() async {
        let server = Server(.init(created: [.refused(.blocked("not allowed"))]))
        let exchanged = await Self.run(server, known: nil)
        #expect(server.requests == ["create"])
        #expect(exchanged.connection == .refused(.blocked("not allowed")))
        #expect(exchanged.outcome == .blocked("not allowed"))
    }

    @Test func aStoredConnectionTheServerForgotIsMadeAgainOnce() async {
        let server = Server(
            .init(created: [.created("c-2")], answers: [(.rejected(status: 404, text: "gone"), 404), (.wipe, 403)], probe: .gone))
        let exchanged = await Self.run(server, known: "c-1")
        #expect(server.requests == ["settings c-1", "probe c-1", "create", "settings c-2"])
        #expect(exchanged.connection == .created("c-2"))
        #expect(exchanged.outcome == .wipe)
        #expect(exchanged.replaced == "c-1")
    }

    @Test func aStoredConnectionTheServerStillKnowsStands() async {
        let server = Server(.init(answers: [(.rejected(status: 404, text: "not here"), 404)], probe: .present))
        let exchanged = await Self.run(server, known: "c-1")
        #expect(server.requests == ["settings c-1", "probe c-1"])
        #expect(exchanged.connection == nil)
        #expect(exchanged.outcome == .rejected(status: 404, text: "not here"))
        #expect(exchanged.replaced == nil)
    }

    @Test func withoutSAPNoConnectionIsAskedFor() async {
        var own = ServerConfiguration()
        own.url = "https://policy.example.com"
        let server = Server(.init(answers: [(.lock, 403)]))
        let exchanged = await Self.run(server, known: nil, on: own)
        #expect(server.requests == ["settings -"])
        #expect(exchanged.connection == nil)
        #expect(exchanged.outcome == .lock)
    }
}
