import Foundation
import LockwipeCheckIn
import LockwipeCore
import Logging
import NIOCore

/// Server check-in: the Manager asks the server (outside any registration's turn: the
/// request may take up to `[server] timeout`), then applies the answer in the turn of the
/// registration that asked, like every other decision. Only a 2xx with a settings
/// document is a contact.
extension Manager {
    public enum CheckInPurpose: String, Sendable {
        /// The `[server] interval` (or backoff) came round.
        case scheduled
        /// `lockwipectl check-in`.
        case requested
        /// The one attempt before an offline-triggered lock or wipe.
        case beforeAction = "before-action"
    }

    // MARK: Requests

    /// `CheckIn`: the given registrations check in now, concurrently (the client bounds how
    /// many requests are in flight); one result each.
    public func checkIn(users: [String]) async throws -> [Outcome] {
        guard context.configuration.server.isConfigured else {
            throw ManagerError.actionFailed("no server configured: there is no policy server to check in with ([server] url)")
        }
        return await withTaskGroup(of: (Int, Outcome).self) { group in
            for (i, user) in users.enumerated() {
                group.addTask { (i, await self.checkIn(user: user, purpose: .requested)) }
            }
            var results: [(Int, Outcome)] = []
            for await r in group { results.append(r) }
            return results.sorted { $0.0 < $1.0 }.map(\.1)
        }
    }

    // MARK: One check-in

    /// One attempt for `user`: fetch, apply, plan the next one. Never throws: the result
    /// says what happened (`failed` when it was not a contact nor a server command).
    /// `deadline` bounds the whole attempt, the wait for a free request slot included
    /// (the before-action pass: enforcement never waits longer than `[server] timeout`);
    /// nil: `[server] timeout` from when the request can start.
    /// `id`: the registration the check-in was planned for (the schedule, the pass before an
    /// offline action), which it is made for, or none when that registration is gone (never
    /// for another one that has the name by then); nil: the one `user` names now (a request).
    /// `scheduled`: the scheduler's token of this run (`runDueCheckIns`), ended when it is done.
    func checkIn(
        user: String, id planned: RegistrationID? = nil, purpose: CheckInPurpose, deadline: NIODeadline? = nil, scheduled: UInt64? = nil
    ) async -> Outcome {
        defer { if let scheduled { checkIns.ended(scheduled) } }
        let server = context.configuration.server
        guard server.isConfigured, let fetcher = context.fetcher else {
            return Outcome(user: user, operation: .checkIn, state: nil, reason: "no server configured", failed: true)
        }
        // What the request needs of the state is read first: a read that fails fails the
        // check-in (said in the journal and the result), it never reads as "nothing there".
        let found: RegistrationRecord?
        let credentials: ServerCredentials?
        let generation: UInt64
        do {
            generation = try context.store.writesCommitted()
            if let planned { found = try await context.store.registration(id: planned) } else { found = try await context.store.registration(user) }
            if let found { credentials = try await context.store.credentials(registration: found.id) } else { credentials = nil }
        } catch {
            return Outcome(user: user, operation: .checkIn, state: nil, reason: context.stateFailure(user, "check-in", error).message, failed: true)
        }
        guard let r = found else {
            // A planned check-in of a registration unregistered since: its plan ends with it.
            if let planned { checkIns.forget(planned) }
            return Outcome(user: user, operation: .checkIn, state: nil, reason: "no such registration", failed: true)
        }
        if r.state.isWipeCommitted {
            checkIns.forget(r.id)
            // A pending wipe is one that could not finish: not a good outcome to exit 0 on.
            if r.state == .wipePending {
                return Outcome(
                    user: user, operation: .checkIn, state: r.state,
                    reason: "not checked in: the registration is wipe-pending (its wipe is incomplete and is retried; lockwipectl status says what is left)",
                    failed: true)
            }
            return Outcome(user: user, operation: .checkIn, state: r.state, reason: "not checked in: the registration is \(r.state.rawValue)")
        }
        // The answer belongs to this registration (this id), not to whoever has the user
        // name when it arrives; unregister cancels the request (`cancelRequests(of:)`).
        let asked = r.id
        let started = NIODeadline.now()
        let known: SAPConnectionRecord?
        do {
            known = server.sapIdentity == nil ? nil : try await context.store.sapConnection(registration: asked)
        } catch {
            return Outcome(user: user, operation: .checkIn, state: r.state, reason: context.stateFailure(user, "check-in", error).message, failed: true)
        }
        let request = Task {
            await ServerExchange.run(fetcher, user: user, credentials: credentials, known: known?.id, server: server, deadline: deadline)
        }
        let ticket = checkIns.begin(registration: asked, request)
        let exchanged = await withTaskCancellationHandler {
            await request.value
        } onCancel: {
            request.cancel()
        }
        checkIns.end(ticket)
        let elapsedUSEC = (NIODeadline.now() - started).nanoseconds / 1_000
        // The answer goes to the registration that asked, in its turn. It is the server's
        // word, not the requester's: it runs outside her request's context, so that what it
        // orders is recorded as the server's and spares no client of hers (issue 40,
        // finding 4: a check-in she asked ran the server's lock as if it were her own).
        // Its turn reuses the record read above when the store committed nothing since.
        let registration = registration(id: asked, user: user)
        let asking = FoundRegistration(registration: registration, record: r, generation: generation)
        let result: Outcome
        // The record as the turn left it: what the plan of the next check-in needs (its
        // failures, whether a wipe is committed) without reading it again.
        let after: RegistrationRecord?
        do {
            (result, after) = try await RequestingClient.$current.withValue(nil) {
                try await asking.withTurn { turn in
                    // A connection recorded is a contact committed: the answer is applied to the
                    // record after it (the turn has it as the write returned it).
                    if let connection = exchanged.connection { await turn.registration.recordConnection(connection, replacing: exchanged.replaced, in: turn) }
                    turn.registration.notePolicyAbsence(exchanged.outcome, before: turn.record)
                    let applied = await turn.registration.apply(exchanged.outcome, in: turn, purpose: purpose, elapsedUSEC: elapsedUSEC)
                    return (applied, turn.record)
                }
            }
        } catch ManagerError.noSuchRegistration {
            // The registration that asked is gone: the answer is dropped, and its plan with it.
            forgetRegistration(registration)
            result = await registration.dropStale(exchanged.outcome, purpose: purpose)
            after = nil
        } catch {
            // Not "unregistered": its record cannot be read, so the answer is not applied,
            // the check-in failed, and the next one asks again, at the interval (the failure
            // count is unknown).
            result = Outcome(user: user, operation: .checkIn, state: nil, reason: context.stateFailure(user, "check-in", error).message, failed: true)
            after = nil
            scheduleCheckIn(asked, of: user, in: Double(context.configuration.server.intervalSeconds))
        }
        if !stopped, context.configuration.server.isConfigured, let after,
            !after.state.isWipeCommitted
        {
            let failures = after.server.failures
            let delay = CheckInBackoff(capSeconds: Double(context.configuration.server.intervalSeconds))
                .delay(afterFailures: failures, random: random())
            scheduleCheckIn(asked, of: user, in: delay)
        }
        await reschedule()
        return result
    }

