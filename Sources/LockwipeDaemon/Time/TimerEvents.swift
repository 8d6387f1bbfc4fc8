/// Where timers and watchers hand their work to the daemon.
///
/// A timer fires on an event loop or on the wake-up thread, and a logind change arrives
/// on the watcher's thread; none of them starts a task of its own. They post the work
/// here, and `run()`, which the daemon's service runs for as long as the daemon runs,
/// carries out each piece as a child task: every such task is structured, cancelled at
/// shutdown and awaited before the daemon stops. Pieces run concurrently (a long wipe
/// started by one does not hold back a logout lock), each taking the Manager's turns as
/// any request does. Work posted before `run()` starts waits for it.
public final class TimerEvents: Sendable {
    public typealias Work = @Sendable () async -> Void

    private let stream: AsyncStream<Work>
    private let continuation: AsyncStream<Work>.Continuation

    public init() {
        (stream, continuation) = AsyncStream.makeStream(of: Work.self)
    }

    public func post(_ work: @escaping Work) {
        continuation.yield(work)
    }

    /// Runs posted work until `finish()` or cancellation; returns when all of it is done.
    public func run() async {
        await withDiscardingTaskGroup { group in
            for await work in stream {
                group.addTask { await work() }
            }
        }
    }

    /// No more work is accepted; `run()` returns once what runs is done.
    public func finish() {
        continuation.finish()
    }
}
