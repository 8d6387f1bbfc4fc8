import LockwipeBase
import LockwipeCore
import LockwipeVaultIO
import Logging
import NIOCore

/// Policy evaluation: offline clocks checkpointed, what is due carried out (after one
/// check-in attempt), and the one wake-up at the next threshold.
extension Manager {
    // MARK: Policy evaluation and scheduling

    /// Moves every offline clock to now, carries out what is due, and sleeps until the next
    /// threshold crossing (no polling).
    ///
    /// Before an offline-triggered action, each registration it concerns makes one check-in
    /// attempt: a machine that is in fact online is not punished. All of them share one
    /// deadline, `[server] timeout` from now (waiting for a free request slot included), so
    /// a slow or stalling server delays enforcement, and start-up, by that much at most.
    /// What is due is then decided again, per registration, in its turn.
    public func evaluate() async {
        // Fail closed: registrations that cannot be read are not retried now, and the
        // reschedule below (which cannot read them either) retries within a minute.
        let all: [RegistrationRecord]
        do {
            all = try await context.store.registrations()
        } catch {
            context.stateNotice("the retry of failed locks: cannot read the registrations", error)
            all = []
        }
        for r in all where registry.inForce(r).state == .lockFailed {
            await inTurn(of: registration(id: r.id, user: r.user), "the retry of the failed lock") { turn in
                guard turn.record.state == .lockFailed else { return }
                await turn.registration.retryLock(turn.record, in: turn)
            }
        }
        var due = await checkpointClocks()
        if !due.isEmpty, context.configuration.server.isConfigured, context.fetcher != nil {
            // Each for the registration that is due (its id), never another with the name.
            let registrations = Dictionary(due.map { ($0.0.id, $0.0.user) }, uniquingKeysWith: { first, _ in first })
            let deadline = NIODeadline.now() + .seconds(Int64(context.configuration.server.timeoutSeconds))
            await withTaskGroup(of: Void.self) { group in
                for (id, user) in registrations {
                    group.addTask { _ = await self.checkIn(user: user, id: id, purpose: .beforeAction, deadline: deadline) }
                }
            }
            due = await checkpointClocks()
        }
        for (r, action, _) in due {
            await inTurn(of: registration(id: r.id, user: r.user), "the offline \(action.rawValue)") { turn in
                await turn.registration.enforceOffline(action, in: turn)
            }
        }
        await reschedule()
    }

    /// Checkpoints clocks (persisted) and returns the actions now due.
    func checkpointClocks() async -> [(RegistrationRecord, Action, String)] {
        let reading = context.clock.now()
        let checkpoints: [(registration: RegistrationRecord, advance: OfflineClock.Advance)]
        do {
            checkpoints = try await context.store.checkpointClocks(at: reading)
        } catch {
            context.logger.critical(
                "cannot read and checkpoint the offline clocks; nothing is enforced until this is fixed",
                metadata: ["error": .string(ErrorWords.of(error)), "path": .string(context.store.path)])
            return []
        }
        var due: [(RegistrationRecord, Action, String)] = []
        for (r, advance) in checkpoints {
            if let back = advance.rollbackSeconds {
                context.logger.warning(
                    "clock rollback of \(RelativeTime.format(seconds: back)) detected; offline time keeps counting",
                    metadata: [
                        "user": .string(r.user), "message_id": MessageID.clockRollback.metadata,
                        "rollback_seconds": "\(back)", "offline_seconds": "\(advance.clock.offlineSeconds)",
                    ])
                do {
                    try await context.store.append(
                        context.event(r.user, .clockRollback, nil, "wall clock set back by \(back) s; offline time kept at \(advance.clock.offlineSeconds) s", at: reading.wall))
                } catch {
                    context.stateNotice("the clock rollback is not in the history of \(r.user)", user: r.user, error)
                }
            }
            let (p, source) = context.policy(for: r)
            let evaluation = PolicyEvaluator.evaluate(
                policy: p, state: r.state, offlineSeconds: advance.clock.offlineSeconds, leaseEndsAt: context.leaseEndsAt(r))
            if let action = evaluation.due {
                due.append((r, action, context.reason(action, offline: advance.clock.offlineSeconds, policy: p, source: source) + context.leaseNote(r, action, policy: p)))
            }
        }
        // A lease whose end the clock has passed is recorded as ended before what its end
        // makes due is carried out (by its registration's object: made only then).
        for (r, advance) in checkpoints where r.lease?.endsUnrecorded(advance.clock) == true {
            var advanced = r
            advanced.clock = advance.clock
            await registration(id: r.id, user: r.user).recordLeaseEnd(advanced, at: reading.wall)
        }
        return due
    }

