import LockwipeCore
import LockwipeSystemd
import NIOCore

/// Lock on logout: what the manager knows about each registration with `lock_timeout > 0`.
///
/// The rule: an active registration whose user has had no login session (closing
/// sessions and lingering do not count) for `lock_timeout` seconds is locked, with
/// trigger `logout`. The time without a session counts from the moment the daemon
/// sees it begin: the end of the last session, or, when it never saw one, the moment it
/// started watching that registration (daemon start, registration, unlock, or
/// `lock_timeout` becoming > 0). A session that comes back before the timeout cancels
/// the pending lock; the lock itself is never lifted by logging in again.
struct LogoutLocks {
    struct Tracked {
        /// The registration's user (for the lock and the words) and uid (for logind).
        var user: String
        var uid: UInt32
        /// A session of the user was seen since tracking began.
        var sawSession = false
        /// When the user was last seen without a session (monotonic); nil while logged in.
        var noSessionSince: Duration?
        var timeout = 0
        var source = "local"
        var timer: (any ScheduledDeadline)?
        /// Tells a timer that fired after being replaced or cancelled from the live one.
        var generation = 0
    }

    /// nil: lock on logout is off (logind unavailable, or not started: tests, start-up pass).
    var watcher: (any SessionWatching)?
    /// Set by `startLockOnLogout`.
    var timers: (any DeadlineScheduling)?
    /// By registration id: a name unregistered and registered again is tracked anew.
    var tracked: [RegistrationID: Tracked] = [:]
    /// Why logind cannot be watched, for `status` (nil when watching or not tried).
    var unavailable: String?
    /// Refreshes begun: only the newest one applies what it read.
    var refreshes: UInt64 = 0

    /// Stops watching and cancels every pending lock (the daemon stops).
    mutating func stop() {
        watcher?.stop()
        watcher = nil
        for t in tracked.values { t.timer?.cancel() }
        tracked = [:]
    }

    /// When the pending logout lock of registration `id` is due, in wall seconds for `status` (`wall`: now).
    func lockTime(_ id: RegistrationID, wall: Int64) -> Int64? {
        guard let t = tracked[id], t.timer != nil, let since = t.noSessionSince, let timers else { return nil }
        let remaining = since + .seconds(t.timeout) - timers.now()
        return wall + max(0, remaining.components.seconds)
    }

    /// For `status`: lock on logout cannot work here but `users` (active, `lock_timeout > 0`) ask for it.
    func warnings(users: [String]) -> [String] {
        guard watcher == nil, let why = unavailable, !users.isEmpty else { return [] }
        return ["lock_timeout is set for \(users.joined(separator: ", ")) but lock on logout is disabled: \(why)"]
    }
}
