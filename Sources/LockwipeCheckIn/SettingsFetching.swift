import LockwipeCore
import NIOCore

/// Fetches one registration's settings from the policy server. A seam for tests: the
/// daemon uses `CheckInClient`.
public protocol SettingsFetching: Sendable {
    /// One bounded attempt; never throws: anything that is not an answer is `.failure`.
    /// Over by `deadline` (waiting for a free request slot included), or, when it is nil,
    /// `[server] timeout` after a slot is free. Cancelling the calling task ends it at once.
    /// `connection`: the registration's SAP application connection id, when known.
    func fetch(
        user: String, credentials: ServerCredentials?, connection: String?, server: ServerConfiguration, deadline: NIODeadline?
    ) async -> CheckInOutcome
    /// SAP Mobile Services: creates the registration's application connection, bounded
    /// like `fetch`.
    func createConnection(user: String, credentials: ServerCredentials?, server: ServerConfiguration, deadline: NIODeadline?) async -> SAPConnectionAnswer
    /// SAP Mobile Services: deletes an application connection; nil when done, else why not.
    func deleteConnection(_ id: String, user: String, credentials: ServerCredentials?, server: ServerConfiguration) async -> String?
    /// `fetch`, with the HTTP status of the answer (nil when there was none): what the
    /// staleness probe of a SAP connection is decided from (`StaleConnection.suspect`).
    func fetchAnswer(
        user: String, credentials: ServerCredentials?, connection: String?, server: ServerConfiguration, deadline: NIODeadline?
    ) async -> (outcome: CheckInOutcome, status: Int?)
    /// SAP Mobile Services: `GET Connections('{id}')`, bounded like `fetch`.
    func probeConnection(
        _ id: String, user: String, credentials: ServerCredentials?, server: ServerConfiguration, deadline: NIODeadline?
    ) async -> StaleConnection.Probe
    /// The lockwipe protocol: uploads a sealed outbox (`PUT .../outbox/{name}`) with the
    /// registration's credentials, bounded by `timeoutSeconds` (waiting for a request slot
    /// included) and by cancellation.
    func uploadOutbox(
        user: String, name: String, body: [UInt8], credentials: ServerCredentials?, server: ServerConfiguration, timeoutSeconds: Int
    ) async -> OutboxUploadAnswer
    func shutdown() async
}

extension SettingsFetching {
    public func createConnection(user: String, credentials: ServerCredentials?, server: ServerConfiguration, deadline: NIODeadline?) async -> SAPConnectionAnswer {
        .refused(.failure("application connections are not supported by this client"))
    }
    public func deleteConnection(_ id: String, user: String, credentials: ServerCredentials?, server: ServerConfiguration) async -> String? {
        "application connections are not supported by this client"
    }
    public func fetchAnswer(
        user: String, credentials: ServerCredentials?, connection: String?, server: ServerConfiguration, deadline: NIODeadline?
    ) async -> (outcome: CheckInOutcome, status: Int?) {
        (await fetch(user: user, credentials: credentials, connection: connection, server: server, deadline: deadline), nil)
    }
    public func probeConnection(
        _ id: String, user: String, credentials: ServerCredentials?, server: ServerConfiguration, deadline: NIODeadline?
    ) async -> StaleConnection.Probe {
        .unknown("application connections are not supported by this client")
    }
    public func uploadOutbox(
        user: String, name: String, body: [UInt8], credentials: ServerCredentials?, server: ServerConfiguration, timeoutSeconds: Int
    ) async -> OutboxUploadAnswer {
        .notUploaded("outbox uploads are not supported by this client")
    }
}
