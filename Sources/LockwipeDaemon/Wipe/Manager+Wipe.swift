import Foundation
import LockwipeBase
import LockwipeCore
import LockwipeProtocol
import LockwipeSystemd
import LockwipeVaultIO
import LockwipeWipe
import Logging
import NIOCore

/// Wipes: the request, the committed intent, the erase on its own thread, the honest
/// report, and the resumption of an interrupted wipe at start-up.
extension Manager {
    public func wipe(user: String, trigger: Trigger, reason: String, requester: WipeRequester = WipeRequester()) async throws -> ActionResult {
        let requested = ContinuousClock.now
        let result = try await registration(named: user).withTurn { turn in
            try await wipe(in: turn, trigger: trigger, reason: reason, requester: requester, requested: requested)
        }
        await reschedule()
        return result
    }

    // MARK: Wipe

    /// Wipes the registration whose turn this is: the intent committed, then carried out.
    func wipe(
        in turn: borrowing RegistrationTurn, trigger: Trigger, reason: String, requester: WipeRequester = WipeRequester(),
        requested: ContinuousClock.Instant = .now
    ) async throws -> ActionResult {
        let r = turn.record
        let user = r.user
        if r.state == .wiped {
            return ActionResult(user: user, action: "wipe", state: .wiped, detail: "already wiped; " + (r.state.nextStep(user: user) ?? ""), wipe: r.lastWipe)
        }
        let now = clock.now().wall
        try await store.commitWipeIntent(
            user, reason: reason, trigger: trigger, requester: requester, event: event(user, .wipeStarted, trigger, reason, at: now))
        logger.notice("wipe of \(user) committed: \(reason)", metadata: journalFields(r, action: "wipe", trigger: trigger, reason: reason, id: .wipeStarted))
        try await turn.refresh()
        let summary = await performWipe(in: turn, reason: reason, trigger: trigger, resumed: false, requested: requested)
        // Committed (done or pending): SAP's full reset, whatever the erase came to.
        await resetServerIdentity(in: turn, trigger: trigger)
        guard let summary else { throw ManagerError.actionFailed("the wipe of \(user) could not run; it stays pending") }
        let state: RegistrationState = summary.complete ? .wiped : .wipePending
        return ActionResult(user: user, action: "wipe", state: state, detail: summary.resultText, wipe: summary)
    }

