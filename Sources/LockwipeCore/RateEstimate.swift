#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The rate of long work (bytes a wipe overwrote, entries it removed) and the time left,
/// smoothed so that the ETA does not climb while work goes on at a steady pace.
///
/// The rate is an exponential moving average of the rate between samples, weighted by
/// time: a sample `dt` seconds after the last moves the estimate by `1 - e^(-dt/τ)` of
/// the way to the rate seen in between. So a burst (a batch made durable at once) or a
/// pause (the batch's flush) moves it only by its share of `τ`, and how often someone
/// asks does not change the estimate; samples closer than `minimumInterval` are not taken.
/// The smoothing starts from the average over the first `warmUp` seconds; until then the
/// rate is that average so far, and there is no ETA.
///
/// Why the ETA cannot climb fast: the work left never grows, and in `dt` the rate falls
/// at most to `e^(-dt/τ)` of itself (when nothing at all was done), so an ETA `dt`
/// later is at most `e^(dt/τ)` times the one before (`maximumRise`). An average since the
/// start (what `status` showed before) follows a slowing disk for the whole wipe: the ETA
/// of issue 27 climbed from 4 s to 23 s.
///
/// Pure arithmetic: the caller passes its clock's reading in seconds.
public struct RateEstimate: Sendable, Equatable {
    /// τ, in seconds.
    public static let defaultTimeConstant = 5.0
    public static let defaultWarmUp = 1.0
    public static let defaultMinimumInterval = 0.2

    public let timeConstant: Double
    public let warmUp: Double
    public let minimumInterval: Double

    struct Sample: Sendable, Equatable {
        var time: Double
        var done: Double
    }

    private var first: Sample?
    private var last: Sample?
    private var smoothed: Double?
    private var provisional: Double?
    /// Units per second: the average so far during the warm-up, smoothed after it; nil
    /// before two samples.
    public var rate: Double? { smoothed ?? provisional }

    public init(
        timeConstant: Double = RateEstimate.defaultTimeConstant, warmUp: Double = RateEstimate.defaultWarmUp,
        minimumInterval: Double = RateEstimate.defaultMinimumInterval
    ) {
        self.timeConstant = timeConstant
        self.warmUp = warmUp
        self.minimumInterval = minimumInterval
    }

    /// Takes a sample: `done` units at `time` seconds (any origin, never going back).
    public mutating func observe(at time: Double, done: Double) {
        guard let start = first else {
            first = Sample(time: time, done: done)
            last = Sample(time: time, done: done)
            return
        }
        guard let current = smoothed else {
            // Warming up: the average since the first sample, smoothed from once it spans `warmUp`.
            guard time > start.time else { return }
            let average = max(0, done - start.done) / (time - start.time)
            if time - start.time >= warmUp {
                smoothed = average
                last = Sample(time: time, done: done)
            } else {
                provisional = average
            }
            return
        }
        guard let previous = last, time - previous.time >= minimumInterval else { return }
        let dt = time - previous.time
        let seen = max(0, done - previous.done) / dt
        smoothed = current + (1 - exp(-dt / timeConstant)) * (seen - current)
        last = Sample(time: time, done: done)
    }

    /// Seconds until `left` more units are done at the smoothed rate: nil during the warm-up,
    /// or while nothing is being done; 0 when nothing is left.
    public func eta(left: Double) -> Double? {
        if left <= 0 { return 0 }
        guard let rate = smoothed, rate > 0 else { return nil }
        return left / rate
    }

    /// The most an ETA may grow in `seconds` when the work left does not grow: `e^(seconds/τ)`.
    public func maximumRise(over seconds: Double) -> Double { exp(max(0, seconds) / timeConstant) }
}