    /// Plans what follows from the state now: the logout locks, systemd's STATUS= line,
    /// the warnings due, and the one wake-up at the next threshold crossing or warning. Overlapping reschedules apply
    /// the newest plan only (`WakeAlarm`).
    func reschedule() async {
        // A plan made at the end of a request (a warning it announces) is the daemon's own, not the requester's.
        if RequestingClient.current != nil { return await RequestingClient.$current.withValue(nil) { await reschedule() } }
        let plan = alarm.beginPlan()
        if let damage = context.store.damage {
            alarm.disarm()
            context.notifier.status("DEGRADED, nothing is enforced: \(damage)")
            return
        }
        await refreshLogoutLocks()
        let reading = context.clock.now()
        let outlooks: [Outlook]
        do {
            outlooks = try await self.outlooks(reading)
        } catch {
            // Fail closed: nothing is known to be far off, so the evaluation runs again soon.
            context.stateNotice("the next threshold cannot be planned; the evaluation is retried in a minute", error)
            guard alarm.isNewest(plan), !stopped else { return }
            context.notifier.status("the state database cannot be read: \(ErrorWords.of(error)); retried in a minute")
            do { try alarm.arm(in: 60, plan: plan) } catch { context.logger.critical("cannot create the wake-up timer", metadata: ["error": .string(ErrorWords.of(error))]) }
            return
        }
        let entries = outlooks.map { $0.summaryEntry(warnBefore: context.configuration.warnBeforeSeconds) }
        let windowOpensIn = await announceWarnings(outlooks, reading: reading)
        guard alarm.isNewest(plan), !stopped else { return }
        context.notifier.status(StatusSummary.line(entries))
        // Offline time grows at least as fast as real time (suspended time included), so
        // the crossing is at most this far.
        // A lock that failed is retried at least every minute (until it holds). A
        // registration entering its warning window (`[notify] warn_before`) is warned then.
        let retry: Int64? = entries.contains(where: { $0.state == .lockFailed }) ? 60 : nil
        // A lease's end is recorded when it comes, also when it moves no threshold.
        let leaseEnds = outlooks.compactMap { o in o.record.lease.flatMap { $0.endedAt == nil ? $0.remaining(o.record.clock, offline: o.offline) : nil } }
        // Every term of the offline count grows by one at each whole BOOTTIME second after
        // `reading` (`ClockReading.aligned`): the wake-up is planned for the exact second
        // boundary at which the nearest of these is reached (`WakePlan`), not this many
        // seconds after the timer is armed, which could be a second late.
        let nearest = (entries.compactMap({ $0.next?.inSeconds }) + leaseEnds.filter { $0 > 0 } + [retry, windowOpensIn].compactMap { $0 }).min()
        do {
            let wake = nearest.map { WakePlan.instant(inSeconds: $0, after: reading) }
            try alarm.arm(inNanos: wake.map { WakePlan.delay(until: $0, nowBootNanos: context.clock.bootNanos()) }, plan: plan)
        } catch {
            context.logger.critical(
                "cannot create the wake-up timer; thresholds are enforced only at the next request, check-in or restart",
                metadata: ["error": .string(ErrorWords.of(error))])
        }
    }

    /// The wake-up timer fired: a threshold is due, or the wall clock was set or the
    /// machine resumed, which may have made one due (and made check-in timers, which stop
    /// while suspended, late).
    func woke(_ reason: WakeTimer.Reason) async {
        guard !stopped else { return }
        if reason == .clockChanged {
            context.logger.info("the wall clock was set or the machine resumed from suspend; re-evaluating every registration")
            if checkIns.isPlanning { await scheduleCheckInsForAll(now: true) }
        }
        await evaluate()
    }

    // MARK: Warnings (`[notify] warn_before`)

    /// Gives every warning not given yet, and returns in how many seconds the next
    /// registration enters its window (nil: none will without a change), so the one
    /// wake-up comes then, not later.
    func announceWarnings(_ outlooks: [Outlook], reading: ClockReading) async -> Int64? {
        var opensIn: Int64?
        for outlook in outlooks {
            switch outlook.warning(warnBefore: context.configuration.warnBeforeSeconds) {
            case .none: continue
            case .opensIn(let seconds): opensIn = min(opensIn ?? seconds, seconds)
            case .warn(let warning):
                guard warning.threshold != outlook.record.warnedThreshold else { continue }
                await registration(id: outlook.record.id, user: outlook.record.user).warn(outlook.record, warning, offline: outlook.offline, reading: reading)
            }
        }
        return opensIn
    }

    /// The vault of a registration answers again (a call that had timed out returned at
    /// last): what waited for it runs now, in that registration's turn (never in that of a
    /// registration made again for the same name), instead of at the next start-up (issue
    /// 40, finding 2: the wipe of a vault held by a process in an uninterruptible wait was
    /// retried only then).
    func vaultAnswersAgain(_ owner: VaultOwner) async {
        guard !stopped else { return }
        await inTurn(of: registration(id: owner.registration, user: owner.user), "what waited for the vault") { turn in
            await turn.registration.vaultAnswersAgain(in: turn)
        }
        await reschedule()
    }
}
