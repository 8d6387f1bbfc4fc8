import CSystemd
import Dispatch

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Where the daemon learns whether a user is logged in, and when that may have changed.
/// The daemon uses logind (``LogindSessionWatcher``); tests inject a fake.
public protocol SessionWatching: AnyObject, Sendable {
    /// The number of login sessions of `uid` that are not closing: a user with none is
    /// logged out, even while a lingering user manager or leftover processes of a closed
    /// session still run.
    func loginSessions(uid: UInt32) -> Int
    /// logind's word for the user's state (`offline`, `lingering`, `online`, `active`,
    /// `closing`, ...), for messages only.
    func state(uid: UInt32) -> String
    /// Starts watching. `onChange` is called, on a queue of the watcher's own, every time
    /// sessions or users may have changed (it does not say whose: ask again).
    func start(onChange: @escaping @Sendable () -> Void) throws
    /// Stops watching; `onChange` is not called after this returns.
    func stop()
}

/// sd-login: reads logind's state in /run/systemd (`sd_uid_get_sessions`,
/// `sd_uid_get_state`) and wakes up on its inotify descriptors (`sd_login_monitor`, one
/// for "session" and one for "uid") from a dispatch source: no polling.
public final class LogindSessionWatcher: SessionWatching, @unchecked Sendable {
    // Mutable state is touched only on `queue` (start and stop hop onto it).
    private let queue = DispatchQueue(label: "io.lockwipe.logind")
    private var sources: [DispatchSourceRead] = []

    public init() {}

    /// Why sd-login cannot be used here, or nil when it can. logind is running exactly
    /// when the system was booted with systemd and `/run/systemd/seats/` exists (what
    /// libsystemd itself checks); a container without systemd has neither.
    public static func unavailableReason() -> String? {
        if sd_booted() <= 0 { return "the system was not booted with systemd (no /run/systemd/system)" }
        if access("/run/systemd/seats/", F_OK) != 0 { return "systemd-logind is not running (no /run/systemd/seats)" }
        return nil
    }

    public func loginSessions(uid: UInt32) -> Int {
        // require_active = 0: online sessions, closing ones excluded (sd_uid_get_sessions(3)).
        let n = sd_uid_get_sessions(uid_t(uid), 0, nil)
        return n > 0 ? Int(n) : 0
    }

    public func state(uid: UInt32) -> String {
        var raw: UnsafeMutablePointer<CChar>?
        let r = sd_uid_get_state(uid_t(uid), &raw)
        guard r >= 0, let raw else { return r == -ENXIO || r == -ENOENT ? "offline" : "unknown" }
        defer { free(raw) }
        return String(cString: raw)
    }

    public func start(onChange: @escaping @Sendable () -> Void) throws {
        try queue.sync {
            guard sources.isEmpty else { return }
            var made: [DispatchSourceRead] = []
            for category in ["session", "uid"] {
                var monitor: OpaquePointer?
                let r = sd_login_monitor_new(category, &monitor)
                guard r >= 0, let monitor else {
                    made.forEach { $0.cancel() }
                    throw SystemdError(operation: "sd_login_monitor_new(\"\(category)\")", errno: -r)
                }
                let fd = sd_login_monitor_get_fd(monitor)
                let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
                let box = MonitorBox(monitor)
                source.setEventHandler {
                    _ = sd_login_monitor_flush(box.monitor)
                    onChange()
                }
                // The monitor owns the fd: release it only once the source is done with it.
                source.setCancelHandler { _ = sd_login_monitor_unref(box.monitor) }
                source.resume()
                made.append(source)
            }
            sources = made
        }
    }

    public func stop() {
        queue.sync {
            sources.forEach { $0.cancel() }
            sources = []
        }
    }

    deinit {
        sources.forEach { $0.cancel() }
    }
}

/// An `sd_login_monitor *` carried into the dispatch handlers (used only on the watcher's queue).
private final class MonitorBox: @unchecked Sendable {
    let monitor: OpaquePointer
    init(_ monitor: OpaquePointer) { self.monitor = monitor }
}
