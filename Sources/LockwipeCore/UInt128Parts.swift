/// A 128-bit unsigned number as two words (UInt128 needs macOS 15): what the codes' base-31
/// digits and 11 content bytes are converted through.
struct UInt128Parts: Equatable {
    var hi: UInt64
    var lo: UInt64

    init(_ lo: UInt64) {
        self.hi = 0
        self.lo = lo
    }

    init(hi: UInt64, lo: UInt64) {
        self.hi = hi
        self.lo = lo
    }

    /// Big-endian bytes (at most 16).
    init(bytes: [UInt8]) {
        var v = UInt128Parts(0)
        for b in bytes { v = (v << 8) | UInt64(b) }
        self = v
    }

    /// Base-31 digits, most significant first.
    init(digits: [Int]) {
        var v = UInt128Parts(0)
        for d in digits { v = v.times(31).plus(UInt64(d)) }
        self = v
    }

    static func << (v: UInt128Parts, n: UInt64) -> UInt128Parts {
        guard n > 0 else { return v }
        if n >= 64 { return UInt128Parts(hi: v.lo << (n - 64), lo: 0) }
        return UInt128Parts(hi: v.hi << n | v.lo >> (64 - n), lo: v.lo << n)
    }

    static func >> (v: UInt128Parts, n: UInt64) -> UInt128Parts {
        guard n > 0 else { return v }
        if n >= 64 { return UInt128Parts(hi: 0, lo: v.hi >> (n - 64)) }
        return UInt128Parts(hi: v.hi >> n, lo: v.lo >> n | v.hi << (64 - n))
    }

    static func | (v: UInt128Parts, w: UInt64) -> UInt128Parts {
        UInt128Parts(hi: v.hi, lo: v.lo | w)
    }

    func plus(_ w: UInt64) -> UInt128Parts {
        let (lo, carry) = lo.addingReportingOverflow(w)
        return UInt128Parts(hi: hi &+ (carry ? 1 : 0), lo: lo)
    }

    func times(_ m: UInt64) -> UInt128Parts {
        let (high, low) = lo.multipliedFullWidth(by: m)
        return UInt128Parts(hi: hi &* m &+ high, lo: low)
    }

    /// (quotient, remainder) of the division by a small divisor.
    func divided(by d: UInt64) -> (UInt128Parts, UInt64) {
        let qh = hi / d
        let rh = hi % d
        let (ql, r) = d.dividingFullWidth((high: rh, low: lo))
        return (UInt128Parts(hi: qh, lo: ql), r)
    }

    /// `count` base-31 digits, most significant first (the number must fit).
    func digits(_ count: Int) -> [Int] {
        var v = self
        var out = [Int](repeating: 0, count: count)
        for i in stride(from: count - 1, through: 0, by: -1) {
            let (q, r) = v.divided(by: 31)
            out[i] = Int(r)
            v = q
        }
        return out
    }

    /// The low `count` bytes, big-endian.
    func bytes(_ count: Int) -> [UInt8] {
        (0..<count).reversed().map { i in
            let shift = UInt64(i * 8)
            return UInt8(truncatingIfNeeded: (self >> shift).lo)
        }
    }
}
