import Foundation
import LockwipeCore
import LockwipeProtocol
import Synchronization

/// The live counters of one running wipe: written by the wipe's threads, read by `status`
/// (and `lockwipectl wipe`, which asks `status` while it waits) on the control path.
///
/// The counters are atomics, added to where the work is done (a writer adds each chunk
/// it wrote and each file it finished; the wipe's thread each entry it removed or
/// skipped), so a reader sees the wipe as it is, not as of its last batch of 1,024 files,
/// and no thread of the wipe ever takes a lock for it. The rate and ETA are the readers'
/// business: `info` samples the counters (at most every 200 ms, `RateEstimate`), under
/// a lock only readers take, so `status` and `lockwipectl wipe` read one estimate.
public final class WipeProgress: Sendable {
    public enum Phase: String, Sendable {
        /// Counting what is to be overwritten, so the progress can show an ETA.
        case counting
        case erasing
    }

    struct Plan: Sendable {
        var phase: Phase = .counting
        var filesTotal: Int?
        var bytesTotal: Int64?
        /// When the erasing phase started: the rate is measured from here.
        var erasingSince: ContinuousClock.Instant?
    }

    struct Estimates: Sendable {
        var bytes = RateEstimate()
        var entries = RateEstimate()
    }

    private let filesOverwritten = Atomic<Int>(0)
    private let bytesWritten = Atomic<Int>(0)
    private let entriesRemoved = Atomic<Int>(0)
    private let skipped = Atomic<Int>(0)
    private let plan = Mutex(Plan())
    private let estimates = Mutex(Estimates())
    private let started: ContinuousClock.Instant
    private let cancelled = Atomic<Bool>(false)

    /// Asks the wipe to stop at the next entry (daemon shutdown). What it did stays done,
    /// the intent stays pending, and the next start resumes it.
    public func cancel() { cancelled.store(true, ordering: .relaxed) }
    public var isCancelled: Bool { cancelled.load(ordering: .relaxed) }

    public init(now: ContinuousClock.Instant = .now) { started = now }

    /// A writer wrote `count` bytes of the pattern (a pass's chunk).
    func wrote(bytes count: Int64) { bytesWritten.wrappingAdd(Int(count), ordering: .relaxed) }
    /// A writer wrote every pass of one file (made durable with its batch).
    func fileOverwritten() { filesOverwritten.wrappingAdd(1, ordering: .relaxed) }
    func entryRemoved() { entriesRemoved.wrappingAdd(1, ordering: .relaxed) }
    func entrySkipped() { skipped.wrappingAdd(1, ordering: .relaxed) }

    /// The totals from the census: what the ETA is measured against.
    func setTotals(files: Int, bytes: Int64) {
        plan.withLock {
            $0.filesTotal = files
            $0.bytesTotal = bytes
        }
    }

    func startErasing(now: ContinuousClock.Instant = .now) {
        plan.withLock {
            $0.phase = .erasing
            $0.erasingSince = now
        }
        // The first sample: nothing done when the erasing starts, so the first reader gets
        // a rate already (the average so far).
        estimates.withLock {
            $0.bytes.observe(at: 0, done: 0)
            $0.entries.observe(at: 0, done: 0)
        }
    }

    /// A snapshot for `status`; the rates and the ETA are from the erasing phase only, smoothed.
    public func info(now: ContinuousClock.Instant = .now) -> WipeProgressInfo {
        let p = plan.withLock { $0 }
        let files = filesOverwritten.load(ordering: .relaxed)
        let bytes = Int64(bytesWritten.load(ordering: .relaxed))
        let entries = entriesRemoved.load(ordering: .relaxed)
        var bytesRate = 0.0
        var entriesRate = 0.0
        var eta: Double?
        if let since = p.erasingSince {
            let t = Self.seconds(now - since)
            let e = estimates.withLock { e -> Estimates in
                e.bytes.observe(at: t, done: Double(bytes))
                e.entries.observe(at: t, done: Double(entries))
                return e
            }
            bytesRate = e.bytes.rate ?? 0
            entriesRate = e.entries.rate ?? 0
            if let total = p.bytesTotal, total > 0 { eta = e.bytes.eta(left: Double(max(0, total - bytes))) }
        }
        return WipeProgressInfo(
            phase: p.phase.rawValue, filesOverwritten: files, bytesOverwritten: bytes, entriesRemoved: entries,
            skipped: skipped.load(ordering: .relaxed), filesTotal: p.filesTotal, bytesTotal: p.bytesTotal,
            elapsedSeconds: Self.seconds(now - started), bytesPerSecond: bytesRate, entriesPerSecond: entriesRate, etaSeconds: eta)
    }

    static func seconds(_ d: Duration) -> Double {
        Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }
}
