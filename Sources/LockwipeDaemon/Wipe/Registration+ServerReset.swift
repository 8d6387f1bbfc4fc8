import Foundation
import LockwipeBase
import LockwipeCheckIn
import LockwipeCore
import Logging

/// SAP's full reset after a server or offline wipe (`ServerReset`): the registration's
/// token, refresh token and connection id are forgotten in one store write in its turn
/// (no network there), then its connection is deleted on the server in the background
/// (`TimerEvents`, as unregister does), with the credentials read before. The wipe never
/// waits on the DELETE; a failed DELETE is journalled and recorded in `status`, and does
/// not bring the credentials back: the wipe is SAP's order to give the enrolment up.
extension Registration {
    /// Resets `turn`'s registration after a wipe with `trigger`, once: a registration that
    /// has no token, refresh token nor connection id left has nothing to reset (a resumed
    /// wipe after a crash calls it again).
    nonisolated(nonsending) func resetServerIdentity(in turn: borrowing RegistrationTurn, trigger: Trigger) async {
        let server = context.configuration.server
        guard ServerReset.applies(protocol: server.serverProtocol, trigger: trigger), server.sapIdentity != nil else { return }
        let r = turn.record
        let (user, asked) = (r.user, r.id)
        let credentials: ServerCredentials?
        let connection: SAPConnectionRecord?
        do {
            credentials = try await context.store.credentials(registration: asked)
            connection = try await context.store.sapConnection(registration: asked)
        } catch {
            return context.stateNotice("the SAP full reset of \(user) after its wipe is not made (its credentials are kept)", user: user, error)
        }
        let id = connection?.id
        guard credentials?.token != nil || credentials?.refreshToken != nil || id != nil else { return }
        let enrol = ServerReset.enrolCommands(user: user, oauth: server.oauth != nil)
        let now = context.clock.now().wall
        let detail =
            "SAP full reset after the \(trigger.rawValue) wipe: token, refresh token and connection id forgotten"
            + (id.map { ", connection \($0) to be deleted on the server" } ?? "") + "; enrol \(user) again: \(enrol)"
        do {
            try await context.store.commitServerReset(
                turn.held, connection: id, result: ServerReset.pendingResult(connection: id),
                event: context.event(user, .connection, trigger, detail, at: now))
        } catch {
            context.logger.error(
                "the SAP full reset of \(user) after its wipe could not be recorded; its credentials are kept: \(ErrorWords.of(error))",
                metadata: ["user": .string(user), "action": "reset", "message_id": MessageID.actionFailed.metadata])
            return
        }
        var meta: Logger.Metadata = [
            "user": .string(user), "action": "reset", "trigger": .string(trigger.rawValue), "registration_id": .string(asked.rawValue),
            "message_id": MessageID.serverReset.metadata,
        ]
        if let id { meta["connection_id"] = .string(id) }
        guard let id, let fetcher = context.fetcher else {
            meta["result"] = .string(ServerReset.pendingResult(connection: id))
            return context.logger.notice("\(user): \(detail)", metadata: meta)
        }
        meta["result"] = "pending"
        context.logger.notice("\(user): \(detail)", metadata: meta)
        let (logger, store, base) = (context.logger, context.store, meta)
        context.timerEvents.post {
            let failure = await fetcher.deleteConnection(id, user: user, credentials: credentials, server: server)
            let result = ServerReset.result(deleteFailure: failure)
            var m = base
            m["result"] = .string(failure == nil ? "deleted" : "failed")
            do {
                try await store.recordServerResetResult(registration: asked, result: result)
            } catch {
                m["error"] = .string(ErrorWords.of(error))
            }
            if let failure {
                logger.warning(
                    "\(user): the SAP application connection \(id) given up by the full reset could not be deleted: \(failure) (delete it in the cockpit; the credentials stay forgotten)",
                    metadata: m)
            } else {
                logger.notice("\(user): the SAP application connection \(id) given up by the full reset was deleted", metadata: m)
            }
        }
    }
}
