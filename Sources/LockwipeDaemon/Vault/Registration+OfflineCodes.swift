import Foundation
import LockwipeBase
import LockwipeCore
import Logging

/// An offline code's response entered for this registration (docs/offline-codes.md): what
/// it asked, done once, in the registration's turn. What a response may lift is
/// `PolicyLockLift`'s, with proof `.offlineCode`; the lift itself is the server contact's
/// (`openWithoutPasscode`), the lease that comes with it `grantLease`'s. Wrong responses back
/// off as wrong passcodes do (`PasscodeBackoff`) and never count toward `retry_limit`.
extension Registration {
    nonisolated(nonsending) func offlineCodeEnter(in turn: borrowing RegistrationTurn, code: String, by caller: Caller) async throws -> Outcome {
        let r = turn.record
        let user = r.user
        let now = context.clock.now().wall
        let trigger = Self.trigger(caller)
        guard let row = try await readOrFail(user, { try await context.store.offlineChallenge(registration: r.id) }), let counter = row.counter else {
            try await refuse(
                r, caller, "no challenge is outstanding for \(user) (it was used, or none was asked): ask for one with lockwipectl offline-code challenge",
                as: ManagerError.actionFailed)
        }
        if let at = PasscodeBackoff.standard.retryAt(failures: row.failures, lastFailure: row.failedAt, now: now) {
            try await refuse(
                r, caller,
                "\(row.failures) wrong offline codes in a row: try again in \(at - now) s (at \(Timestamp.iso(at))); this code was not tried and does not count",
                failures: row.failures)
        }
        let canonical: String
        do {
            canonical = try OfflineCode.readResponse(code)
        } catch {
            // A code that does not read cannot be right: it is not tried and not counted.
            try await refuse(r, caller, "the code does not read: \(error.description)", failures: row.failures) {
                ManagerError.invalidParameter("code", reason: $0)
            }
        }
        let stored: OfflineCodeKeyFile.Contents?
        let this: UInt64
        do {
            let file = context.offlineCodeKeyFile
            stored = try await file.load()
            this = try await context.offlineCodeEpoch().machine
        } catch {
            throw ManagerError.actionFailed("offline codes cannot be checked: \(ErrorWords.of(error))")
        }
        guard let stored, stored.machine == this else {
            throw ManagerError.actionFailed("offline codes are not provisioned on this machine: an administrator runs lockwipectl offline-code provision --fleet-key-file FILE")
        }
        let request: OfflineCode.Request = row.days == 0 ? .lift : .extend(days: row.days)
        let challenge = OfflineCode.Challenge(machine: this, registration: OfflineCode.registrationBits(ofID: r.id), request: request, counter: counter)
        guard OfflineCode.accepts(canonical, challenge: challenge, machineKey: stored.key) else {
            let count: Int
            do {
                let template = context.event(user, .offlineCodeRefused, trigger, "", at: now)
                let wrong = "wrong offline code from \(Self.who(caller)) for \(challenge.text)"
                count = try await context.store.recordOfflineCodeFailure(turn.held, at: now) { count in
                    var e = template
                    e.detail = "\(wrong) (\(count) in a row)"
                    return e
                }
            } catch {
                throw context.stateFailure(user, "the offline code (a wrong code was given and could not be counted)", error)
            }
            let wait = PasscodeBackoff.standard.delay(afterFailures: count)
            logRefusal(r, caller, "wrong offline code", failures: count, challenge: challenge.text)
            throw ManagerError.notPermitted(
                "wrong offline code for \(challenge.text) (\(count) in a row"
                    + (wait > 0 ? "; the next attempt is allowed in \(wait) s" : "") + "); wrong codes never wipe: check what was read out, or ask for a new challenge")
        }
        // Right: the challenge is used up first, so that no failure below leaves it usable twice.
        let accepted = "offline code for \(challenge.text) (\(request)) accepted from \(Self.who(caller))"
        let used: Bool
        do {
            used = try await context.store.useOfflineChallenge(
                turn.held, counter: counter, event: context.event(user, .offlineCodeAccepted, trigger, accepted, at: now))
        } catch {
            throw context.stateFailure(user, "the offline code", error)
        }
        guard used else { try await refuse(r, caller, "the challenge \(challenge.text) was used meanwhile", as: ManagerError.actionFailed) }
        var meta = context.journalFields(r, action: "offline-code", trigger: trigger, reason: accepted, id: .offlineCodeAccepted)
        meta["request"] = .string(request.description)
        meta["challenge"] = .string(challenge.text)
        meta["counter"] = "\(counter)"
        meta["peer_uid"] = "\(caller.credentials.uid)"
        context.logger.notice("\(accepted)", metadata: meta)
        let requester = "the helpdesk's code entered by \(Self.who(caller))"
        switch request {
        case .extend(let days):
            let lease = try await grantLease(
                until: now + Int64(days) * OfflineLease.day, source: .offlineCode, reference: challenge.text, requester: requester, in: turn)
            return Outcome(
                user: user, operation: .offlineCode, state: turn.record.state, reason: "offline lease extended: offline until \(Timestamp.iso(lease.until))")
        case .lift:
            return try await liftWithOfflineCode(in: turn, challenge: challenge.text, requester: requester, caller: caller)
        }
    }

