import Foundation
import LockwipeCheckIn
import LockwipeCore
import LockwipeProtocol
import Logging
import NIOCore

/// SAP Mobile Services application connections: a registration without one creates it
/// before its check-in (the check-in `register` starts at once, and the start-up pass, make
/// it "at registration" and "at start-up"); its id is sent as `X-SMP-APPCID` from then on;
/// unregister deletes it without waiting. A Connections answer that refuses (a 403 order
/// or block, a failure) is applied as that check-in's answer; a success counts as contact.
extension Manager {
    /// What one check-in exchanged with the server: the connection answer when one was
    /// asked for, and the check-in's outcome (the connection's own when it was refused).
    struct ServerExchange: Sendable {
        var connection: SAPConnectionAnswer?
        var outcome: CheckInOutcome
        /// The stored connection id the server no longer knew (the staleness probe answered
        /// 404), which `connection` replaces; nil otherwise.
        var replaced: String? = nil
    }

    /// The requests of one check-in, off the actor: with SAP and no connection id yet, the
    /// Connections request first (a refusal ends the check-in), then the settings request,
    /// whose settings are read as the protocol means them (`ServerProtocol.interpret`). With
    /// a stored id that the answer suggests is stale (`StaleConnection.suspect`), the server
    /// is asked for it; when it is gone, a new connection is made and the settings asked
    /// for once more with it (`replaced` says which id it replaces).
    static func exchange(
        _ fetcher: any SettingsFetching, user: String, credentials: ServerCredentials?, known: SAPConnectionRecord?,
        server: ServerConfiguration, deadline: NIODeadline?
    ) async -> ServerExchange {
        var connection = known?.id
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

    /// A successful Connections answer, in the turn of the registration that asked:
    /// the id (or that there is none) is stored, and the answer counts as a contact.
    /// Returns whether it committed that (the turn's record is then out of date).
    @discardableResult
    func recordConnection(_ answer: SAPConnectionAnswer, replacing stale: String? = nil, in turn: borrowing RegistrationTurn) async -> Bool {
        let r = turn.record
        let (user, asked) = (r.user, r.id)
        guard !r.state.isWipeCommitted else { return false }
        let reading = context.clock.now()
        var id: String?
        var problem: String?
        switch answer {
        case .created(let created): id = created
        case .createdWithoutID(let why): problem = why + "; registered locally, the connection is retried at the next check-in"
        case .refused: return false
        }
        var detail = id.map { "SAP application connection created (\($0))" } ?? "SAP application connection not made: \(problem ?? "no id")"
        if let stale {
            detail = "the SAP application connection \(stale) is gone on the server (GET Connections: 404); registered again: " + detail
        }
        do {
            // Any successful Mobile Services response is a contact (as SAP's SDKs count it).
            try await context.store.commitConnection(
                user: user, registration: asked, id: id, problem: problem,
                contact: ContactCommit(
                    clock: .started(at: reading), time: reading.wall, policy: nil, settings: nil, policyError: nil, lock: .keep,
                    events: [context.event(user, .connection, .server, detail, at: reading.wall)]))
        } catch {
            context.logger.error("cannot record the application connection of \(user): \(error)", metadata: ["user": .string(user)])
            return false
        }
        let meta: Logger.Metadata = ["user": .string(user), "action": "connection", "registration_id": .string(asked)]
        if let stale {
            var m = meta.merging(["message_id": MessageID.connectionReplaced.metadata, "stale_connection_id": .string(stale)]) { $1 }
            if let id { m["connection_id"] = .string(id) }
            context.logger.warning("\(user): \(detail)", metadata: m)
        } else if let id {
            context.logger.notice("\(user): SAP application connection created", metadata: meta.merging(["connection_id": .string(id)]) { $1 })
        } else {
            context.logger.warning("\(user): \(detail)", metadata: meta)
        }
        return true
    }

    /// Unregister: the registration's connection is deleted on the server in the
    /// background (a structured task of the daemon's service, `TimerEvents`, so shutdown
    /// cancels and awaits it); a failure is logged and changes nothing here.
    func releaseConnection(user: String, connection: SAPConnectionRecord?, credentials: ServerCredentials?) {
        let server = context.configuration.server
        guard server.sapIdentity != nil, let id = connection?.id, let fetcher = context.fetcher else { return }
        let logger = context.logger
        timerEvents.post {
            let meta: Logger.Metadata = ["user": .string(user), "action": "connection", "connection_id": .string(id)]
            if let why = await fetcher.deleteConnection(id, user: user, credentials: credentials, server: server) {
                logger.warning("the SAP application connection of \(user) could not be deleted: \(why)", metadata: meta)
            } else {
                logger.info("the SAP application connection of \(user) was deleted", metadata: meta)
            }
        }
    }
}
