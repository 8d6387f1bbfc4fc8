import Foundation
import LockwipeCore
import LockwipeProtocol
import Logging
import NIOCore

/// Server check-in: the Manager asks the server (outside any user's turn: the request
/// may take up to `[server] timeout`), then applies the answer in that user's turn, like
/// every other decision. Only a 2xx with a settings document is a contact.
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
    public func checkIn(users: [String]) async throws -> [ActionResult] {
        guard configuration.server.isConfigured else {
            throw ManagerError.actionFailed("no server configured: there is no policy server to check in with ([server] url)")
        }
        return await withTaskGroup(of: (Int, ActionResult).self) { group in
            for (i, user) in users.enumerated() {
                group.addTask { (i, await self.checkIn(user: user, purpose: .requested)) }
            }
            var results: [(Int, ActionResult)] = []
            for await r in group { results.append(r) }
            return results.sorted { $0.0 < $1.0 }.map(\.1)
        }
    }

    /// `SetCredentials`: replaces a registration's credentials, then checks in with them.
    public func setCredentials(user: String, _ credentials: ServerCredentials, by caller: Caller) async throws -> ActionResult {
        let problems = CheckInClient.credentialProblems(credentials)
        if !problems.isEmpty { throw ManagerError.invalidParameter("credentials", reason: problems.joined(separator: "; ")) }
        let result = try await withUser(user) { () throws -> ActionResult in
            guard try store.registration(user) != nil else { throw ManagerError.noSuchRegistration(user) }
            let now = clock.now().wall
            try store.setCredentials(user, credentials, event: event(user, .credentials, .admin,
                                                                   "credentials replaced (now: \(credentials.kind))", at: now))
            logger.notice("credentials of \(user) replaced", metadata: [
                "message_id": MessageID.credentialsChanged.metadata, "user": .string(user), "action": "credentials",
                "credentials": .string(credentials.kind), "peer_uid": "\(caller.credentials.uid)",
            ])
            return ActionResult(user: user, action: "credentials", state: nil, detail: "credentials replaced (\(credentials.kind))")
        }
        if configuration.server.isConfigured { scheduleCheckIn(user, in: 0) }
        return result
    }

    // MARK: One check-in

    /// One attempt for `user`: fetch, apply, plan the next one. Never throws: the result
    /// says what happened (`failed` when it was not a contact nor a server command).
    /// `deadline` bounds the whole attempt, the wait for a free request slot included
    /// (the before-action pass: enforcement never waits longer than `[server] timeout`);
    /// nil: `[server] timeout` from when the request can start.
    func checkIn(user: String, purpose: CheckInPurpose, deadline: NIODeadline? = nil) async -> ActionResult {
        let server = configuration.server
        guard server.isConfigured, let fetcher else {
            return ActionResult(user: user, action: "check-in", state: nil, detail: "no server configured", failed: true)
        }
        guard let r = try? store.registration(user) else {
            return ActionResult(user: user, action: "check-in", state: nil, detail: "no such registration", failed: true)
        }
        if r.state.isWipeCommitted {
            nextCheckIn[user] = nil
            return ActionResult(user: user, action: "check-in", state: r.state, detail: "not checked in: the registration is \(r.state.rawValue)")
        }
        let credentials = try? store.credentials(user)
        // The answer belongs to this registration (this id), not to whoever has the user
        // name when it arrives; unregister cancels the request (`cancelCheckIns(of:)`).
        let asked = r.id
        nextCheckIn[user] = nil
        checkInsInFlight[user, default: 0] += 1
        let started = NIODeadline.now()
        let request = Task { await fetcher.fetch(user: user, credentials: credentials, server: server, deadline: deadline) }
        let token = nextFetchToken
        nextFetchToken &+= 1
        fetchesInFlight[asked, default: [:]][token] = request
        let outcome = await withTaskCancellationHandler { await request.value } onCancel: { request.cancel() }
        fetchesInFlight[asked]?[token] = nil
        if fetchesInFlight[asked]?.isEmpty == true { fetchesInFlight[asked] = nil }
        checkInsInFlight[user]! -= 1
        if checkInsInFlight[user] == 0 { checkInsInFlight[user] = nil }
        let elapsedMS = (NIODeadline.now() - started).nanoseconds / 1_000_000
        let result = await withUser(user) {
            await self.apply(outcome, user: user, registration: asked, purpose: purpose, elapsedMS: elapsedMS)
        }
        if !stopped, configuration.server.isConfigured, let after = try? store.registration(user), after.id == asked,
           !after.state.isWipeCommitted {
            let failures = after.server.failures
            let delay = CheckInBackoff(capSeconds: Double(configuration.server.intervalSeconds))
                .delay(afterFailures: failures, random: random())
            scheduleCheckIn(user, in: delay)
        }
        reschedule()
        return result
    }

    /// Cancels every check-in request of registration `id` still waiting for its answer
    /// (unregister): whatever the server says to it later is never read.
    func cancelCheckIns(of id: String) {
        for request in (fetchesInFlight.removeValue(forKey: id) ?? [:]).values { request.cancel() }
    }

    /// Applies one answer in `user`'s turn, to the registration that asked only.
    private func apply(
        _ outcome: CheckInOutcome, user: String, registration asked: String, purpose: CheckInPurpose, elapsedMS: Int64
    ) async -> ActionResult {
        guard let r = try? store.registration(user), r.id == asked else {
            return dropStale(outcome, user: user, asked: asked, now: (try? store.registration(user))?.id, purpose: purpose)
        }
        if r.state.isWipeCommitted {
            return ActionResult(user: user, action: "check-in", state: r.state, detail: "answer ignored: the registration is \(r.state.rawValue)")
        }
        let reading = clock.now()
        var meta: Logger.Metadata = [
            "user": .string(user), "uid": "\(r.uid)", "action": "check-in", "purpose": .string(purpose.rawValue),
            "server": .string(configuration.server.url ?? ""), "elapsed_ms": "\(elapsedMS)",
        ]
        switch outcome {
        case .contact(let settings):
            return await applyContact(settings, r, reading: reading, meta: meta)

        case .lock, .wipe:
            let action: Action = outcome == .lock ? .lock : .wipe
            let code = action == .lock ? "TRAFFIC_REG_LOCKED" : "TRAFFIC_REG_WIPED"
            let reason = "the policy server \(action == .lock ? "locked" : "wiped") the registration (HTTP 403 \(code))"
            try? store.recordFailedAttempt(user, at: reading.wall, error: "HTTP 403 \(code): \(action == .lock ? "locked" : "wiped") by the server", failures: 0)
            meta["result"] = .string(code)
            meta["message_id"] = MessageID.checkInOK.metadata
            logger.notice("check-in of \(user): the server orders a \(action.rawValue) (\(code))", metadata: meta)
            do {
                let done = action == .lock
                    ? (r.state == .locked
                        ? ActionResult(user: user, action: "lock", state: .locked, detail: "already locked")
                        : try await lockLocked(user: user, trigger: .server, reason: reason))
                    : try await wipeLocked(user: user, trigger: .server, reason: reason)
                return ActionResult(user: user, action: "check-in", state: done.state,
                                    detail: "the server ordered a \(action.rawValue) (\(code)): \(done.detail)", wipe: done.wipe)
            } catch {
                let why = (error as? ManagerError)?.message ?? "\(error)"
                return ActionResult(user: user, action: "check-in", state: r.state,
                                    detail: "the server ordered a \(action.rawValue) (\(code)) and it failed: \(why)", failed: true)
            }

        case .blocked(let code):
            let failures = 0
            let newly = !r.blocked || r.server.blockedCode != code
            try? store.setBlocked(user, code: code, at: reading.wall, failures: failures,
                                  event: newly ? event(user, .blocked, .server, "the policy server blocked the registration (HTTP 403 \(code)); data untouched", at: reading.wall) : nil)
            meta["result"] = .string(code)
            meta["message_id"] = MessageID.registrationBlocked.metadata
            logger.warning("\(user) is blocked by the policy server (\(code)); no data action", metadata: meta)
            return ActionResult(user: user, action: "check-in", state: r.state, detail: "blocked by the server (\(code)); not a contact", failed: true)

        case .failure(let why):
            let failures = r.server.failures + 1
            try? store.recordFailedAttempt(user, at: reading.wall, error: why, failures: failures)
            meta["result"] = "failed"
            meta["error"] = .string(why)
            meta["failures"] = "\(failures)"
            meta["message_id"] = MessageID.checkInFailed.metadata
            logger.warning("check-in of \(user) failed: \(why)", metadata: meta)
            return ActionResult(user: user, action: "check-in", state: r.state, detail: "failed: \(why)", failed: true)
        }
    }

    /// An answer (or a request cancelled by unregister) for a registration that is gone:
    /// applied to nobody, logged and recorded in the history of the user name.
    private func dropStale(_ outcome: CheckInOutcome, user: String, asked: String, now current: String?,
                           purpose: CheckInPurpose) -> ActionResult {
        let answer: String
        switch outcome {
        case .contact: answer = "a contact (settings)"
        case .lock: answer = "HTTP 403 TRAFFIC_REG_LOCKED"
        case .wipe: answer = "HTTP 403 TRAFFIC_REG_WIPED"
        case .blocked(let code): answer = "HTTP 403 \(code)"
        case .failure(let why): answer = "no answer (\(why))"
        }
        let since = current == nil ? "was unregistered" : "was unregistered and \(user) registered again (registration \(current!))"
        let detail = "check-in of registration \(asked) dropped: \(answer); the registration \(since) before the answer could be applied"
        try? store.append(event(user, .checkInDropped, .server, detail, at: clock.now().wall))
        logger.warning("\(detail)", metadata: [
            "message_id": MessageID.checkInDropped.metadata, "user": .string(user), "action": "check-in",
            "purpose": .string(purpose.rawValue), "registration_id": .string(asked), "result": "dropped",
        ])
        return ActionResult(user: user, action: "check-in", state: nil, detail: detail, failed: true)
    }

    /// A successful contact: clock restarted, block lifted, server policy (when valid)
    /// adopted, a server or offline lock lifted unless the server says it stays locked.
    private func applyContact(_ settings: ServerSettings, _ r: RegistrationRecord, reading: ClockReading, meta: Logger.Metadata) async -> ActionResult {
        let user = r.user
        var meta = meta
        var events: [StoredEvent] = []
        var notes: [String] = []

        var newPolicy: Policy?
        var policyError: String?
        let rejected = settings.policyProblems
        if !rejected.isEmpty {
            let text = rejected.map(\.description).joined(separator: "; ")
            policyError = "contact ok, but the server policy was rejected (the last valid one is kept): \(text)"
            if r.server.lastError != policyError {
                events.append(event(user, .serverPolicyRejected, .server, "rejected, last valid policy kept: \(text)", at: reading.wall))
            }
            var m = meta
            m["message_id"] = MessageID.serverPolicyRejected.metadata
            m["problems"] = .string(text)
            logger.error("the server policy for \(user) is invalid and was rejected; keeping the last valid policy: \(text)", metadata: m)
            notes.append("server policy rejected: \(text)")
        } else if let p = settings.policy {
            newPolicy = p
            if p != r.server.policy {
                let text = describe(p)
                events.append(event(user, .serverPolicy, .server, "policy from the server: \(text)", at: reading.wall))
                var m = meta
                m["message_id"] = MessageID.serverPolicyApplied.metadata
                m["offline_days_before_lock"] = "\(p.offlineDaysBeforeLock)"
                m["offline_days_before_wipe"] = "\(p.offlineDaysBeforeWipe)"
                logger.notice("new server policy for \(user): \(text)", metadata: m)
                notes.append("server policy: \(text)")
            }
        }
        if r.blocked {
            events.append(event(user, .unblocked, .server, "the policy server no longer blocks the registration", at: reading.wall))
            notes.append("no longer blocked")
        }

        // Re-authentication by the server lifts its own and the offline lock, never one an
        // administrator or the user set. The filesystem first, then the record (as unlock does).
        var unlock = false
        var handBack = false
        if r.state.isLockCommitted, r.lockTrigger == .server || r.lockTrigger == .offline, settings.registrationLocked != true {
            do {
                guard try await unlockAfterContact(r) else {
                    // Only the user's passcode opens this vault: the server's (or the offline)
                    // lock is lifted, the cryptographic one stays until the user unlocks.
                    handBack = true
                    let reason = "the policy server lifted the \(r.lockTrigger!.rawValue) lock; the encrypted vault stays locked until its user unlocks it with the passcode"
                    events.append(event(user, .lockLifted, .server, reason, at: reading.wall))
                    notes.append("lock lifted; unlock with the passcode")
                    throw CancellationError()
                }
                unlock = true
                let reason = "unlocked by a successful contact with the policy server (lock trigger: \(r.lockTrigger!.rawValue))"
                events.append(event(user, .unlock, .server, reason, at: reading.wall))
                var m = journalFields(r, action: "unlock", trigger: .server, reason: reason, id: .unlocked)
                m["server"] = meta["server"]
                logger.notice("unlocked \(user): \(reason)", metadata: m)
                notes.append("unlocked")
            } catch is CancellationError where handBack {
            } catch {
                logger.error("unlock of \(user) after a server contact failed: \(error)", metadata: [
                    "user": .string(user), "action": "unlock", "message_id": MessageID.actionFailed.metadata,
                ])
                notes.append("unlock FAILED: \(error)")
            }
        }
        do {
            try store.commitContact(user, clock: .started(at: reading), at: reading.wall, policy: newPolicy,
                                    // A valid answer's settings are kept also when it has no lock/wipe policy
                                    // (e.g. only a passwordPolicy, whose lock timeout then applies).
                                    settings: rejected.isEmpty ? settings : nil, policyError: policyError, unlock: unlock, events: events)
        } catch {
            logger.critical("cannot record a server contact", metadata: ["user": .string(user), "error": .string("\(error)")])
            return ActionResult(user: user, action: "check-in", state: r.state, detail: "contact ok but not recorded: \(error)", failed: true)
        }
        if handBack { try? store.setLockTrigger(user, .user) }
        meta["result"] = "ok"
        meta["message_id"] = MessageID.checkInOK.metadata
        meta["offline_seconds"] = "0"
        logger.info("check-in of \(user) ok", metadata: meta)

        var state: RegistrationState = unlock ? .active : r.state
        if settings.registrationLocked == true, state == .active {
            let reason = "the policy server says the registration is locked (registration.locked)"
            if let done = try? await lockLocked(user: user, trigger: .server, reason: reason) {
                state = done.state ?? state
                notes.append("locked by the server")
            }
        }
        let (p, source) = policy(for: (try? store.registration(user)) ?? r)
        let summary = "contact ok; offline clock restarted; \(source) policy: \(describe(p))"
        return ActionResult(user: user, action: "check-in", state: state,
                            detail: ([summary] + notes).joined(separator: "; "))
    }

    func describe(_ p: Policy) -> String {
        let lock = p.offlineDaysBeforeLock > 0 ? "lock after \(p.offlineDaysBeforeLock)d" : "never lock"
        let wipe = p.offlineDaysBeforeWipe > 0 ? "wipe after \(p.offlineDaysBeforeWipe)d" : "never wipe"
        return "\(lock), \(wipe)"
    }

    // MARK: Scheduling

    /// Plans a check-in of every registration that has none planned (or of all, `now`).
    func scheduleCheckInsForAll(now: Bool) {
        guard checkInScheduling, configuration.server.isConfigured, fetcher != nil, !stopped else {
            nextCheckIn = [:]
            checkInTimer?.cancel()
            checkInTimer = nil
            return
        }
        for r in (try? store.registrations()) ?? [] where !r.state.isWipeCommitted {
            if now || (nextCheckIn[r.user] == nil && checkInsInFlight[r.user] == nil) { nextCheckIn[r.user] = .now() }
        }
        rescheduleCheckInTimer()
    }

    func scheduleCheckIn(_ user: String, in seconds: Double) {
        guard checkInScheduling, configuration.server.isConfigured, fetcher != nil, !stopped else { return }
        nextCheckIn[user] = .now() + .milliseconds(Int64(max(0, seconds) * 1000))
        rescheduleCheckInTimer()
    }

    private func rescheduleCheckInTimer() {
        checkInTimer?.cancel()
        checkInTimer = nil
        guard !stopped, let soonest = nextCheckIn.values.min() else { return }
        checkInTimer = timerLoop.scheduleTask(deadline: soonest) { [weak self] in
            guard let self else { return }
            Task { await self.runDueCheckIns() }
        }
    }

    /// Starts every check-in that is due; each plans its own next one when it is done.
    private func runDueCheckIns() {
        let now = NIODeadline.now()
        let due = nextCheckIn.filter { $0.value <= now }.map(\.key).sorted()
        for user in due {
            nextCheckIn[user] = nil
            if checkInsInFlight[user] != nil { continue }
            Task { _ = await self.checkIn(user: user, purpose: .scheduled) }
        }
        rescheduleCheckInTimer()
    }

    /// When `r` checks in next, as wall time (nil: none planned, e.g. no server).
    func nextCheckInTime(_ r: RegistrationRecord, wall: Int64) -> Int64? {
        guard configuration.server.isConfigured, !r.state.isWipeCommitted else { return nil }
        if checkInsInFlight[r.user] != nil { return wall }
        guard let deadline = nextCheckIn[r.user] else { return nil }
        let ahead = max(0, (deadline - .now()).nanoseconds / 1_000_000_000)
        return wall + ahead
    }
}
