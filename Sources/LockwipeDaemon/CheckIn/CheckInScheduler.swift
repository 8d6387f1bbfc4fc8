import LockwipeCore
import NIOCore

/// When each registration checks in next, the check-in requests waiting for the server, and
/// the one timer that wakes for the soonest planned check-in. It owns every task it starts:
/// the timer (cancelled when replaced and at `stop`) and the scheduled check-ins (tracked
/// until they end). The Manager owns one and uses it only in its own isolation; what to do
/// when a check-in is due (`onDue`) and the clock (`now`, `sleep`) are given, so tests run
/// it with fakes.
final class CheckInScheduler {
    /// Returns at `deadline` (monotonic), or throws when the task is cancelled.
    typealias Sleep = @Sendable (NIODeadline) async throws -> Void

    /// A registration whose check-in is due: its id, and the user name the check-in is made for.
    struct Due: Equatable {
        let id: RegistrationID
        let user: String
    }

    /// When each registration (by id) checks in next (monotonic), with its user name;
    /// absent while one is in flight.
    private var next: [RegistrationID: (user: String, at: NIODeadline)] = [:]
    /// Check-ins of each registration (by id) now waiting for the server.
    private var inFlight: [RegistrationID: Int] = [:]
    /// The requests of each registration (by id) waiting for the server, to cancel at unregister.
    private var requests: [RegistrationID: [UInt64: @Sendable () -> Void]] = [:]
    /// Scheduled check-ins started by the timer and not yet ended.
    private var runs: [UInt64: Task<Void, Never>] = [:]
    private var nextToken: UInt64 = 0
    private var timer: Task<Void, Never>?
    private var stopped = false
    /// Check-ins are planned from the daemon's start-up pass on (before it, and in tests
    /// that do not run it, only explicit check-ins happen).
    private(set) var isPlanning = false
    private let now: @Sendable () -> NIODeadline
    private let sleep: Sleep
    /// Called from the timer's task when the soonest planned check-in is due.
    var onDue: (@Sendable () async -> Void)?

    init(now: @escaping @Sendable () -> NIODeadline = { .now() }, sleep: @escaping Sleep) {
        self.now = now
        self.sleep = sleep
    }

    /// The daemon's timer: an event-loop timer (monotonic, so it stops while the machine is
    /// suspended; the wake-up timer plans every check-in again after a resume).
    static func sleeping(on loop: any EventLoop) -> Sleep {
        { deadline in
            let scheduled = loop.scheduleTask(deadline: deadline) {}
            try await withTaskCancellationHandler {
                try await scheduled.futureResult.get()
            } onCancel: {
                scheduled.cancel()
            }
        }
    }

    // MARK: Plans

    /// From now on the Manager plans check-ins (the start-up pass is done).
    func startPlanning() { isPlanning = !stopped }

    /// Plans a check-in of registration `id` (of `user`) in `seconds` (replacing the one planned).
    func plan(_ id: RegistrationID, of user: String, in seconds: Double) {
        guard !stopped else { return }
        next[id] = (user, now() + .milliseconds(Int64(max(0, seconds) * 1000)))
        rescheduleTimer()
    }

    /// Plans a check-in now of each of `registrations` that has none planned nor in flight
    /// (of all, `all`).
    func planNow(_ registrations: [Due], all: Bool) {
        guard !stopped else { return }
        let at = now()
        for r in registrations where all || (next[r.id] == nil && inFlight[r.id] == nil) { next[r.id] = (r.user, at) }
        rescheduleTimer()
    }

    /// No check-in is planned for registration `id` any more.
    func forget(_ id: RegistrationID) { next[id] = nil }

    /// No check-in is planned for anybody (nor the timer set).
    func clear() {
        next = [:]
        timer?.cancel()
        timer = nil
    }

    /// Nothing is planned any more, ever (shutdown). Check-ins in flight end by themselves.
    func stop() {
        stopped = true
        isPlanning = false
        clear()
    }

    /// The registrations whose check-in is due, in user name order, their plans taken (one
    /// whose check-in is in flight is skipped: it plans its next one when it ends).
    func takeDue() -> [Due] {
        let at = now()
        let due = next.filter { $0.value.at <= at }.map { Due(id: $0.key, user: $0.value.user) }
            .sorted { ($0.user, $0.id) < ($1.user, $1.id) }
        for r in due { next[r.id] = nil }
        rescheduleTimer()
        return due.filter { inFlight[$0.id] == nil }
    }

    /// When registration `id` checks in next, as wall time (`wall` is now): now while one
    /// is in flight, nil when none is planned.
    func nextCheckIn(of id: RegistrationID, wall: Int64) -> Int64? {
        if inFlight[id] != nil { return wall }
        guard let deadline = next[id]?.at else { return nil }
        return wall + max(0, (deadline - now()).nanoseconds / 1_000_000_000)
    }

    private func rescheduleTimer() {
        timer?.cancel()
        timer = nil
        guard !stopped, let soonest = next.values.map(\.at).min() else { return }
        // The timer may be armed while a request is answered; what it starts is the daemon's own.
        timer = Task { [sleep, onDue] in
            do { try await sleep(soonest) } catch { return }
            guard !Task.isCancelled else { return }
            await RequestingClient.$current.withValue(nil) { await onDue?() }
        }
    }

    // MARK: Requests in flight

    struct Ticket {
        let registration: RegistrationID
        let token: UInt64
    }

    /// A request of registration `id` started: it is no longer planned, and unregister can
    /// cancel it until `end`.
    func begin<T: Sendable>(registration id: RegistrationID, _ request: Task<T, Never>) -> Ticket {
        next[id] = nil
        inFlight[id, default: 0] += 1
        let token = takeToken()
        requests[id, default: [:]][token] = { request.cancel() }
        return Ticket(registration: id, token: token)
    }

    func end(_ t: Ticket) {
        requests[t.registration]?[t.token] = nil
        if requests[t.registration]?.isEmpty == true { requests[t.registration] = nil }
        inFlight[t.registration]! -= 1
        if inFlight[t.registration] == 0 { inFlight[t.registration] = nil }
    }

    /// Cancels every request of registration `id` still waiting for its answer (unregister):
    /// whatever the server says to it later is never read.
    func cancelRequests(of id: RegistrationID) {
        for cancel in (requests.removeValue(forKey: id) ?? [:]).values { cancel() }
    }

    var requestsInFlight: Int { requests.values.reduce(0) { $0 + $1.count } }

    // MARK: Scheduled check-ins

    /// Starts `body` as a tracked task; it must call `ended(_:)` with the token it is given
    /// as its last step.
    func run(_ body: @escaping @Sendable (UInt64) async -> Void) {
        let token = takeToken()
        runs[token] = Task { await RequestingClient.$current.withValue(nil) { await body(token) } }
    }

    func ended(_ token: UInt64) { runs[token] = nil }

    /// The scheduled check-ins that have not ended, to cancel or wait for.
    var running: [Task<Void, Never>] { Array(runs.values) }

    private func takeToken() -> UInt64 {
        defer { nextToken &+= 1 }
        return nextToken
    }
}