    /// Carries out a committed wipe: lock first (so nobody writes while it runs), erase,
    /// record the honest report. Returns nil when it could not even start.
    @discardableResult
    func performWipe(
        in turn: borrowing RegistrationTurn, reason: String, trigger: Trigger, resumed: Bool, requested: ContinuousClock.Instant = .now
    ) async -> WipeSummary? {
        let r = turn.record
        let user = r.user
        let event = LockWipeEvent(user: user, uid: r.uid, action: .wipe, reason: reason, trigger: trigger, directories: r.directories)
        if resumed {
            logger.notice("resuming the interrupted wipe of \(user)", metadata: journalFields(r, action: "wipe", trigger: trigger, reason: reason, id: .wipeResumed))
        }
        await observers.notify(.willWipe, event)
        do {
            _ = try await applyLock(r, trigger: trigger)
        } catch let error as VaultOpenError {
            // The erase below cannot open it either: nothing is touched, the wipe stays pending.
            await vaultWarning(r, "wipe", error)
        } catch let error as VaultUnresponsive {
            // The erase would stall its thread and this registration's turn for good: it is not
            // started, and the wipe stays pending (retried like any pending wipe).
            await vaultStalled(r, "wipe", error)
            return nil
        } catch {
            logger.warning("could not lock before wiping; wiping anyway", metadata: ["user": .string(user), "error": .string(ErrorWords.of(error))])
        }
        let now = clock.now().wall
        do {
            try await store.beginWipeAttempt(user, event: resumed ? self.event(user, .wipeResumed, .resume, reason, at: now) : nil)
        } catch {
            logger.critical("cannot record the wipe attempt; not wiping", metadata: ["user": .string(user), "error": .string(ErrorWords.of(error))])
            return nil
        }
        var options = configuration.wipe
        var destroyed: (at: Int64, seconds: Double?)?
        if r.protection == .encrypted {
            // Crypto-erase: once the key is gone from the kernel and from the store, what is
            // left is ciphertext; the files are then only unlinked.
            destroyed = await destroyVaultKey(r, trigger: trigger, reason: reason, requested: requested)
            if destroyed != nil { options.passes = 0 }
        }
        // A resumed wipe runs before READY=1: keep systemd's start timeout from killing a
        // long one half-way (it would only resume again), and say how far it is.
        // Shutdown (SIGTERM) cancels the request's task: the wipe stops at the next entry
        // and stays pending, instead of holding the stop until it is done.
        // The registration holds its running wipe: `status` reads how far it is there.
        let registration = turn.registration
        let progress = WipeProgress()
        registration.runningWipe = progress
        defer { registration.runningWipe = nil }
        let erased = await wipes.erase(user: user, directories: r.vaults, options: options, progress: progress) { progress in
            guard resumed else { return nil }
            let ticker = startupTicker(user: user, progress: progress)
            return { ticker.cancel() }
        }
        guard var summary = erased else {
            logger.error("a wipe of \(user) is already running; this one is not started", metadata: ["user": .string(user)])
            return nil
        }
        if let destroyed {
            summary.keyDestroyedAt = Timestamp.iso(destroyed.at)
            summary.keyDestroyedSeconds = destroyed.seconds
        }
        let pending: StateStore.PendingWipe?
        do {
            pending = try await store.pendingWipe(user)
        } catch {
            stateNotice("the certificate of the wipe of \(user) gives this attempt as the first", user: user, error)
            pending = nil
        }
        let attempt = Attempt(
            record: r, pending: pending, trigger: trigger, reason: reason, started: now,
            keyRemovedFromKernel: r.protection == .encrypted ? destroyed != nil : nil)
        let certificate = await certificate(attempt, summary: summary)
        var meta = journalFields(r, action: "wipe", trigger: trigger, reason: reason, id: summary.complete ? .wiped : .wipeIncomplete)
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
            try await store.finishWipe(
                user, summary: summary, certificate: certificate,
                event: self.event(user, summary.complete ? .wipe : .wipeIncomplete, trigger, detail, at: clock.now().wall))
        } catch {
            logger.critical("cannot record the wipe's result", metadata: ["user": .string(user), "error": .string(ErrorWords.of(error))])
        }
        if summary.complete {
            logger.notice("wiped \(user): \(detail) (certificate \(certificate.id))", metadata: meta)
        } else {
            logger.error("wipe of \(user) is INCOMPLETE: \(detail) (certificate \(certificate.id))", metadata: meta)
        }
        await observers.notify(.didWipe, event)
        return summary
    }

    /// What a wipe of `user` would do now: per vault the method, the census, the media
    /// and the caveats, read without changing anything (`lockwipectl wipe --dry-run`).
    public func previewWipe(user: String) async throws -> [WipePreview] {
        guard let r = try await store.registration(user) else { throw ManagerError.noSuchRegistration(user) }
        var options = configuration.wipe
        // An encrypted vault whose key is still stored would be crypto-erased (no overwrite).
        let stored: VaultKeyStatus?
        do {
            stored = r.protection == .encrypted ? try await store.vaultKeyStatus(user) : nil
        } catch {
            throw stateFailure(user, "wipe --dry-run", error)
        }
        let crypto = stored != nil
        if crypto { options.passes = 0 }
        let (vaults, passes) = (r.vaults, options.passes)
        // A user's own read, possibly long: on the readers' pool, never in enforcement's way.
        let surveys = try await BlockingPool.runRead {
            vaults.map { VaultSurvey.take($0, count: true, overwrite: passes > 0, maxOpenDirectories: SecureEraser().maxOpenDirectories) }
        }
        let method: WipePreview.Method = crypto ? .cryptoErase : passes > 0 ? .overwrite : .unlink
        return surveys.map { s in
            WipePreview(
                user: user, path: s.path, method: method, passes: passes, pattern: options.pattern.rawValue, files: s.census.files,
                bytes: s.census.bytes, directories: s.census.directories, otherEntries: s.census.otherEntries, mountPoints: s.census.mountPoints,
                partial: s.census.truncated, media: s.media, caveats: s.caveats, problem: s.problem)
        }
    }

    /// While a resumed wipe runs before READY=1: every 10 s, extend systemd's start
    /// timeout and put the progress in STATUS=. An event-loop timer.
    private nonisolated func startupTicker(user: String, progress: WipeProgress) -> RepeatedTask {
        let notifier = self.notifier
        return timerLoop.scheduleRepeatedTask(initialDelay: .seconds(10), delay: .seconds(10)) { _ in
            let p = progress.info()
            notifier.extendTimeout(by: .seconds(30))
            notifier.status("resuming the wipe of \(user): \(p.entriesRemoved) entries removed, \(p.bytesOverwritten) bytes overwritten")
        }
    }
}
