import NIOCore

/// An event loop as a task executor (SE-0417): a task that prefers it runs its jobs on the
/// loop's thread, and so do the default actors it calls (the Manager) while it runs.
///
/// What it is for: a control connection's request is read on its event loop and its reply
/// written there. Answered on the cooperative pool, a request costs two thread wake-ups
/// (the loop wakes a pool thread, which wakes the loop again to write), and on a virtual
/// machine whose other CPU sleeps each can take a quarter of a millisecond. Answered on the
/// loop, it takes none: the loop reads, runs the task, and writes.
///
/// What runs on it must not block, as on any thread the daemon does not own for blocking
/// work: such work goes to `BlockingPool`, as it does from the cooperative pool.
///
/// swift-nio 2.101 makes an event loop a `SerialExecutor` (for actors), not a
/// `TaskExecutor`: this is the few lines between the two.
package final class EventLoopTaskExecutor: TaskExecutor {
    package let loop: any EventLoop

    package init(_ loop: any EventLoop) { self.loop = loop }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        // From the loop's own thread this queues without waking anything; from another
        // thread it wakes the loop, as resuming a task on the cooperative pool would wake
        // one of its threads.
        loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
