import Foundation
import LockwipeBase
import LockwipeCore
import LockwipeSystemd
import LockwipeVaultIO
import LockwipeWipe
import Logging
import NIOCore

/// The wipe of one registration: the committed intent, the lock, the erase on its own
/// thread, the honest report with its certificate, and the resumption of an interrupted wipe.
extension Registration {
    /// Wipes the registration whose turn this is: the intent committed, then carried out.
    nonisolated(nonsending) func wipe(
        in turn: borrowing RegistrationTurn, trigger: Trigger, reason: String, requester: WipeRequester = WipeRequester(),
        requested: ContinuousClock.Instant = .now
    ) async throws -> Outcome {
        let r = turn.record
        let user = r.user
        if r.state == .wiped {
            return Outcome(user: user, operation: .wipe, state: .wiped, reason: "already wiped; " + (r.state.nextStep(user: user) ?? ""), wipe: r.lastWipe)
        }
        let now = context.clock.now().wall
        let written = try await context.store.commitWipeIntent(
            turn.held, reason: reason, trigger: trigger, requester: requester, event: context.event(user, .wipeStarted, trigger, reason, at: now))
        context.logger.notice("wipe of \(user) committed: \(reason)", metadata: context.journalFields(r, action: "wipe", trigger: trigger, reason: reason, id: .wipeStarted))
        // The turn goes on with the record as the commit wrote it (no second read).
        try turn.committed(written)
        let summary = await performWipe(
            in: turn, reason: reason, trigger: trigger, resumed: false, requested: requested, sealingOutbox: r.state == .active)
        // Committed (done or pending): SAP's full reset, whatever the erase came to.
        await resetServerIdentity(in: turn, trigger: trigger)
        guard let summary else { throw ManagerError.actionFailed("the wipe of \(user) could not run; it stays pending") }
        let state: RegistrationState = summary.complete ? .wiped : .wipePending
        return Outcome(user: user, operation: .wipe, state: state, reason: summary.resultText, wipe: summary)
    }

