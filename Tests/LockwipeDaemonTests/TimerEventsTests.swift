import Synchronization
import Testing

@testable import LockwipeDaemon

/// Timer work runs as child tasks of `run()`: none before it starts, all of it before it
/// returns, and one long piece does not hold back another.
struct TimerEventsTests {
    @Test func workWaitsForRunAndRunReturnsOnlyWhenAllWorkIsDone() async {
        let events = TimerEvents()
        let done = Mutex<[String]>([])
        events.post { done.withLock { $0.append("posted before run") } }
        #expect(done.withLock { $0 }.isEmpty)
        let (released, release) = AsyncStream.makeStream(of: Void.self)
        events.post {
            // A long piece: waits until the short one posted after it has run.
            for await _ in released { break }
            done.withLock { $0.append("long") }
        }
        let runner = Task { await events.run() }
        events.post {
            done.withLock { $0.append("short") }
            release.yield()
        }
        events.finish()
        await runner.value
        #expect(
            done.withLock { $0 } == ["posted before run", "short", "long"]
                || done.withLock { $0 } == ["short", "posted before run", "long"])
    }
}
