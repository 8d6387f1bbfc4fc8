import NIOCore
import NIOPosix
import Synchronization

/// At most `limit` holders at once; the others wait in order, each until its deadline or
/// until its task is cancelled.
final class AsyncLimiter: Sendable {
    private struct State {
        var active = 0
        var nextID: UInt64 = 0
        /// The waiters in order, by id.
        var queue: [UInt64] = []
        var continuations: [UInt64: CheckedContinuation<Bool, Never>] = [:]
        /// Outcomes decided (a slot handed over, a wait given up) before the waiter's
        /// continuation was stored.
        var decided: [UInt64: Bool] = [:]
    }
    private let limit: Int
    private let state = Mutex(State())
    private let timerLoop = MultiThreadedEventLoopGroup.singleton.any()

    init(limit: Int) { self.limit = limit }

    /// true: the caller holds a slot and must `release()` it; false: the deadline passed
    /// or the task was cancelled before a slot was free (nothing to release).
    func acquire(until deadline: NIODeadline? = nil) async -> Bool {
        if Task.isCancelled { return false }
        let id: UInt64? = state.withLock { state in
            if state.active < limit {
                state.active += 1
                return nil
            }
            state.nextID += 1
            state.queue.append(state.nextID)
            return state.nextID
        }
        guard let id else { return true }
        // The deadline and cancellation end the wait where they happen (the event loop's
        // timer, the canceller's thread): no task of their own.
        let timer = deadline.map { d in timerLoop.scheduleTask(deadline: d) { self.giveUp(id) } }
        defer { timer?.cancel() }
        return await withTaskCancellationHandler {
            // The releaser hands its slot over (true); giveUp ends the wait (false).
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let outcome: Bool? = state.withLock { state in
                    if let outcome = state.decided.removeValue(forKey: id) { return outcome }
                    state.continuations[id] = continuation
                    return nil
                }
                if let outcome { continuation.resume(returning: outcome) }
            }
        } onCancel: {
            giveUp(id)
        }
    }

    private func giveUp(_ id: UInt64) {
        let waiter: CheckedContinuation<Bool, Never>? = state.withLock { state in
            guard let i = state.queue.firstIndex(of: id) else { return nil }  // already handed a slot
            state.queue.remove(at: i)
            guard let continuation = state.continuations.removeValue(forKey: id) else {
                state.decided[id] = false
                return nil
            }
            return continuation
        }
        waiter?.resume(returning: false)
    }

    func release() {
        let waiter: CheckedContinuation<Bool, Never>? = state.withLock { state in
            guard !state.queue.isEmpty else {
                state.active -= 1
                return nil
            }
            let id = state.queue.removeFirst()
            guard let continuation = state.continuations.removeValue(forKey: id) else {
                state.decided[id] = true
                return nil
            }
            return continuation
        }
        waiter?.resume(returning: true)
    }
}