    // MARK: Scheduling

    /// Check-ins are planned only from the start-up pass on, with a server and a client.
    private var mayPlanCheckIns: Bool { checkIns.isPlanning && context.configuration.server.isConfigured && context.fetcher != nil && !stopped }

    /// Plans a check-in of every registration that has none planned (or of all, `now`).
    func scheduleCheckInsForAll(now: Bool) async {
        guard mayPlanCheckIns else { return checkIns.clear() }
        let registrations: [CheckInScheduler.Due]
        do {
            registrations = try await context.store.registrations().filter { !$0.state.isWipeCommitted }.map {
                CheckInScheduler.Due(id: $0.id, user: $0.user)
            }
        } catch {
            // The check-ins planned stay planned; none is dropped for a read that failed.
            return context.stateNotice("the check-ins are not planned again", error)
        }
        checkIns.planNow(registrations, all: now)
    }

    /// Plans the next check-in of registration `id` (of `user`) in `seconds`.
    func scheduleCheckIn(_ id: RegistrationID, of user: String, in seconds: Double) {
        guard mayPlanCheckIns else { return }
        checkIns.plan(id, of: user, in: seconds)
    }

    /// The timer fired: starts every check-in that is due; each plans its own next one
    /// when it is done. The scheduler tracks them until they end.
    func runDueCheckIns() {
        for due in checkIns.takeDue() {
            checkIns.run { token in _ = await self.checkIn(user: due.user, id: due.id, purpose: .scheduled, scheduled: token) }
        }
    }

    private func scheduledCheckInEnded(_ token: UInt64) { checkIns.ended(token) }
}
