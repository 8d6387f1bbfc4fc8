import NIOCore
import NIOPosix

/// The one rule for blocking work: short blocking calls (scrypt, key files, the filesystem
/// calls of a lock or an unlock, waiting for processes to end) run on NIO's one shared
/// thread pool, never on an actor or the cooperative pool; only a running wipe has a
/// thread of its own (`runOnWipeThread`).
///
/// What a user asks to read for herself and that may take long (the survey of a wipe's
/// dry-run, which counts her whole vault) runs on a pool of its own (`runRead`), so that
/// enforcement (lock, wipe, unlock) never queues behind it, however many she starts.
package enum BlockingPool {
    /// Runs `body` on `NIOThreadPool.singleton` and returns its result. The work is not
    /// abandoned when the calling task is cancelled (a shutdown): a key change or a lock
    /// that has begun runs to its end, and the caller sees its outcome.
    ///
    /// The result is handed to the waiting task from the pool's thread (`resume`), not
    /// through an event loop's future: one thread woken, not two.
    package static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await run(on: NIOThreadPool.singleton, body)
    }

    /// Runs `body` on `NIOThreadPool.singleton` without waiting for it (a short chore whose
    /// outcome nobody needs); not run once the pool is shutting down.
    package static func post(_ body: @escaping @Sendable () -> Void) {
        NIOThreadPool.singleton.submit { state in
            if state == .active { body() }
        }
    }

    /// Runs a user's long read (a dry-run's survey) on the readers' pool of
    /// `readerThreads` threads, apart from enforcement's. Readers queue behind each other
    /// there, never in front of a lock (and one user has one dry-run at a time:
    /// `ControlServer`).
    package static func runRead<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await run(on: readers, body)
    }

    /// `body` on `pool`, its result resumed from there. Not NIO's async `runIfActive`: that
    /// drops work not yet started when the caller is cancelled, and this must not.
    private static func run<T: Sendable>(on pool: NIOThreadPool, _ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            pool.submit { state in
                guard state == .active else { return continuation.resume(throwing: NIOThreadPoolError.ThreadPoolInactive()) }
                continuation.resume(with: Result(catching: body))
            }
        }
    }

    package static let readerThreads = 2

    /// Started on first use, for the daemon's lifetime (as `NIOThreadPool.singleton` is).
    private static let readers: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: readerThreads)
        pool.start()
        return pool
    }()
}
