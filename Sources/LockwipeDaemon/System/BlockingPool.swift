import NIOCore
import NIOPosix

/// The one rule for blocking work: short blocking calls (scrypt, key files, the filesystem
/// calls of a lock or an unlock, waiting for processes to end) run on NIO's one shared
/// thread pool, never on an actor or the cooperative pool; only a running wipe has a
/// thread of its own (`runOnWipeThread`).
enum BlockingPool {
    /// Runs `body` on `NIOThreadPool.singleton` and returns its result. The work is not
    /// abandoned when the calling task is cancelled (a shutdown): a key change or a lock
    /// that has begun runs to its end, and the caller sees its outcome.
    static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await NIOThreadPool.singleton.runIfActive(eventLoop: MultiThreadedEventLoopGroup.singleton.any(), body).get()
    }
}
