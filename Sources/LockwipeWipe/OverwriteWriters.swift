import Foundation
import LockwipeBase

/// A few threads that overwrite files handed over by the walk, several at a time.
///
/// With `O_DIRECT` (`PatternWriter`) each write waits for the device; one file at a
/// time, 1 GiB in files of 100 KiB took longer than through the page cache. Several
/// files in flight keep the device's queue full: a bare program with 8 threads wrote
/// the same files in 1.2-1.4x the time of one `dd oflag=direct` (docs/benchmarks.md).
///
/// The walk keeps opening and checking every file; a writer only writes through the
/// descriptor it is given. The descriptors stay the batch's: before a batch is made
/// durable, or closed, `wait` returns the outcomes of its files, so no writer ever uses a
/// descriptor after it was closed. The batch thread waits, not the walk: the walk goes on
/// handing over the next batch's files, and the writers are never left without work at
/// a batch's end.
final class OverwriteWriters: @unchecked Sendable {
    typealias Outcome = Result<Int64, PatternWriter.WriteError>

    struct Job: Sendable {
        /// Consecutive from 0 over the wipe: a batch's files are a range of them.
        var id: Int
        var fd: Int32
        var size: Int64
        var granule: Int64
    }

    private let condition = NSCondition()
    private var queue: [Job] = []
    private var next = 0
    private var outcomes: [Int: Outcome] = [:]
    private var stopping = false

    /// Starts `count` threads, each with its own `PatternWriter` (its own keystream key).
    init(count: Int, pattern: WipeOptions.Pattern, passes: Int, progress: WipeProgress) {
        for _ in 0..<max(1, count) {
            NamedThread.start("lockwiped-write", stackSize: 1 << 20) { [self] in
                run(PatternWriter(pattern: pattern, progress: progress), passes: passes, progress: progress)
            }
        }
    }

    /// Queues one file and returns at once.
    func submit(_ job: Job) {
        condition.lock()
        if next > 1024 {
            queue.removeFirst(next)
            next = 0
        }
        queue.append(job)
        condition.broadcast()
        condition.unlock()
    }

    /// Waits until the files `ids` are written (or failed) and returns their outcomes,
    /// forgetting them.
    func wait(for ids: Range<Int>) -> [Int: Outcome] {
        condition.lock()
        defer { condition.unlock() }
        // An outcome stays until collected here: each id is looked at until it is there,
        // and never again (a batch of 1,024 files, woken at every file, is not rescanned).
        var first = ids.lowerBound
        while first < ids.upperBound {
            if outcomes[first] != nil { first += 1 } else { condition.wait() }
        }
        var result: [Int: Outcome] = [:]
        for id in ids { result[id] = outcomes.removeValue(forKey: id) }
        return result
    }

    /// Lets the threads end once the queue is empty.
    func stop() {
        condition.lock()
        stopping = true
        condition.broadcast()
        condition.unlock()
    }

    private func run(_ writer: PatternWriter, passes: Int, progress: WipeProgress) {
        condition.lock()
        while true {
            while next == queue.count && !stopping { condition.wait() }
            if next == queue.count { break }
            let job = queue[next]
            next += 1
            condition.unlock()
            let outcome = writer.overwrite(job.fd, size: job.size, granule: job.granule, passes: passes)
            // Counted as it is written, not when its batch is accounted: the progress moves by
            // file, not by 1,024 (the report counts only what was made durable).
            if case .success = outcome { progress.fileOverwritten() }
            condition.lock()
            outcomes[job.id] = outcome
            condition.broadcast()
        }
        condition.unlock()
    }
}
