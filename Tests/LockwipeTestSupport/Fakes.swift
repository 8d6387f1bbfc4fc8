import LockwipeCheckIn
import LockwipeCore
import LockwipeDaemon
import LockwipeSystemd
import NIOCore
import Synchronization

/// A clock the test moves by hand.
public final class ManualClock: ClockSource, Sendable {
    private let reading: Mutex<ClockReading>
    public init(_ start: ClockReading) { reading = Mutex(start) }
    public func now() -> ClockReading { reading.withLock { $0 } }
    public func advance(seconds: Int64) {
        reading.withLock {
            $0.wall += seconds
            $0.boot += seconds
        }
    }
}

/// A policy server that answers what the test says, and counts what it was asked.
public final class ScriptedFetcher: SettingsFetching {
    private struct State {
        var answer: CheckInOutcome = .failure("unset")
        var calls: [String] = []
        var tokens: [String?] = []
        var connectionsSent: [String?] = []
        var connectionAnswer: SAPConnectionAnswer = .refused(.failure("unset"))
        var connectionRequests = 0
        var deleted: [String] = []
    }
    private let state = Mutex<State>(State())
    public init() {}
    public func answer(_ outcome: CheckInOutcome) { state.withLock { $0.answer = outcome } }
    /// What the SAP Connections request answers.
    public func answerConnection(_ answer: SAPConnectionAnswer) { state.withLock { $0.connectionAnswer = answer } }
    public var calls: [String] { state.withLock { $0.calls } }
    public var tokens: [String?] { state.withLock { $0.tokens } }
    /// The `X-SMP-APPCID` each check-in was made with.
    public var connectionsSent: [String?] { state.withLock { $0.connectionsSent } }
    public var connectionRequests: Int { state.withLock { $0.connectionRequests } }
    public var deleted: [String] { state.withLock { $0.deleted } }
    public func fetch(
        user: String, credentials: ServerCredentials?, connection: String?, server: ServerConfiguration, deadline: NIODeadline?
    ) async -> CheckInOutcome {
        state.withLock {
            $0.calls.append(user)
            $0.tokens.append(credentials?.token)
            $0.connectionsSent.append(connection)
            return $0.answer
        }
    }
    public func createConnection(user: String, credentials: ServerCredentials?, server: ServerConfiguration, deadline: NIODeadline?) async -> SAPConnectionAnswer {
        state.withLock {
            $0.connectionRequests += 1
            return $0.connectionAnswer
        }
    }
    public func deleteConnection(_ id: String, user: String, credentials: ServerCredentials?, server: ServerConfiguration) async -> String? {
        state.withLock { $0.deleted.append(id) }
        return nil
    }
    public func shutdown() async {}
}

/// A server whose answer is already on its way: it answers only when released, and
/// cancelling the request does not stop the answer (what a race with unregister can give).
public final class HeldFetcher: SettingsFetching {
    private let state = Mutex<(answer: CheckInOutcome, calls: Int, released: Bool, waiting: [CheckedContinuation<Void, Never>])>(
        (.failure("unset"), 0, false, []))
    public init(answer: CheckInOutcome) { state.withLock { $0.answer = answer } }
    public var calls: Int { state.withLock { $0.calls } }
    public func fetch(
        user: String, credentials: ServerCredentials?, connection: String?, server: ServerConfiguration, deadline: NIODeadline?
    ) async -> CheckInOutcome {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let go = state.withLock { s -> Bool in
                s.calls += 1
                if s.released { return true }
                s.waiting.append(c)
                return false
            }
            if go { c.resume() }
        }
        return state.withLock { $0.answer }
    }
    public func release() {
        let waiting = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.released = true
            defer { s.waiting = [] }
            return s.waiting
        }
        for c in waiting { c.resume() }
    }
    public func shutdown() async {}
}

/// logind as the test says: sessions per uid, set by hand.
public final class FakeSessions: SessionWatching {
    private let state = Mutex<(sessions: [UInt32: Int], started: Bool, stopped: Bool)>(([:], false, false))
    public init() {}
    public func set(uid: UInt32, sessions: Int) { state.withLock { $0.sessions[uid] = sessions } }
    public var started: Bool { state.withLock { $0.started } }
    public var stopped: Bool { state.withLock { $0.stopped } }
    public func loginSessions(uid: UInt32) -> Int { state.withLock { $0.sessions[uid] ?? 0 } }
    public func state(uid: UInt32) -> String { loginSessions(uid: uid) > 0 ? "online" : "offline" }
    public func start(onChange: @escaping @Sendable () -> Void) throws { state.withLock { $0.started = true } }
    public func stop() { state.withLock { $0.stopped = true } }
}

/// Monotonic time the test moves by hand; timers run when it passes their deadline.
public final class ManualDeadlines: DeadlineScheduling {
    final class Entry: ScheduledDeadline {
        let at: Duration
        let action: @Sendable () async -> Void
        let cancelled = Mutex(false)
        init(at: Duration, action: @escaping @Sendable () async -> Void) {
            self.at = at
            self.action = action
        }
        func cancel() { cancelled.withLock { $0 = true } }
    }

    private let state = Mutex<(now: Duration, entries: [Entry])>((.seconds(1000), []))
    public init() {}
    public func now() -> Duration { state.withLock { $0.now } }
    public func schedule(after delay: Duration, _ action: @escaping @Sendable () async -> Void) -> any ScheduledDeadline {
        state.withLock {
            let entry = Entry(at: $0.now + delay, action: action)
            $0.entries.append(entry)
            return entry
        }
    }

    /// Pending (not cancelled) timers.
    public var pending: Int { state.withLock { $0.entries.filter { !$0.cancelled.withLock { $0 } }.count } }

    /// Moves time on by `seconds`, running every timer that comes due, in deadline order.
    public func advance(seconds: Int64) async {
        let target = now() + .seconds(seconds)
        while true {
            let next: Entry? = state.withLock { s in
                s.entries.removeAll { $0.cancelled.withLock { $0 } }
                guard let e = s.entries.filter({ $0.at <= target }).min(by: { $0.at < $1.at }) else { return nil }
                s.entries.removeAll { $0 === e }
                s.now = max(s.now, e.at)
                return e
            }
            guard let next else { break }
            await next.action()
        }
        state.withLock { $0.now = target }
    }
}

/// Accounts as the test says: registration needs no real system user.
public struct TableAccounts: AccountLookup {
    public var accounts: [String: Account]
    public init(_ accounts: [Account]) { self.accounts = Dictionary(uniqueKeysWithValues: accounts.map { ($0.name, $0) }) }
    public func account(named name: String) -> Account? { accounts[name] }
}