    /// Carries out a committed wipe: lock first (so nobody writes while it runs), erase,
    /// record the honest report. Returns nil when it could not even start.
    @discardableResult
    nonisolated(nonsending) func performWipe(
        in turn: borrowing RegistrationTurn, reason: String, trigger: Trigger, resumed: Bool, requested: ContinuousClock.Instant = .now,
        sealingOutbox: Bool = false
    ) async -> WipeSummary? {
        let r = turn.record
        let user = r.user
        var event = LockWipeEvent(user: user, uid: r.uid, action: .wipe, reason: reason, trigger: trigger, directories: r.directories)
        event.outboxDirectories = outboxDirectories(r)
        if resumed {
            context.logger.notice(
                "resuming the interrupted wipe of \(user)", metadata: context.journalFields(r, action: "wipe", trigger: trigger, reason: reason, id: .wipeResumed))
        }
        await context.observers.notify(.willWipe, event)
        // After the commit (a seal that never ends leaves the wipe pending, never undone)
        // and willWipe (a hook's last chance to put work there), before the wipe's lock
        // takes the vault away from its applications. `r` is the record as committed:
        // whether the vault was open is the caller's.
        // A resumed wipe did this when it began; it never waits for a server in the start-up pass.
        let outbox = resumed ? (words: nil, certificate: nil) : await outboxBeforeWipe(r, trigger: trigger, sealing: sealingOutbox)
        event.outbox = outbox.words
        do {
            _ = try await applyLock(r, trigger: trigger)
        } catch let error as VaultOpenError {
            // The erase below cannot open it either: nothing is touched, the wipe stays pending.
            await context.vaultWarning(r, "wipe", error, in: turn)
        } catch let error as VaultUnresponsive {
            // The erase would stall its thread and this registration's turn for good: it is not
            // started, and the wipe stays pending (retried like any pending wipe).
            await context.vaultStalled(r, "wipe", error, in: turn)
            return nil
        } catch {
            context.logger.warning("could not lock before wiping; wiping anyway", metadata: ["user": .string(user), "error": .string(ErrorWords.of(error))])
        }
        let now = context.clock.now().wall
        do {
            try await context.store.beginWipeAttempt(turn.held, event: resumed ? context.event(user, .wipeResumed, .resume, reason, at: now) : nil)
        } catch {
            context.logger.critical("cannot record the wipe attempt; not wiping", metadata: ["user": .string(user), "error": .string(ErrorWords.of(error))])
            return nil
        }
        var options = context.configuration.wipe
        // What a copy of the disk got until now: for the certificate, read while the key is there.
        let atRest = context.atRest(r, key: await context.keyStatus(r))
        var recoveryKey: String?
        if r.protection == .encrypted {
            do {
                recoveryKey = try await context.store.vaultKey(registration: r.id)?.wrapped.recovery?.recipient
            } catch {
                context.stateNotice("the certificate of the wipe of \(user) cannot say whether its key was sealed to a recovery key", user: user, error)
            }
        }
        var destroyed: (at: Int64, seconds: Double?)?
        if r.protection == .encrypted {
            // Crypto-erase: once the key is gone from the kernel and from the store, what is
            // left is ciphertext; the files are then only unlinked.
            destroyed = await destroyVaultKey(r, trigger: trigger, reason: reason, requested: requested, in: turn)
            if destroyed != nil { options.passes = 0 }
        }
        // A resumed wipe runs before READY=1: keep systemd's start timeout from killing a
        // long one half-way (it would only resume again), and say how far it is.
        // Shutdown (SIGTERM) cancels the request's task: the wipe stops at the next entry
        // and stays pending, instead of holding the stop until it is done.
        // The registration holds its running wipe: `status` reads how far it is there.
        let registration = self
        let progress = WipeProgress()
        registration.runningWipe = progress
        defer { registration.runningWipe = nil }
        let (notifier, loop) = (context.notifier, context.timerLoop)
        let erased = await context.wipes.erase(registration: id, directories: r.vaults, options: options, progress: progress) { progress in
            guard resumed else { return nil }
            let ticker = Self.startupTicker(user: user, progress: progress, notifier: notifier, loop: loop)
            return { ticker.cancel() }
        }
        guard var summary = erased else {
            context.logger.error("a wipe of \(user) is already running; this one is not started", metadata: ["user": .string(user)])
            return nil
        }
        if let destroyed {
            summary.keyDestroyedAt = Timestamp.iso(destroyed.at)
            summary.keyDestroyedSeconds = destroyed.seconds
        }
        let pending: StateStore.PendingWipe?
        do {
            pending = try await context.store.pendingWipe(registration: id)
        } catch {
            context.stateNotice("the certificate of the wipe of \(user) gives this attempt as the first", user: user, error)
            pending = nil
        }
        let attempt = Attempt(
            record: r, pending: pending, trigger: trigger, reason: reason, started: now,
            keyRemovedFromKernel: r.protection == .encrypted ? destroyed != nil : nil, atRest: atRest, recoveryKey: recoveryKey,
            outbox: outbox.certificate)
        let certificate = await certificate(attempt, summary: summary)
        var meta = context.journalFields(r, action: "wipe", trigger: trigger, reason: reason, id: summary.complete ? .wiped : .wipeIncomplete)
        meta["files"] = "\(summary.filesOverwritten)"
        meta["bytes"] = "\(summary.bytesOverwritten)"
        meta["entries"] = "\(summary.entriesRemoved)"
        meta["skipped"] = "\(summary.skipped.count)"
        meta["passes"] = "\(summary.passes)"
        meta["attributes_cleared"] = "\(summary.attributesCleared)"
        meta["elapsed_usec"] = .string(JournalFields.microseconds(seconds: summary.elapsedSeconds))
        meta["certificate_id"] = .string(certificate.id)
        if !summary.caveats.isEmpty { meta["caveats"] = .string(Set(summary.caveats.map(\.kind.rawValue)).sorted().joined(separator: ",")) }
        if summary.cryptoErased {
            meta["crypto_erased"] = "true"
            meta["key_destroyed_at"] = .string(summary.keyDestroyedAt ?? "")
            if let s = summary.keyDestroyedSeconds { meta["key_destroyed_usec"] = .string(JournalFields.microseconds(seconds: s)) }
        }
        let detail = summary.recordText(resumed: resumed)
        do {
            try await context.store.finishWipe(
                turn.held, summary: summary, certificate: certificate,
                event: context.event(user, summary.complete ? .wipe : .wipeIncomplete, trigger, detail, at: context.clock.now().wall))
        } catch {
            context.logger.critical("cannot record the wipe's result", metadata: ["user": .string(user), "error": .string(ErrorWords.of(error))])
        }
        if summary.complete {
            context.logger.notice("wiped \(user): \(detail) (certificate \(certificate.id))", metadata: meta)
        } else {
            context.logger.error("wipe of \(user) is INCOMPLETE: \(detail) (certificate \(certificate.id))", metadata: meta)
        }
        await context.observers.notify(.didWipe, event)
        return summary
    }

    /// While a resumed wipe runs before READY=1: every 10 s, extend systemd's start
    /// timeout and put the progress in STATUS=. An event-loop timer.
    private static func startupTicker(user: String, progress: WipeProgress, notifier: SystemdNotifier, loop: any EventLoop) -> RepeatedTask {
        loop.scheduleRepeatedTask(initialDelay: .seconds(10), delay: .seconds(10)) { _ in
            let p = progress.info()
            notifier.extendTimeout(by: .seconds(30))
            notifier.status("resuming the wipe of \(user): \(p.entriesRemoved) entries removed, \(p.bytesOverwritten) bytes overwritten")
        }
    }
}
