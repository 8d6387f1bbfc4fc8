import LockwipeCore
import Testing

@Suite struct RateEstimateTests {
    /// Work seen over time: `done(t)` sampled every `step` seconds for `duration` seconds.
    struct Scenario: CustomTestStringConvertible, Sendable {
        var name: String
        var step: Double
        var duration: Double
        var done: @Sendable (Double) -> Double
        /// The smoothed rate expected at the end, and how far it may be from it.
        var rate: Double
        var tolerance: Double
        var testDescription: String { name }

        func run(total: Double) -> (estimate: RateEstimate, etas: [(time: Double, eta: Double)]) {
            var estimate = RateEstimate()
            var etas: [(Double, Double)] = []
            var t = 0.0
            while t <= duration + 1e-9 {
                estimate.observe(at: t, done: done(t))
                if let eta = estimate.eta(left: total - done(t)) { etas.append((t, eta)) }
                t += step
            }
            return (estimate, etas)
        }
    }

    static let scenarios: [Scenario] = [
        Scenario(name: "steady 100/s, asked every 250 ms", step: 0.25, duration: 20, done: { 100 * $0 }, rate: 100, tolerance: 1e-9),
        Scenario(name: "steady 100/s, asked every 2 s", step: 2, duration: 20, done: { 100 * $0 }, rate: 100, tolerance: 1e-9),
        // Asked more often than every 200 ms: the extra samples are not taken.
        Scenario(name: "steady 100/s, asked every 50 ms", step: 0.05, duration: 20, done: { 100 * $0 }, rate: 100, tolerance: 1e-6),
        // A batch of 100 made durable at once every second: the mean rate, give or take
        // a second's share of τ.
        Scenario(
            name: "bursts of 100 every second", step: 0.25, duration: 30, done: { 100 * ($0 + 1e-9).rounded(.down) }, rate: 100,
            tolerance: 100 * (1 / RateEstimate.defaultTimeConstant)),
        // Fast at first (the page cache), then the disk's pace: the estimate follows the
        // disk within a few τ, where an average since the start would still be far above.
        Scenario(
            name: "fast 2 s, then slow", step: 0.25, duration: 30, done: { $0 < 2 ? 1000 * $0 : 2000 + 100 * ($0 - 2) }, rate: 100,
            tolerance: 5),
        Scenario(name: "stalled after 5 s", step: 0.25, duration: 10, done: { 100 * min($0, 5) }, rate: 100 * 0.3679, tolerance: 1),
    ]

    @Test(arguments: scenarios) func followsTheRate(_ scenario: Scenario) throws {
        let (estimate, _) = scenario.run(total: 1e9)
        let rate = try #require(estimate.rate)
        #expect(abs(rate - scenario.rate) <= scenario.tolerance, "rate \(rate)")
    }

    /// Whatever the work does, an ETA never rises faster than the smoothing allows:
    /// `e^(dt/τ)` of the one before, for `dt` between the two.
    @Test(arguments: scenarios) func theETANeverRisesFasterThanTheSmoothingAllows(_ scenario: Scenario) {
        let total = scenario.done(scenario.duration) * 1.5
        let (estimate, etas) = scenario.run(total: total)
        #expect(!etas.isEmpty)
        for (a, b) in zip(etas, etas.dropFirst()) {
            #expect(b.eta <= a.eta * estimate.maximumRise(over: b.time - a.time) * (1 + 1e-12), "\(a) → \(b)")
        }
    }

    /// At a steady pace the ETA counts down with the clock.
    @Test func atASteadyRateTheETACountsDown() {
        let (_, etas) = Self.scenarios[0].run(total: 3000)
        #expect(etas.first?.time == 1)  // after the warm-up
        for (a, b) in zip(etas, etas.dropFirst()) { #expect(abs((a.eta - b.eta) - (b.time - a.time)) < 1e-9, "\(a) → \(b)") }
    }

    /// With a batch made durable every second the ETA may rise between batches, but by less
    /// than a second's share of τ, and it falls over every second.
    @Test func withBurstsTheETAStillFallsEverySecond() {
        let (_, etas) = Self.scenarios[3].run(total: 5000)
        let whole = etas.filter { ($0.time * 4).rounded().truncatingRemainder(dividingBy: 4) == 0 }
        for (a, b) in zip(whole, whole.dropFirst()) { #expect(b.eta < a.eta, "\(a) → \(b)") }
    }

    struct Case: Sendable, CustomTestStringConvertible {
        var samples: [(time: Double, done: Double)]
        var rate: Double?
        var left: Double
        var eta: Double?
        var testDescription: String { "\(samples) left \(left)" }
    }

    @Test(arguments: [
        Case(samples: [], rate: nil, left: 10, eta: nil),
        Case(samples: [(0, 0)], rate: nil, left: 10, eta: nil),
        Case(samples: [(0, 0), (0.5, 50)], rate: 100, left: 10, eta: nil),  // warming up: the average so far, no ETA
        Case(samples: [(0, 0), (1, 100)], rate: 100, left: 500, eta: 5),  // the warm-up's average
        Case(samples: [(0, 0), (1, 0)], rate: 0, left: 500, eta: nil),  // nothing done: no ETA
        Case(samples: [(0, 0), (1, 100)], rate: 100, left: 0, eta: 0),
        // 5 s without progress: one τ, the rate falls to 1/e.
        Case(samples: [(0, 0), (1, 100), (6, 100)], rate: 100 * 0.36787944117144233, left: 100, eta: 2.718281828459045),
        // A sample 100 ms after the last is not taken.
        Case(samples: [(0, 0), (1, 100), (1.1, 1000)], rate: 100, left: 100, eta: 1),
    ])
    func table(_ c: Case) {
        var estimate = RateEstimate()
        for s in c.samples { estimate.observe(at: s.time, done: s.done) }
        if let rate = c.rate {
            #expect(abs((estimate.rate ?? -1) - rate) < 1e-9, "rate \(String(describing: estimate.rate))")
        } else {
            #expect(estimate.rate == nil)
        }
        let eta = estimate.eta(left: c.left)
        if let expected = c.eta {
            #expect(abs((eta ?? -1) - expected) < 1e-9, "eta \(String(describing: eta))")
        } else {
            #expect(eta == nil)
        }
    }
}
