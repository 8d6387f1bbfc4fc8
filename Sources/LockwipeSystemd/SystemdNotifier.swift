import CSystemd

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// `sd_notify` wrapper; a no-op when NOTIFY_SOCKET is unset (not started by systemd, or
/// `Type=` is not `notify`/`notify-reload`).
///
/// NOTIFY_SOCKET is read at every call, never cached, and never unset: a reload or a
/// watchdog ping late in the process still reaches systemd.
public struct SystemdNotifier: Sendable {
    /// False for `silent`: it never reads NOTIFY_SOCKET, never sends.
    private let speaks: Bool

    public init() { speaks = true }

    private init(speaks: Bool) { self.speaks = speaks }

    /// A notifier that never sends, whatever NOTIFY_SOCKET says: for a daemon under test in a
    /// process whose other tests set NOTIFY_SOCKET to sockets of their own (a Manager under
    /// test then never sends them its STATUS= lines).
    public static let silent = SystemdNotifier(speaks: false)

    /// NOTIFY_SOCKET is set and non-empty (and this notifier is not `silent`).
    public var isActive: Bool {
        guard speaks, let socket = getenv("NOTIFY_SOCKET") else { return false }
        return socket.pointee != 0
    }

    /// Sends the assignments as one datagram, joined with "\n"; failures are ignored, as
    /// nothing useful can be done about a notification systemd did not get.
    public func notify(_ assignments: [String]) {
        guard isActive, !assignments.isEmpty else { return }
        _ = sd_notify(0, assignments.joined(separator: "\n"))
    }

    /// READY=1 with a one-line STATUS=.
    public func ready(status: String) {
        notify(["READY=1", "STATUS=" + Self.oneLine(status)])
    }

    public func status(_ text: String) {
        notify(["STATUS=" + Self.oneLine(text)])
    }

    /// RELOADING=1 with MONOTONIC_USEC= (required by `Type=notify-reload` since systemd 253,
    /// ignored before); follow it with ``ready(status:)`` once the reload is done or refused.
    public func reloading() {
        notify(["RELOADING=1", "MONOTONIC_USEC=\(Self.monotonicMicroseconds())"])
    }

    public func stopping() {
        notify(["STOPPING=1"])
    }

    public func watchdog() {
        notify(["WATCHDOG=1"])
    }

    /// EXTEND_TIMEOUT_USEC=: asks for more time while starting, reloading or stopping
    /// (e.g. a long wipe in the start-up enforcement pass).
    public func extendTimeout(by duration: Duration) {
        let (seconds, attoseconds) = duration.components
        let usec = max(0, seconds) * 1_000_000 + max(0, attoseconds) / 1_000_000_000_000
        notify(["EXTEND_TIMEOUT_USEC=\(usec)"])
    }

    /// Half of WATCHDOG_USEC when it is set and WATCHDOG_PID is unset or equals `pid`; nil
    /// otherwise (also for a malformed or zero value: no watchdog is better than a wrong one).
    public static func watchdogInterval(
        environment: [String: String] = ProcessInfo.processInfo.environment,
        pid: Int32 = getpid()
    ) -> Duration? {
        guard let usecText = environment["WATCHDOG_USEC"],
            let usec = UInt64(usecText), usec > 0, usec <= UInt64(Int64.max)
        else { return nil }
        if let pidText = environment["WATCHDOG_PID"] {
            guard let watchdogPID = Int32(pidText), watchdogPID == pid else { return nil }
        }
        return .microseconds(Int64(usec / 2))
    }

    /// CLOCK_MONOTONIC in microseconds, the clock systemd compares MONOTONIC_USEC against.
    static func monotonicMicroseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1_000
    }

    /// systemd splits assignments on "\n"; a status must not smuggle in another one.
    static func oneLine(_ text: String) -> String {
        String(text.map { $0.isNewline ? " " : $0 })
    }
}
