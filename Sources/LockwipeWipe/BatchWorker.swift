import Foundation
import LockwipeBase

/// Where the worker leaves a batch's outcomes; read on the wipe's thread only after
/// `BatchWorker.wait`, whose lock orders the two.
final class OutcomeBox: @unchecked Sendable {
    var outcomes: [WipeRun.Outcome] = []
}

/// A thread that runs a wipe's batches one at a time, in order, beside the walk.
final class BatchWorker: @unchecked Sendable {
    private let condition = NSCondition()
    private var job: (@Sendable () -> Void)?
    private var stopping = false

    init() {
        NamedThread.start("lockwiped-batch", stackSize: 1 << 20) { [self] in run() }
    }

    /// Waits until the job before is done, then hands this one over and returns.
    func submit(_ work: @escaping @Sendable () -> Void) {
        condition.lock()
        while job != nil { condition.wait() }
        job = work
        condition.broadcast()
        condition.unlock()
    }

    /// Returns once no job is running or waiting.
    func wait() {
        condition.lock()
        while job != nil { condition.wait() }
        condition.unlock()
    }

    /// Lets the thread end once the last job is done.
    func stop() {
        condition.lock()
        stopping = true
        condition.broadcast()
        condition.unlock()
    }

    private func run() {
        condition.lock()
        while true {
            while job == nil && !stopping { condition.wait() }
            guard let work = job else { break }
            condition.unlock()
            work()
            condition.lock()
            job = nil
            condition.broadcast()
        }
        condition.unlock()
    }
}
