import Foundation
import LockwipeBase
import LockwipeCore
import Logging

/// A check-in answer applied to the registration that asked: `CheckInDecision` decides what
/// it does (no I/O), this carries the effects out in the registration's turn, in the decision's
/// order: journal lines, the lock change, one store transaction, the answer's journal
/// line, then a lock or wipe the server ordered.
extension Registration {
    /// Applies one answer in the turn of the registration that asked (an answer to a
    /// registration gone meanwhile is dropped before: `dropStale`).
    nonisolated(nonsending) func apply(_ outcome: CheckInOutcome, in turn: borrowing RegistrationTurn, purpose: Manager.CheckInPurpose, elapsedUSEC: Int64) async -> Outcome {
        let r = turn.record
        let user = r.user
        // A contact: the sealed outboxes this registration left go to the server now, beside
        // the answer (a wiped registration's too).
        if outcome.isContact { startOutboxUploads(r) }
        if r.state.isWipeCommitted {
            return Outcome(user: user, operation: .checkIn, state: r.state, reason: "answer ignored: the registration is \(r.state.rawValue)")
        }
        let reading = context.clock.now()
        let meta: Logger.Metadata = [
            "user": .string(user), "uid": "\(r.uid)", "action": "check-in", "purpose": .string(purpose.rawValue),
            "server": .string(context.configuration.server.url ?? ""), "elapsed_usec": "\(elapsedUSEC)",
        ]
        let decision = CheckInDecision.decide(await decisionInput(r, outcome), outcome)
        for line in decision.before { log(line, meta) }
        var notes = decision.notes
        var events = decision.events.map { event(user, $0, at: reading.wall) }
        var lock = ContactCommit.Lock.keep
        switch decision.lockChange {
        case .none:
            break
        case .handBack(let lifted):
            lock = .handedBack
            events.append(event(user, lifted, at: reading.wall))
        case .becomesLiftable(let liftable):
            lock = .liftable
            events.append(event(user, liftable, at: reading.wall))
        case .noLongerLiftable:
            lock = .notLiftable
        case .lift(let unlocked):
            // The filesystem first, then the record (as unlock does).
            do {
                guard try await openWithoutPasscode(r, in: turn) else { throw FileSystemError("unlock", "the vault key of \(user) is wrapped by a passcode") }
                lock = .lifted
                events.append(event(user, unlocked, at: reading.wall))
                var m = context.journalFields(r, action: "unlock", trigger: .server, reason: unlocked.detail, id: .unlocked)
                m["server"] = meta["server"]
                context.logger.notice("unlocked \(user): \(unlocked.detail)", metadata: m)
                notes.append("unlocked")
            } catch {
                context.logger.error(
                    "unlock of \(user) after a server contact failed: \(ErrorWords.of(error))",
                    metadata: [
                        "user": .string(user), "action": "unlock", "message_id": MessageID.actionFailed.metadata,
                    ])
                notes.append("unlock FAILED: \(ErrorWords.of(error))")
            }
        }
        let written: RegistrationRecord?
        do {
            written = try await record(decision.write, in: turn, reading: reading, lock: lock, events: events)
        } catch {
            context.logger.critical("cannot record a server contact", metadata: ["user": .string(user), "error": .string(ErrorWords.of(error))])
            return Outcome(user: user, operation: .checkIn, state: r.state, reason: "contact ok but not recorded: \(ErrorWords.of(error))", failed: true)
        }
        log(decision.after, meta)
        if decision.newlyRejected, case .rejected(let status, let text) = outcome { announceRejection(r, status: status, text: text, reading: reading) }
        if case .becomesLiftable(let liftable) = decision.lockChange {
            var m = context.journalFields(r, action: "lock-liftable", trigger: .server, reason: liftable.detail, id: .lockLiftable)
            m["server"] = meta["server"]
            context.logger.notice("the lock of \(user) can be lifted: \(liftable.detail)", metadata: m)
        }
        // Committed: the lock or wipe the server ordered, and the policy said below, start
        // from the record after it, as the write returned it (read again only when the write
        // could not be recorded and was logged).
        do {
            if let written { try turn.committed(written) } else { try await turn.refresh() }
        } catch {
            context.logger.error(
                "cannot read the registration of \(user) again after recording a server contact: \(ErrorWords.of(error))",
                metadata: ["user": .string(user), "message_id": MessageID.actionFailed.metadata])
            return Outcome(
                user: user, operation: .checkIn, state: r.state, reason: "contact recorded, but the registration cannot be read again: \(ErrorWords.of(error))",
                failed: true)
        }

        if case .contact(let settings) = outcome, let note = await applyServerLease(settings.offlineLeaseUntil, in: turn) { notes.append(note) }

        switch decision.order {
        case .lock(let code, let reason):
            return await carryOut(r, "lock", code: code) {
                // A lock the server orders again is no longer liftable by an earlier contact.
                if turn.record.lockLiftable { try await context.store.clearLockLiftable(turn.held) }
                return try await self.lock(in: turn, trigger: .server, reason: reason)
            }
        case .wipe(let code, let reason):
            return await carryOut(r, "wipe", code: code) {
                try await wipe(in: turn, trigger: .server, reason: reason, requester: WipeRequester(server: context.configuration.server.url))
            }
        case .settingsLock, nil:
            break
        }
        if let detail = decision.detail {
            return Outcome(user: user, operation: .checkIn, state: r.state, reason: detail, failed: decision.failed)
        }
        var state: RegistrationState = lock == .lifted ? .active : r.state
        if case .settingsLock(let reason) = decision.order {
            do {
                let done = try await self.lock(in: turn, trigger: .server, reason: reason)
                state = done.state ?? state
                notes.append("locked by the server")
            } catch {
                // In the journal and the result; the server's settings order it again at the next check-in.
                notes.append("the lock the server ordered FAILED: \(context.failure(user, "lock", error).message)")
            }
        }
        let (p, source) = context.policy(for: turn.record)
        let summary = "contact ok; offline clock restarted; \(decision.newPolicy ? "new " : "")\(source) policy: \(p.text)"
        return Outcome(user: user, operation: .checkIn, state: state, reason: ([summary] + notes).joined(separator: "; "))
    }