    /// Lifts `turn`'s policy lock (`PolicyLockLift`, proof `.offlineCode`), as a server
    /// contact does, and grants the lease of `unlock_lease_days` that comes with it.
    private nonisolated(nonsending) func liftWithOfflineCode(in turn: borrowing RegistrationTurn, challenge: String, requester: String, caller: Caller) async throws -> Outcome {
        let r = turn.record
        let user = r.user
        var opens = r.protection != .encrypted
        if !opens, let key = try await readOrFail(user, { try await context.store.vaultKey(registration: id) }) { opens = key.wrapped.wrapping == .machine }
        // The setting and `liftable` do not change what an offline code does.
        let lock = PolicyLockLift.Lock(state: r.state, trigger: r.lockTrigger, liftable: false)
        let now = context.clock.now().wall
        let reason = "lifted with the helpdesk's offline code for \(challenge), entered by \(Self.who(caller))"
        var detail: String
        var state = r.state
        let written: RegistrationRecord?
        switch PolicyLockLift.decide(lock, proof: .offlineCode, setting: .atLogin, opens: opens) {
        case .notAPolicyLock, .stays, .becomesLiftable:
            throw ManagerError.actionFailed("the code was right but there is nothing to lift: \(Self.nothingToLift(r) ?? "\(user) is \(r.state.rawValue)")")
        case .lift:
            do {
                guard try await openWithoutPasscode(r, in: turn) else { throw FileSystemError("unlock", "the vault key of \(user) is wrapped by a passcode") }
            } catch {
                throw context.failure(user, "unlock", error)
            }
            do {
                written = try await context.store.commitUnlock(turn.held, clock: nil, event: context.event(user, .unlock, Self.trigger(caller), reason, at: now))
            } catch {
                throw context.stateFailure(user, "unlock", error)
            }
            var meta = context.journalFields(r, action: "unlock", trigger: Self.trigger(caller), reason: reason, id: .unlocked)
            meta["peer_uid"] = "\(caller.credentials.uid)"
            context.logger.notice("unlocked \(user): \(reason)", metadata: meta)
            detail = "unlocked with the offline code"
            state = .active
        case .handBack:
            let handed = reason + "; the vault stays locked until its passcode is given (lockwipectl unlock)"
            do {
                written = try await context.store.commitHandBack(turn.held, event: context.event(user, .lockLifted, Self.trigger(caller), handed, at: now))
            } catch {
                throw context.stateFailure(user, "unlock", error)
            }
            context.logger.notice("\(user): \(handed)", metadata: context.journalFields(r, action: "unlock", trigger: Self.trigger(caller), reason: handed, id: .unlocked))
            detail = "the policy lock was lifted with the offline code; unlock the vault with its passcode (lockwipectl unlock)"
        }
        try turn.committed(written)
        let days = context.configuration.offlineCodes.unlockLeaseDays
        if days > 0 {
            do {
                let lease = try await grantLease(
                    until: now + Int64(days) * OfflineLease.day, source: .offlineCode, reference: challenge, requester: requester, in: turn)
                detail += "; offline until \(Timestamp.iso(lease.until))"
            } catch {
                detail += "; the offline lease that comes with it FAILED: \((error as? ManagerError)?.message ?? ErrorWords.of(error))"
            }
        }
        return Outcome(user: user, operation: .offlineCode, state: state, reason: detail)
    }

