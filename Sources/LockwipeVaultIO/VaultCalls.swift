import Dispatch
import Foundation
import LockwipeBase
import LockwipeCore
import Synchronization

/// A filesystem call on a vault that did not return within its deadline.
package struct VaultUnresponsive: Error, Sendable, CustomStringConvertible {
    package var user: String
    /// What was asked of the vault when it stopped answering.
    package var what: String
    package var seconds: Int
    /// True when this call found an earlier one still stuck (it did not start).
    package var earlier: Bool

    package var description: String {
        earlier
            ? "the vault's filesystem has not answered since \(what) (over \(seconds) s ago); nothing more is asked of it until it does"
            : "the vault's filesystem did not answer \(what) within \(seconds) s; nothing more is asked of it until it does"
    }
}

/// Whose vault a call is on: the registration (by id, what the unresponsive mark is kept
/// by) and its user (for the words).
package struct VaultOwner: Hashable, Sendable {
    package var registration: RegistrationID
    package var user: String

    package init(registration: RegistrationID, user: String) {
        self.registration = registration
        self.user = user
    }
}

/// Where every filesystem call on a user's vault runs: on a thread of its own, never on
/// an actor or a pool thread, with a deadline. A user controls what her vault's path
/// leads to (a FUSE server that never answers, a stalled network filesystem), so any
/// call on it may block for ever; the caller waits at most `timeout`, then the call is
/// left to its thread and the vault is *unresponsive*: further calls for that registration
/// fail at once (no second thread is left behind) until the stuck one returns. Everyone
/// else's calls are never queued behind it, nor those of a registration made again for
/// the same user name (another id).
package final class VaultCalls: Sendable {
    package let timeout: Duration
    private let stuck = Mutex<[RegistrationID: (what: String, since: ContinuousClock.Instant)]>([:])
    private let recovered: @Sendable (_ owner: VaultOwner, _ what: String) -> Void

    /// `recovered` is told when a call that had timed out returns at last.
    package init(timeout: Duration, recovered: @escaping @Sendable (_ owner: VaultOwner, _ what: String) -> Void = { _, _ in }) {
        self.timeout = timeout
        self.recovered = recovered
    }

    /// Whether a call on the vault of registration `id` is stuck now, and since what.
    package func unresponsive(_ id: RegistrationID) -> String? { stuck.withLock { $0[id]?.what } }

    /// Runs `body` (`what`: the words for it, "the lock") on a new thread and returns its
    /// result, or throws `VaultUnresponsive` after `timeout` (the default one unless given). The call is not abandoned
    /// when the caller's task is cancelled: it runs to its end or its deadline.
    package func run<T: Sendable>(
        for owner: VaultOwner, _ what: String, timeout: Duration? = nil, _ body: @escaping @Sendable () throws -> T
    ) async throws -> T {
        let (id, user) = (owner.registration, owner.user)
        if let earlier = stuck.withLock({ $0[id] }) {
            let seconds = Int((ContinuousClock.now - earlier.since).components.seconds) + Int(self.timeout.components.seconds)
            throw VaultUnresponsive(user: user, what: earlier.what, seconds: seconds, earlier: true)
        }
        let seconds = Int((timeout ?? self.timeout).components.seconds)
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            // One outcome: whichever of the thread and the deadline comes first resumes the
            // caller; the state of the call and the registration's mark change under one lock.
            let call = Call()
            // The deadline is cancelled when the call returns first, so that what it holds
            // (the caller's continuation) is freed then, not when the deadline passes.
            let deadline = Deadline(after: seconds)
            deadline.start { [self] in
                let timedOut = call.state.withLock { state -> Bool in
                    guard !state.done else { return false }
                    state.done = true
                    state.timedOut = true
                    stuck.withLock { $0[id] = (what, ContinuousClock.now) }
                    return true
                }
                if timedOut {
                    continuation.resume(throwing: VaultUnresponsive(user: user, what: what, seconds: seconds, earlier: false))
                }
            }
            NamedThread.start("lockwiped-vault") { [self] in
                let result = Result { try body() }
                let outcome = call.state.withLock { state -> (resume: Bool, recover: Bool) in
                    if !state.done {
                        state.done = true
                        return (true, false)
                    }
                    return (false, state.timedOut)
                }
                if outcome.resume {
                    deadline.cancel()
                    continuation.resume(with: result)
                } else if outcome.recover {
                    stuck.withLock { _ = $0.removeValue(forKey: id) }
                    recovered(owner, what)
                }
            }
        }
    }

    /// The outcome of one call: done (the caller was resumed), and whether by the deadline.
    private final class Call: Sendable {
        let state = Mutex<(done: Bool, timedOut: Bool)>((false, false))
    }

    /// A call's deadline: a one-shot timer on a global queue whose handler, and what the
    /// handler holds, is released as soon as it is cancelled or has fired. A dispatch
    /// source may be cancelled from any thread, hence `@unchecked Sendable`.
    private final class Deadline: @unchecked Sendable {
        private let timer: any DispatchSourceTimer

        init(after seconds: Int) {
            timer = DispatchSource.makeTimerSource(queue: .global())
            timer.schedule(deadline: .now() + .seconds(seconds))
        }

        func start(_ handler: @escaping @Sendable () -> Void) {
            timer.setEventHandler { [self] in
                handler()
                cancel()
            }
            timer.activate()
        }

        func cancel() { timer.cancel() }
    }
}