    /// A lock or wipe the server ordered (403), carried out as any other lock or wipe.
    private nonisolated(nonsending) func carryOut(_ r: RegistrationRecord, _ action: String, code: String, _ body: () async throws -> Outcome) async -> Outcome {
        let ordered = "the server ordered a \(action) (\(code))"
        do {
            let done = try await body()
            return Outcome(user: r.user, operation: .checkIn, state: done.state, reason: "\(ordered): \(done.reason)", wipe: done.wipe)
        } catch {
            let why = (error as? ManagerError)?.message ?? ErrorWords.of(error)
            return Outcome(user: r.user, operation: .checkIn, state: r.state, reason: "\(ordered) and it failed: \(why)", failed: true)
        }
    }

    /// What the decision reads of `r`. Whether the vault opens without its user is read only
    /// for an encrypted vault that is locked; a key that cannot be read counts as one the
    /// machine key wraps, so that the unlock meets (and reports) the same error.
    private nonisolated(nonsending) func decisionInput(_ r: RegistrationRecord, _ outcome: CheckInOutcome) async -> CheckInDecision.Registration {
        var opens = true
        if outcome.isContact, r.protection == .encrypted, r.state.isLockCommitted {
            do { opens = try await context.store.vaultKey(registration: r.id)?.wrapped.wrapping == .machine } catch { opens = true }
        }
        return CheckInDecision.Registration(
            user: r.user, state: r.state, lockTrigger: r.lockTrigger, blocked: r.blocked, blockedCode: r.server.blockedCode,
            lastError: r.server.lastError, failures: r.server.failures, serverPolicy: r.server.policy, opensWithoutPasscode: opens,
            rejectedStatus: r.server.rejectedStatus, liftable: r.lockLiftable, liftAfterContact: context.configuration.liftAfterContact,
            serverProtocol: context.configuration.server.serverProtocol, hasCredentials: r.server.hasCredentials,
            oauth: context.configuration.server.oauth != nil)
    }