    /// A new challenge for this registration's user (replacing her outstanding one): to lift her lock
    /// (`extendDays` nil), or to extend her offline lease by `extendDays`.
    nonisolated(nonsending) func offlineCodeChallenge(in turn: borrowing RegistrationTurn, extendDays: Int?, by caller: Caller) async throws -> IssuedChallenge {
        let maxDays = min(context.configuration.offlineCodes.maxLeaseDays, OfflineCode.maxDays)
        if let days = extendDays, days < 1 || days > maxDays {
            throw ManagerError.invalidParameter(
                "extend_days", reason: "an extension of \(days) day\(days == 1 ? "" : "s") is refused: it must be 1 to \(maxDays) days ([offline_codes] max_lease_days)")
        }
        let provisioned = await context.offlineCodesStatus()
        guard provisioned.provisioned, let machineHex = provisioned.machine, let machine = UInt64(machineHex, radix: 16),
            let epoch = provisioned.provisionEpoch
        else {
            throw ManagerError.actionFailed(
                "offline codes are not provisioned on this machine"
                    + (provisioned.machine.map { $0.contains(" ") ? " (\($0))" : "" } ?? "")
                    + ": an administrator runs lockwipectl offline-code provision --fleet-key-file FILE")
        }
        let request: OfflineCode.Request = extendDays.map { .extend(days: $0) } ?? .lift
        let r = turn.record
        let user = r.user
        guard !r.state.isWipeCommitted else {
            throw ManagerError.wrongState(user: user, current: r.state, reason: "\(user) is \(r.state.rawValue): an offline code cannot undo a wipe")
        }
        if request == .lift, let why = Registration.nothingToLift(r) { throw ManagerError.actionFailed(why) }
        let now = context.clock.now().wall
        let registrationBits = OfflineCode.registrationBits(ofID: r.id)
        let detailWithout = "challenge to \(request) by \(Self.who(caller))"
        var challenge = OfflineCode.Challenge(machine: machine, registration: registrationBits, request: request, counter: 0)
        let template = context.event(user, .offlineCodeChallenge, Self.trigger(caller), detailWithout, at: now)
        let issue: OfflineChallengeIssue
        do {
            issue = try await context.store.issueOfflineChallenge(turn.held, days: extendDays ?? 0, epoch: epoch, at: now) {
                [challenge] counter in
                var c = challenge
                c.counter = counter
                var e = template
                e.detail = "\(detailWithout): \(c.text) (counter \(counter))"
                return e
            }
        } catch {
            throw context.stateFailure(user, "the offline-code challenge", error)
        }
        let counter: UInt32
        switch issue {
        case .issued(let c):
            counter = c
            // The last counter of the epoch: status says so from now on.
            if Int64(c) == OfflineCode.countersPerEpoch { context.knownOfflineCodes.forget() }
        case .usedUp(let e):
            context.knownOfflineCodes.forget()
            context.logger.error(
                "the offline codes of key epoch \(e) are used up: no challenge is given until they are provisioned again",
                metadata: ["user": .string(user), "message_id": MessageID.offlineCodeRefused.metadata, "epoch": "\(e)"])
            throw ManagerError.actionFailed(
                "this machine's offline codes are used up (\(OfflineCode.countersPerEpoch) challenges under its key); no challenge repeats an earlier one, so none is given: an administrator runs lockwipectl offline-code provision --fleet-key-file FILE to move to key epoch \(e + 1)"
            )
        case .tooSoon(let until):
            throw ManagerError.notPermitted(
                "\(user) asked for \(OfflineChallengeRate.perWindow) challenges within an hour: the next can be asked at \(Timestamp.iso(until)) (in \(max(0, until - now)) s)"
            )
        case .epochChanged:
            context.knownOfflineCodes.forget()
            throw ManagerError.actionFailed("the offline codes were provisioned again while the challenge was asked: ask again")
        }
        challenge.counter = counter
        var meta = context.journalFields(r, action: "offline-code", trigger: Self.trigger(caller), reason: detailWithout, id: .offlineCodeChallenge)
        meta["request"] = .string(request.description)
        meta["challenge"] = .string(challenge.text)
        meta["counter"] = "\(counter)"
        meta["machine"] = .string(machineHex)
        meta["peer_uid"] = "\(caller.credentials.uid)"
        context.logger.notice("offline-code challenge for \(user): \(request)", metadata: meta)
        return IssuedChallenge(user: user, text: challenge.text, machine: machineHex, request: request.description)
    }

