import Foundation
import LockwipeProtocol
import Synchronization

/// The live counters of one running wipe: written by the wipe thread, read by `status`
/// on the control path. A lock around plain counters; one update per file is far below
/// the cost of the file's own system calls.
public final class WipeProgress: Sendable {
    public enum Phase: String, Sendable {
        /// Counting what is to be overwritten, so the progress can show an ETA.
        case counting
        case erasing
    }

    struct Counters: Sendable {
        var phase: Phase = .counting
        var filesOverwritten = 0
        var bytesWritten: Int64 = 0
        var entriesRemoved = 0
        var skipped = 0
        var filesTotal: Int?
        var bytesTotal: Int64?
        /// When the erasing phase started: the rate is measured from here.
        var erasingSince: ContinuousClock.Instant?
    }

    private let counters = Mutex(Counters())
    private let started: ContinuousClock.Instant
    private let cancelled = Atomic<Bool>(false)

    /// Asks the wipe to stop at the next entry (daemon shutdown). What it did stays done,
    /// the intent stays pending, and the next start resumes it.
    public func cancel() { cancelled.store(true, ordering: .relaxed) }
    public var isCancelled: Bool { cancelled.load(ordering: .relaxed) }

    public init(now: ContinuousClock.Instant = .now) { started = now }

    func update(_ body: (inout Counters) -> Void) { counters.withLock { body(&$0) } }

    /// The totals from the census: what the ETA is measured against.
    func setTotals(files: Int, bytes: Int64) {
        update {
            $0.filesTotal = files
            $0.bytesTotal = bytes
        }
    }

    func startErasing(now: ContinuousClock.Instant = .now) {
        update {
            $0.phase = .erasing
            $0.erasingSince = now
        }
    }

    /// A snapshot for `status`; the rate and ETA are from the erasing phase only.
    public func info(now: ContinuousClock.Instant = .now) -> WipeProgressInfo {
        let c = counters.withLock { $0 }
        let elapsed = Self.seconds(now - started)
        let erasing = c.erasingSince.map { Self.seconds(now - $0) } ?? 0
        let bytesRate = erasing > 0 ? Double(c.bytesWritten) / erasing : 0
        let entriesRate = erasing > 0 ? Double(c.entriesRemoved) / erasing : 0
        var eta: Double?
        if let total = c.bytesTotal, total > 0, bytesRate > 0 {
            eta = max(0, Double(total - c.bytesWritten) / bytesRate)
        }
        return WipeProgressInfo(
            phase: c.phase.rawValue, filesOverwritten: c.filesOverwritten, bytesOverwritten: c.bytesWritten,
            entriesRemoved: c.entriesRemoved, skipped: c.skipped, filesTotal: c.filesTotal, bytesTotal: c.bytesTotal,
            elapsedSeconds: elapsed, bytesPerSecond: bytesRate, entriesPerSecond: entriesRate, etaSeconds: eta)
    }

    static func seconds(_ d: Duration) -> Double {
        Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }
}
