import LockwipeCore
import Synchronization

/// The registrations whose sealed outboxes are being uploaded in the background now
/// (`RegistrationContext.sweepOutboxes`): one background upload per registration at a
/// time, so that contacts in quick succession do not send the same files side by side. A
/// wipe's or unregister's own upload, which waits for its answer, does not ask.
final class OutboxUploads: Sendable {
    private let running = Mutex<Set<RegistrationID>>([])

    /// Whether `id` may start a background upload now (then `end` it).
    func begin(_ id: RegistrationID) -> Bool { running.withLock { $0.insert(id).inserted } }

    func end(_ id: RegistrationID) { _ = running.withLock { $0.remove(id) } }
}