    /// The decision's one write, in one transaction with its events; returns the registration
    /// as written (nil when a write that is not a contact could not be recorded: logged).
    private nonisolated(nonsending) func record(
        _ write: CheckInDecision.Write, in turn: borrowing RegistrationTurn, reading: ClockReading, lock: ContactCommit.Lock, events: [StoredEvent]
    ) async throws -> RegistrationRecord? {
        switch write {
        case .contact(let policy, let settings, let lastError):
            return try await context.store.commitContact(
                turn.held,
                ContactCommit(
                    clock: .started(at: reading), time: reading.wall, policy: policy, settings: settings,
                    policyError: lastError, lock: lock, events: events))
        case .attempt(let error, let failures):
            // Not a contact: a failure to record it changes nothing that is enforced.
            do {
                return try await context.store.recordFailedAttempt(turn.held, at: reading.wall, error: error, failures: failures)
            } catch {
                context.stateNotice("the failed check-in of \(user) is not recorded (status shows the attempt before)", user: user, error)
                return nil
            }
        case .blocked(let code, let failures):
            // The server says it again at the next check-in.
            do {
                return try await context.store.setBlocked(turn.held, code: code, at: reading.wall, failures: failures, event: events.first)
            } catch {
                context.stateNotice("that the server blocks \(user) (\(code)) is not recorded", user: user, error)
                return nil
            }
        case .rejected(let status, let text, let failures):
            // Not a contact: the server says it again at the next check-in.
            do {
                return try await context.store.recordRejected(
                    turn.held, at: reading.wall, status: status, text: text, failures: failures, server: context.configuration.server.url ?? "")
            } catch {
                context.stateNotice("that the server rejects \(user) (HTTP \(status)) is not recorded", user: user, error)
                return nil
            }
        }
    }

    private func log(_ line: CheckInDecision.JournalLine, _ meta: Logger.Metadata) {
        var m = meta
        for (key, value) in line.fields { m[key] = .string(value) }
        let id: MessageID
        switch line.kind {
        case .checkInOK: id = .checkInOK
        case .serverOrder: id = .serverOrder
        case .registrationBlocked: id = .registrationBlocked
        case .registrationRejected: id = .registrationRejected
        case .checkInFailed: id = .checkInFailed
        case .serverPolicyRejected: id = .serverPolicyRejected
        case .serverPolicyApplied: id = .serverPolicyApplied
        }
        m["message_id"] = id.metadata
        switch line.level {
        case .info: context.logger.info("\(line.message)", metadata: m)
        case .notice: context.logger.notice("\(line.message)", metadata: m)
        case .warning: context.logger.warning("\(line.message)", metadata: m)
        case .error: context.logger.error("\(line.message)", metadata: m)
        }
    }

    private func event(_ user: String, _ e: CheckInDecision.Event, at time: Int64) -> StoredEvent {
        context.event(user, e.kind, .server, e.detail, at: time)
    }

    /// Tells the observers, in the background (hooks never hold up a check-in), that the
    /// server started rejecting `r`: what it answered and what to check, and what the
    /// offline clock, which runs on, does next and when.
    func announceRejection(_ r: RegistrationRecord, status: Int, text: String, reading: ClockReading) {
        let next = context.outlook(r, reading).next
        var reason = "the policy server rejects the check-ins (HTTP \(status): \(text)); \(context.configuration.server.rejectionAdvice(r, status: status))"
        if let next {
            reason += "; until a check-in succeeds the offline clock runs on: \(next.action.rawValue) in \(RelativeTime.format(seconds: next.inSeconds))"
        }
        let event = LockWipeEvent(
            user: r.user, uid: r.uid, action: next?.action ?? .lock, reason: reason, trigger: .server, directories: r.directories,
            dueAt: next.map { reading.wall + $0.inSeconds })
        context.background.post(.warnRejected, event, to: context.observers)
    }
}
