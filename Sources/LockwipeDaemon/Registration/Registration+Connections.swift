import Foundation
import LockwipeCheckIn
import LockwipeCore
import Logging
import NIOCore

/// SAP Mobile Services application connections: a registration without one creates it
/// before its check-in (the check-in `register` starts at once, and the start-up pass, make
/// it "at registration" and "at start-up"); its id is sent as `X-SMP-APPCID` from then on;
/// unregister deletes it without waiting. A Connections answer that refuses (a 403 order
/// or block, a failure) is applied as that check-in's answer; a success counts as contact.
extension Registration {
    /// A successful Connections answer, in the turn of the registration that asked:
    /// the id (or that there is none) is stored, and the answer counts as a contact.
    /// Returns whether it committed that (the turn goes on with the record as written).
    @discardableResult
    nonisolated(nonsending) func recordConnection(_ answer: SAPConnectionAnswer, replacing stale: String? = nil, in turn: borrowing RegistrationTurn) async -> Bool {
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
            let written = try await context.store.commitConnection(
                turn.held, id: id, problem: problem,
                contact: ContactCommit(
                    clock: .started(at: reading), time: reading.wall, policy: nil, settings: nil, policyError: nil, lock: .keep,
                    events: [context.event(user, .connection, .server, detail, at: reading.wall)]))
            try turn.committed(written)
        } catch {
            context.stateNotice("the application connection of \(user) is not recorded (asked for again at the next check-in)", user: user, error)
            return false
        }
        let meta: Logger.Metadata = ["user": .string(user), "action": "connection", "registration_id": .string(asked.rawValue)]
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
    func releaseConnection(_ connection: SAPConnectionRecord?, credentials: ServerCredentials?) {
        let user = self.user
        let server = context.configuration.server
        guard server.sapIdentity != nil, let id = connection?.id, let fetcher = context.fetcher else { return }
        let logger = context.logger
        context.timerEvents.post {
            let meta: Logger.Metadata = ["user": .string(user), "action": "connection", "connection_id": .string(id)]
            if let why = await fetcher.deleteConnection(id, user: user, credentials: credentials, server: server) {
                logger.warning("the SAP application connection of \(user) could not be deleted: \(why)", metadata: meta)
            } else {
                logger.info("the SAP application connection of \(user) was deleted", metadata: meta)
            }
        }
    }
}
