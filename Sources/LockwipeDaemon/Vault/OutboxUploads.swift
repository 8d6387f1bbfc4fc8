import LockwipeCore
import Synchronization

/// The background uploads of sealed outboxes (`RegistrationContext.sweepOutboxes`): one
/// per registration at a time, so that contacts in quick succession do not send the same
/// files side by side, and, after one that did not get through, none for that
/// registration again before `retryAfter` (the next check-in interval) unless a new seal
/// asks: a server without the endpoint is not asked, and the journal not told, at every
/// contact of every registration. A wipe's or unregister's own upload, which waits for its
/// answer, does not ask.
final class OutboxUploads: Sendable {
    private struct State {
        var running: Set<RegistrationID> = []
        var failedAt: [RegistrationID: ContinuousClock.Instant] = [:]
    }
    private let state = Mutex(State())

    /// Whether `id` may start a background upload now (then `end` it): none is running
    /// for it, and its last one got through, or failed at least `retryAfter` ago, or
    /// `force` (a new seal).
    func begin(_ id: RegistrationID, retryAfter: Duration, force: Bool) -> Bool {
        state.withLock { s in
            guard !s.running.contains(id) else { return false }
            if !force, let failed = s.failedAt[id], ContinuousClock.now - failed < retryAfter { return false }
            s.running.insert(id)
            return true
        }
    }

    /// Ends `id`'s background upload: `failed` when something was not received.
    func end(_ id: RegistrationID, failed: Bool) {
        state.withLock { s in
            s.running.remove(id)
            s.failedAt[id] = failed ? ContinuousClock.now : nil
        }
    }
}
