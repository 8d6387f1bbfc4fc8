import LockwipeCore
import NIOCore

/// What one check-in exchanged with the server: the connection answer when one was
/// asked for, and the check-in's outcome (the connection's own when it was refused).
public struct ServerExchange: Sendable {
    public var connection: SAPConnectionAnswer?
    public var outcome: CheckInOutcome
    /// The stored connection id the server no longer knew (the staleness probe answered
    /// 404), which `connection` replaces; nil otherwise.
    public var replaced: String? = nil

    public init(connection: SAPConnectionAnswer?, outcome: CheckInOutcome, replaced: String? = nil) {
        self.connection = connection
        self.outcome = outcome
        self.replaced = replaced
    }

    /// The requests of one check-in, off the Manager's actor: with SAP and no connection id
    /// yet (`known`: the id stored for the registration), the Connections request first (a
    /// refusal ends the check-in), then the settings request, whose settings are read as the
    /// protocol means them (`ServerProtocol.interpret`). With a stored id that the answer
    /// suggests is stale (`StaleConnection.suspect`), the server is asked for it; when it is
    /// gone, a new connection is made and the settings asked for once more with it
    /// (`replaced` says which id it replaces).
    public static func run(
        _ fetcher: any SettingsFetching, user: String, credentials: ServerCredentials?, known: String?,
        server: ServerConfiguration, deadline: NIODeadline?
    ) async -> ServerExchange {
        var connection = known
        var answer: SAPConnectionAnswer?
        if server.sapIdentity != nil, connection == nil {
            let created = await fetcher.createConnection(user: user, credentials: credentials, server: server, deadline: deadline)
            answer = created
            switch created {
            case .created(let id): connection = id
            case .createdWithoutID: break
            case .refused(let outcome): return ServerExchange(connection: created, outcome: outcome)
            }
        }
        var (outcome, status) = await fetcher.fetchAnswer(user: user, credentials: credentials, connection: connection, server: server, deadline: deadline)
        var replaced: String?
        // A stored id the server may have forgotten (deleted in the cockpit): ask the server
        // whether it still knows it; when it is gone, register again and ask once more.
        if answer == nil, let stale = connection, StaleConnection.suspect(status: status, outcome: outcome),
            await fetcher.probeConnection(stale, user: user, credentials: credentials, server: server, deadline: deadline) == .gone
        {
            let created = await fetcher.createConnection(user: user, credentials: credentials, server: server, deadline: deadline)
            answer = created
            replaced = stale
            switch created {
            case .created(let id):
                (outcome, status) = await fetcher.fetchAnswer(user: user, credentials: credentials, connection: id, server: server, deadline: deadline)
            case .createdWithoutID:
                // Stored as "no id": the next check-in registers again.
                break
            case .refused(let refused):
                return ServerExchange(connection: created, outcome: refused, replaced: stale)
            }
        }
        // The answer as the protocol means it (SAP: passwordPolicyLockTimeout is not lock-on-logout).
        if case .contact(let settings) = outcome { outcome = .contact(server.serverProtocol.interpret(settings)) }
        return ServerExchange(connection: answer, outcome: outcome, replaced: replaced)
    }
}
