import LockwipeBase
import LockwipeCore
import Logging
import Synchronization

/// Keeps the metrics file (`[metrics] textfile`) current: told of every change
/// (`changed()`: the state store was written, the configuration reloaded, the periodic
/// refresh), it takes a reading and writes the file, off the Manager and off the
/// cooperative pool (the write runs on `BlockingPool`).
///
/// Bursts are coalesced: at most one write runs at a time, and the changes made while it
/// runs, however many, make one more write, at least `spacing` after it. So a pass that
/// locks 200 registrations writes the file a few times, not 200 times.
///
/// A failed write never reaches the caller (enforcement goes on) and is logged once per
/// failure streak: the first failure is an error, the next failures are silent until a
/// write succeeds again, which is logged too.
package final class MetricsPublisher: Sendable {
    package typealias Snapshot = @Sendable () async throws -> MetricsSnapshot
    package typealias Write = @Sendable (_ text: String, _ path: String, _ options: MetricsFileOptions) async throws -> Void
    /// Posts work to run later, structured (the daemon's `TimerEvents.post`).
    package typealias Post = @Sendable (@escaping @Sendable () async -> Void) -> Void

    private struct State {
        var path: String?
        var options: MetricsFileOptions
        /// A run is posted or running.
        var scheduled = false
        /// Something changed since the running write took its reading.
        var dirty = false
        /// The last write failed (its failure was logged).
        var failing = false
        var post: Post?
        var snapshot: Snapshot?
    }

    private let state: Mutex<State>
    private let write: Write
    private let logger: Logger
    private let spacing: Duration

    /// The write the daemon uses: `MetricsTextfile.write` on the blocking pool.
    static let fileWrite: Write = { text, path, options in try await BlockingPool.run { try MetricsTextfile.write(text, to: path, options: options) } }

    package init(
        path: String?, options: MetricsFileOptions = MetricsFileOptions(), logger: Logger, spacing: Duration = .seconds(1),
        write: @escaping Write = MetricsPublisher.fileWrite
    ) {
        state = Mutex(State(path: path, options: options))
        self.logger = logger
        self.spacing = spacing
        self.write = write
    }

    /// Where runs are posted (the daemon's `TimerEvents`: structured, cancelled at
    /// shutdown) and where readings come from. Set once, before the first change.
    package func attach(post: @escaping Post, snapshot: @escaping Snapshot) {
        state.withLock {
            $0.post = post
            $0.snapshot = snapshot
        }
    }

    /// A new path and options (a reload); nil stops writing. The old file is left as it
    /// is: its timestamp stops moving, which is what an alert on a stale file is for.
    package func setPath(_ path: String?, options: MetricsFileOptions = MetricsFileOptions()) {
        state.withLock {
            if $0.path != path || $0.options != options { $0.failing = false }
            $0.path = path
            $0.options = options
        }
    }

    var path: String? { state.withLock { $0.path } }

    /// Writes the file now and then at least every `interval()` seconds: what it shows (offline
    /// time) grows without any state change, and its timestamp proves the daemon is alive.
    /// Runs until cancelled.
    package func refreshPeriodically(interval: @Sendable () -> Int) async {
        while !Task.isCancelled {
            changed()
            do { try await Task.sleep(for: .seconds(interval())) } catch { return }
        }
    }

    /// Something the file shows may have changed: write it soon. Cheap, never blocks,
    /// callable from any thread (the state store calls it from its queue).
    package func changed() {
        let post = state.withLock { s -> Post? in
            guard s.path != nil, let post = s.post else { return nil }
            if s.scheduled {
                s.dirty = true
                return nil
            }
            s.scheduled = true
            return post
        }
        post?({ await self.run() })
    }

    private func run() async {
        while true {
            let (path, options, snapshot) = state.withLock { s in
                s.dirty = false
                return (s.path, s.options, s.snapshot)
            }
            if let path, let snapshot {
                do {
                    let text = MetricsExposition.render(try await snapshot(), userLabels: options.userLabels)
                    try await write(text, path, options)
                    succeeded(path)
                } catch {
                    failed(path, error)
                }
            }
            let again = state.withLock { s -> Bool in
                guard s.dirty, s.path != nil, !Task.isCancelled else {
                    s.scheduled = false
                    return false
                }
                return true
            }
            guard again else { return }
            do {
                try await Task.sleep(for: spacing)
            } catch {
                state.withLock { $0.scheduled = false }
                return
            }
        }
    }

    private func succeeded(_ path: String) {
        let recovered = state.withLock { s -> Bool in
            defer { s.failing = false }
            return s.failing && s.path == path
        }
        if recovered { logger.notice("the metrics file is written again", metadata: ["path": .string(path)]) }
    }

    private func failed(_ path: String, _ error: any Error) {
        let first = state.withLock { s -> Bool in
            defer { s.failing = true }
            return !s.failing
        }
        if first {
            logger.error(
                "cannot write the metrics file: \(error); enforcement goes on, and this is logged again only after a write succeeds",
                metadata: ["path": .string(path)])
        }
    }
}
