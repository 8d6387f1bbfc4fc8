import LockwipeCore
import LockwipeSystemd
import Logging
import NIOCore
import NIOPosix

extension Manager {
    /// Starts lock on logout with `watcher` (nil: logind is unavailable, `reason` says why;
    /// logged once, and `status` warns while a registration has `lock_timeout > 0`).
    public func startLockOnLogout(
        watcher: (any SessionWatching)?, unavailableReason: String? = nil,
        timers: (any DeadlineScheduling)? = nil
    ) async {
        logout.timers = timers ?? EventLoopDeadlines(events: timerEvents)
        guard let watcher else {
            logout.unavailable = unavailableReason ?? "no session watcher"
            context.logger.notice(
                "lock on logout is disabled: \(logout.unavailable!)",
                metadata: [
                    "message_id": MessageID.logoutLockUnavailable.metadata
                ])
            return
        }
        do {
            try watcher.start { [weak self, timerEvents] in
                guard let self else { return }
                timerEvents.post { await self.refreshLogoutLocks() }
            }
        } catch {
            logout.unavailable = "\(error)"
            context.logger.warning(
                "lock on logout is disabled: cannot watch logind: \(error)",
                metadata: [
                    "message_id": MessageID.logoutLockUnavailable.metadata
                ])
            return
        }
        logout.watcher = watcher
        await refreshLogoutLocks()
    }

    /// Brings every registration's pending logout lock in line with its state, its
    /// `lock_timeout` and its user's sessions. Called on every session change (logind says
    /// sessions or users changed) and from
    /// ``reschedule()``, i.e. after every change of registrations, policy or context.configuration.
    func refreshLogoutLocks() async {
        guard logout.watcher != nil, !stopped else { return }
        // The Manager is free while the store is read: a refresh begun later may finish
        // first, and then this one's registrations are older than what is in force.
        logout.refreshes += 1
        let mine = logout.refreshes
        let registrations: [RegistrationRecord]
        do {
            registrations = try await context.store.registrations()
        } catch {
            // Fail closed: the timers stay as they are (none is dropped); the next refresh retries.
            return context.stateNotice("the locks on logout are not refreshed", error)
        }
        guard mine == logout.refreshes, let watcher = logout.watcher, let timers = logout.timers, !stopped else { return }
        let now = timers.now()
        var watched = Set<RegistrationID>()
        for r in registrations where r.state == .active {
            let (passcode, source) = context.passcodePolicy(for: r)
            guard passcode.lockTimeout > 0 else { continue }
            watched.insert(r.id)
            var t = logout.tracked[r.id] ?? LogoutLocks.Tracked(user: r.user, uid: r.uid)
            if watcher.loginSessions(uid: r.uid) > 0 {
                if t.noSessionSince != nil, t.sawSession || t.timer != nil {
                    context.logger.info(
                        "\(r.user) logged in again; the pending lock on logout is cancelled",
                        metadata: ["user": .string(r.user)])
                }
                t.timer?.cancel()
                t.timer = nil
                t.noSessionSince = nil
                t.sawSession = true
            } else {
                if t.noSessionSince == nil {
                    t.noSessionSince = now
                    context.logger.info(
                        t.sawSession
                            ? "the last session of \(r.user) ended; locking in \(passcode.lockTimeout) s unless they log in again"
                            : "\(r.user) has no login session; locking in \(passcode.lockTimeout) s unless they log in",
                        metadata: ["user": .string(r.user), "logind_state": .string(watcher.state(uid: r.uid))])
                }
                if t.timer == nil || t.timeout != passcode.lockTimeout {
                    t.timer?.cancel()
                    t.generation += 1
                    let due = t.noSessionSince! + .seconds(passcode.lockTimeout)
                    let generation = t.generation
                    let id = r.id
                    t.timer = timers.schedule(after: max(.zero, due - now)) { [weak self] in
                        await self?.logoutTimeoutReached(registration: id, generation: generation)
                    }
                }
            }
            t.timeout = passcode.lockTimeout
            t.source = source
            logout.tracked[r.id] = t
        }
        for (id, t) in logout.tracked where !watched.contains(id) {
            t.timer?.cancel()
            logout.tracked[id] = nil
        }
    }

    /// A pending logout lock of registration `id` is due: lock it, unless the user is back
    /// or the timer is stale.
    func logoutTimeoutReached(registration id: RegistrationID, generation: Int) async {
        guard let watcher = logout.watcher, let timers = logout.timers, var t = logout.tracked[id], t.generation == generation,
            let since = t.noSessionSince
        else { return }
        // A session change may be on its way: ask logind itself, not the last notification.
        if watcher.loginSessions(uid: t.uid) > 0 {
            await refreshLogoutLocks()
            return
        }
        let elapsed = timers.now() - since
        guard elapsed >= .seconds(t.timeout) else { return }
        t.timer = nil
        logout.tracked[id] = t
        let user = t.user
        let seconds = elapsed.components.seconds
        let reason =
            (t.sawSession ? "last session ended \(seconds) s ago" : "no login session for \(seconds) s")
            + " (lock_timeout \(t.timeout), \(t.source) passcode policy)"
        // The lock goes to the registration whose timer this is (its id), in its turn, never
        // to whoever has the name by then.
        let registration = registration(id: id, user: user)
        do {
            _ = try await registration.withTurn { turn in try await turn.registration.lock(in: turn, trigger: .logout, reason: reason) }
            await reschedule()
        } catch {
            if case ManagerError.noSuchRegistration = error { forgetRegistration(registration) }
            context.logger.error(
                "lock on logout of \(user) failed: \(error)",
                metadata: [
                    "user": .string(user), "message_id": MessageID.actionFailed.metadata,
                ])
        }
    }
}