    /// Why there is no lock for an offline code to lift in `r`, or nil when there is one.
    static func nothingToLift(_ r: RegistrationRecord) -> String? {
        let lock = PolicyLockLift.Lock(state: r.state, trigger: r.lockTrigger, liftable: false)
        if lock.isPolicyLock { return nil }
        guard r.state.isLockCommitted else { return "\(r.user) is \(r.state.rawValue), not locked: an offline code lifts a lock (ask with --extend DAYS for a lease)" }
        return "the lock of \(r.user) was set by \(r.lockTrigger?.rawValue ?? "an unknown trigger"), not by the policy server or the offline policy: "
            + "an offline code lifts only those (the passcode or an administrator lifts this one)"
    }

    static func trigger(_ caller: Caller) -> Trigger { caller.isAdmin ? .admin : .user }

    static func who(_ caller: Caller) -> String {
        "\(caller.userName ?? "uid \(caller.credentials.uid)") (uid \(caller.credentials.uid))"
    }

    private nonisolated(nonsending) func readOrFail<T>(_ user: String, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch {
            throw context.stateFailure(user, "the offline code", error)
        }
    }

    /// Records a refused code (history and journal) and throws the refusal; nothing is
    /// counted. Such refusals are not held back by anything, so a run of them is one history
    /// event with a count (`StateStore.appendRepeatable`, issue 40).
    private nonisolated(nonsending) func refuse(
        _ r: RegistrationRecord, _ caller: Caller, _ why: String, failures: Int? = nil, as error: (String) -> ManagerError = ManagerError.notPermitted
    ) async throws -> Never {
        let run: Int
        do {
            run = try await context.store.appendRepeatable(
                context.event(r.user, .offlineCodeRefused, Self.trigger(caller), "offline code from \(Self.who(caller)) refused: \(why)", at: context.clock.now().wall))
        } catch {
            throw context.stateFailure(r.user, "the offline code", error)
        }
        if HistoryRetention.journals(repeat: run) {
            logRefusal(r, caller, why, failures: failures, challenge: nil, run: run)
        }
        throw error(why)
    }

    private func logRefusal(_ r: RegistrationRecord, _ caller: Caller, _ why: String, failures: Int?, challenge: String?, run: Int = 1) {
        var meta = context.journalFields(r, action: "offline-code", trigger: Self.trigger(caller), reason: why, id: .offlineCodeRefused)
        meta["peer_uid"] = "\(caller.credentials.uid)"
        // A run of the same refusal: the journal has its first ten and every hundredth.
        if run > 1 { meta["repeats"] = "\(run)" }
        if let failures { meta["failed_attempts"] = "\(failures)" }
        if let challenge { meta["challenge"] = .string(challenge) }
        let repeated = run > 10 ? " (refused \(run) times in a row; the journal shows the first ten and every hundredth)" : ""
        context.logger.warning("offline code for \(r.user) refused: \(why)\(repeated)", metadata: meta)
    }

    static func bytes(hex: String) -> [UInt8]? {
        let chars = Array(hex.utf8)
        guard chars.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(chars.count / 2)
        var i = 0
        while i < chars.count {
            guard let b = UInt8(String(decoding: chars[i..<i + 2], as: UTF8.self), radix: 16) else { return nil }
            out.append(b)
            i += 2
        }
        return out
    }
}
