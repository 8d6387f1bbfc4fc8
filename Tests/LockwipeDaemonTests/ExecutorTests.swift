import LockwipeBase
import NIOCore
import NIOPosix
import Synchronization
import Testing

/// Where the control connections' tasks run (`EventLoopTaskExecutor`), how blocking work
/// comes back from the pool (`BlockingPool.run`), and the daemon's own threads' names
/// (`NamedThread`).
@Suite struct ExecutorTests {
    actor Counter {
        var value = 0
        /// Whether the actor ran on `loop`'s thread, and the count after this call.
        func increment(on loop: any EventLoop) -> (onLoop: Bool, value: Int) {
            value += 1
            return (loop.inEventLoop, value)
        }
    }

    @Test func aTaskPreferringTheLoopRunsThereAndSoDoTheActorsItCalls() async throws {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let counter = Counter()
        let seen = try await withTaskExecutorPreference(EventLoopTaskExecutor(loop)) {
            var seen: [Bool] = [loop.inEventLoop]
            let (actorOnLoop, _) = await counter.increment(on: loop)
            seen.append(actorOnLoop)
            // Back from the pool's thread, on the loop again.
            let poolOnLoop = try await BlockingPool.run { loop.inEventLoop }
            seen.append(!poolOnLoop)
            seen.append(loop.inEventLoop)
            // A child task inherits the preference.
            await withDiscardingTaskGroup { children in
                children.addTask { _ = await counter.increment(on: loop) }
            }
            seen.append(loop.inEventLoop)
            return seen
        }
        #expect(seen == [true, true, true, true, true], "task, actor, off the loop in the pool, back, after a child task")
        #expect(await counter.value == 2)
        // Without the preference, the same actor runs on the cooperative pool.
        #expect(await counter.increment(on: loop).onLoop == false)
    }

    @Test func blockingWorkIsNotAbandonedWhenItsCallerIsCancelled() async throws {
        final class Flag: Sendable { let ran = Atomic<Bool>(false) }
        let flag = Flag()
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await BlockingPool.run {
                flag.ran.store(true, ordering: .relaxed)
                return 42
            }
        }
        #expect(try await task.value == 42, "a lock that has begun runs to its end, and the caller sees its outcome")
        let ran = flag.ran.load(ordering: .relaxed)
        #expect(ran)
    }

    @Test func aNamedThreadCarriesItsNameInTheKernel() async throws {
        // What top -H, ps -L and perf show: each thread's comm, not Foundation's property
        // (which reached the kernel only when the starting thread won a race). Eight at
        // once, as a wipe starts its writers.
        let names = await withTaskGroup(of: String?.self) { group in
            for i in 0..<8 {
                group.addTask {
                    await withCheckedContinuation { continuation in
                        NamedThread.start("lockwiped-t\(i)", stackSize: 1 << 20) {
                            continuation.resume(returning: ProcFile.read("/proc/thread-self/comm"))
                        }
                    }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(Set(names) == Set((0..<8).map { "lockwiped-t\($0)\n" }))
    }
}
