import LockwipeCore
import LockwipeProtocol
import LockwipeVaultIO
import Synchronization

/// The wipes running now. Each erase runs on its own thread (`VaultErasing`), counting on
/// the progress its registration holds (`status` reads it there), and `cancelAll` (shutdown) stops every one at its
/// next entry: the wipe stays pending and resumes at the next start. One erase per registration at
/// a time (its turn ensures it; a second is refused here too).
package final class WipeCoordinator: Sendable {
    private let eraser: any VaultErasing
    private let running = Mutex<[RegistrationID: WipeProgress]>([:])
    private let cancelled = Atomic(false)

    package init(eraser: any VaultErasing) { self.eraser = eraser }

    /// Erases `directories` of registration `registration` (its id), counting on `progress` (the caller's: its registration
    /// shows it to `status` while the erase runs). `whileRunning` is called with it before
    /// the erase starts; what it returns is called when the erase has ended (a ticker's stop).
    /// Cancelling the calling task stops the erase at its next entry, as `cancelAll` does.
    /// nil when an erase of that registration is already running.
    package func erase(
        registration: RegistrationID, directories: [VaultDirectory], options: WipeOptions, progress: WipeProgress,
        whileRunning: @Sendable (WipeProgress) -> (@Sendable () -> Void)? = { _ in nil }
    ) async -> WipeSummary? {
        let started = running.withLock { running -> Bool in
            guard running[registration] == nil else { return false }
            running[registration] = progress
            return true
        }
        guard started else { return nil }
        defer { _ = running.withLock { $0.removeValue(forKey: registration) } }
        // Shutdown may have begun between the caller's decision and now.
        if cancelled.load(ordering: .acquiring) { progress.cancel() }
        let stop = whileRunning(progress)
        defer { stop?() }
        return await withTaskCancellationHandler {
            await eraser.erase(directories: directories, options: options, progress: progress)
        } onCancel: {
            progress.cancel()
        }
    }

    /// Stops every running wipe at its next entry, and every later one before it starts.
    package func cancelAll() {
        cancelled.store(true, ordering: .releasing)
        for progress in running.withLock({ Array($0.values) }) { progress.cancel() }
    }
}
