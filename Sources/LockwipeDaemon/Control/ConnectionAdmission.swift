/// Who may hold how many control connections. Each user but root at most a quarter of
/// `max_connections`, so one user cannot take them all; all of them together at most
/// `max_connections`; root as many again of its own, so an operator always gets through.
/// A peer whose credentials could not be read counts as one more non-root user.
struct ConnectionAdmission: Sendable {
    enum Refusal: Equatable, CustomStringConvertible {
        case perUser(Int), nonRootTotal(Int), root(Int)
        var description: String {
            switch self {
            case .perUser(let n): return "this user already has \(n)"
            case .nonRootTotal(let n): return "users other than root already have \(n)"
            case .root(let n): return "root already has \(n)"
            }
        }
    }

    let maxConnections: Int
    var perUser: Int { max(1, maxConnections / 4) }
    private(set) var byUser: [UInt32?: Int] = [:]
    private(set) var nonRoot = 0

    init(maxConnections: Int) { self.maxConnections = maxConnections }

    /// Counts the connection in and returns nil, or returns why it is refused.
    mutating func admit(uid: UInt32?) -> Refusal? {
        let mine = byUser[uid, default: 0]
        if uid == 0 {
            if mine >= maxConnections { return .root(mine) }
        } else {
            if mine >= perUser { return .perUser(mine) }
            if nonRoot >= maxConnections { return .nonRootTotal(nonRoot) }
            nonRoot += 1
        }
        byUser[uid] = mine + 1
        return nil
    }

    mutating func release(uid: UInt32?) {
        guard let mine = byUser[uid], mine > 0 else { return }
        byUser[uid] = mine == 1 ? nil : mine - 1
        if uid != 0 { nonRoot -= 1 }
    }
}

/// A flood of refused connections is logged once per 10 s, with how many went unlogged.
struct RefusalLogThrottle: Sendable {
    private var last: ContinuousClock.Instant?
    private var unlogged = 0

    /// The number refused without a log line since the last one, when this one is to be logged.
    mutating func shouldLog(now: ContinuousClock.Instant) -> Int? {
        if let last, now - last < .seconds(10) {
            unlogged += 1
            return nil
        }
        defer { unlogged = 0 }
        last = now
        return unlogged
    }
}
