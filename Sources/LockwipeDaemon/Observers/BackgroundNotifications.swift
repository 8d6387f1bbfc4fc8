import LockwipeCore
import Synchronization

/// Observer notifications that must not hold up enforcement (the warnings before offline
/// locks and wipes, a server that starts rejecting a registration): each runs in a task of
/// its own, and shutdown waits for those still running (`drain`), so that a hook that is
/// running is not cut off by the exit. Hooks are bounded by `[hooks] timeout_seconds`.
final class BackgroundNotifications: Sendable {
    private let running = Mutex<(next: Int, tasks: [Int: Task<Void, Never>])>((0, [:]))

    /// Tells `observers` of `event` in a task of its own; returns at once.
    func post(_ callback: ObserverCallback, _ event: LockWipeEvent, to observers: ObserverHub) {
        running.withLock { state in
            let number = state.next
            state.next += 1
            state.tasks[number] = Task {
                await observers.notify(callback, event)
                self.finished(number)
            }
        }
    }

    private func finished(_ number: Int) {
        _ = running.withLock { $0.tasks.removeValue(forKey: number) }
    }

    /// Waits for the notifications still running (after the daemon stopped posting).
    func drain() async {
        // Each task removes itself as its last step, before its value is ready.
        while let task = running.withLock({ $0.tasks.values.first }) { await task.value }
    }
}
