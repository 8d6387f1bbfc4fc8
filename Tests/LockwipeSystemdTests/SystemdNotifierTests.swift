import Glibc
import Testing

@testable import LockwipeSystemd

/// These tests set NOTIFY_SOCKET in this process (sd_notify reads it at call time), so they hold
/// the test environment lock while doing so.
@Suite(.serialized) struct SystemdNotifierTests {
    /// A bound AF_UNIX datagram socket standing in for systemd's notify socket.
    final class NotifySocket {
        let directory: String
        let path: String
        let fd: CInt

        init() throws {
            var template = Array("/tmp/lockwipe-notify-XXXXXX".utf8CString)
            guard let dir = mkdtemp(&template) else { throw SystemdError(operation: "mkdtemp", errno: errno) }
            directory = String(cString: dir)
            path = directory + "/notify"
            fd = socket(AF_UNIX, CInt(SOCK_DGRAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { throw SystemdError(operation: "socket", errno: errno) }
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { buffer in
                for (index, byte) in path.utf8.enumerated() { buffer[index] = byte }
            }
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            guard bound == 0 else { throw SystemdError(operation: "bind(\(path))", errno: errno) }
        }

        /// The next datagram, or nil when none is queued (sd_notify has returned, so a sent one is there).
        func receive() -> String? {
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = recv(fd, &buffer, buffer.count, CInt(MSG_DONTWAIT))
            guard count >= 0 else { return nil }
            return String(decoding: buffer[0..<count], as: UTF8.self)
        }

        deinit {
            close(fd)
            unlink(path)
            rmdir(directory)
        }
    }

    /// Runs `body` with NOTIFY_SOCKET pointing at a fresh socket, restoring the variable afterwards.
    func withNotifySocket(_ body: (NotifySocket) throws -> Void) throws {
        let socket = try NotifySocket()
        try TestEnvironment.exclusive {
            let previous = getenv("NOTIFY_SOCKET").map { String(cString: $0) }
            setenv("NOTIFY_SOCKET", socket.path, 1)
            defer {
                if let previous { setenv("NOTIFY_SOCKET", previous, 1) } else { unsetenv("NOTIFY_SOCKET") }
            }
            try body(socket)
        }
    }

    @Test func readySendsReadyAndStatusInOneDatagram() throws {
        try withNotifySocket { socket in
            let notifier = SystemdNotifier()
            #expect(notifier.isActive)
            notifier.ready(status: "enforcing, 2 users registered")
            #expect(socket.receive() == "READY=1\nSTATUS=enforcing, 2 users registered")
            #expect(socket.receive() == nil)
        }
    }

    /// The notifier a Manager under test is given: another test's NOTIFY_SOCKET never gets
    /// its STATUS= lines (they once arrived in the middle of the test below and failed it).
    @Test func aSilentNotifierNeverSends() throws {
        try withNotifySocket { socket in
            #expect(SystemdNotifier.silent.isActive == false)
            SystemdNotifier.silent.status("1 user; next: lock root in 5d")
            SystemdNotifier.silent.ready(status: "enforcing")
            #expect(socket.receive() == nil)
        }
    }

    @Test func statusIsKeptOnOneLine() throws {
        try withNotifySocket { socket in
            SystemdNotifier().status("config broken:\nkept old one")
            #expect(socket.receive() == "STATUS=config broken: kept old one")
        }
    }

    @Test func reloadingCarriesTheMonotonicClock() throws {
        try withNotifySocket { socket in
            let before = SystemdNotifier.monotonicMicroseconds()
            SystemdNotifier().reloading()
            let after = SystemdNotifier.monotonicMicroseconds()
            let message = try #require(socket.receive())
            let lines = message.split(separator: "\n")
            #expect(lines.count == 2)
            #expect(lines.first == "RELOADING=1")
            let usec = try #require(lines.last.flatMap { UInt64($0.dropFirst("MONOTONIC_USEC=".count)) })
            #expect(lines.last?.hasPrefix("MONOTONIC_USEC=") == true)
            #expect(before <= usec && usec <= after)
        }
    }

    @Test func stoppingWatchdogExtendAndRawNotify() throws {
        try withNotifySocket { socket in
            let notifier = SystemdNotifier()
            notifier.stopping()
            #expect(socket.receive() == "STOPPING=1")
            notifier.watchdog()
            #expect(socket.receive() == "WATCHDOG=1")
            notifier.extendTimeout(by: .milliseconds(2500))
            #expect(socket.receive() == "EXTEND_TIMEOUT_USEC=2500000")
            notifier.notify(["STATUS=a", "ERRNO=5"])
            #expect(socket.receive() == "STATUS=a\nERRNO=5")
            notifier.notify([])
            #expect(socket.receive() == nil)
        }
    }

    @Test func unsetNotifySocketIsANoOp() throws {
        try withNotifySocket { socket in
            unsetenv("NOTIFY_SOCKET")
            let notifier = SystemdNotifier()
            #expect(!notifier.isActive)
            notifier.ready(status: "x")
            notifier.watchdog()
            setenv("NOTIFY_SOCKET", "", 1)
            #expect(!notifier.isActive)
            notifier.stopping()
            #expect(socket.receive() == nil)
            // The same socket does receive once the variable points at it again.
            setenv("NOTIFY_SOCKET", socket.path, 1)
            notifier.watchdog()
            #expect(socket.receive() == "WATCHDOG=1")
        }
    }

    @Test func watchdogIntervalIsHalfOfWatchdogUsec() {
        #expect(SystemdNotifier.watchdogInterval(environment: [:], pid: 10) == nil)
        #expect(SystemdNotifier.watchdogInterval(environment: ["WATCHDOG_USEC": "30000000"], pid: 10) == .seconds(15))
        #expect(SystemdNotifier.watchdogInterval(environment: ["WATCHDOG_USEC": "3"], pid: 10) == .microseconds(1))
        #expect(
            SystemdNotifier.watchdogInterval(environment: ["WATCHDOG_USEC": "20000000", "WATCHDOG_PID": "10"], pid: 10)
                == .seconds(10))
    }

    @Test func watchdogIntervalForAnotherProcessIsNil() {
        #expect(SystemdNotifier.watchdogInterval(environment: ["WATCHDOG_USEC": "20000000", "WATCHDOG_PID": "11"], pid: 10) == nil)
        #expect(SystemdNotifier.watchdogInterval(environment: ["WATCHDOG_USEC": "20000000", "WATCHDOG_PID": "x"], pid: 10) == nil)
    }

    @Test(arguments: ["", "abc", "0", "-5", "1.5", " 100", "99999999999999999999999", "18446744073709551615"])
    func watchdogIntervalRejectsGarbage(value: String) {
        #expect(SystemdNotifier.watchdogInterval(environment: ["WATCHDOG_USEC": value], pid: 10) == nil)
    }

    @Test func watchdogIntervalDefaultsToThisProcess() {
        // This test process is not run with a watchdog.
        TestEnvironment.exclusive {
            if getenv("WATCHDOG_USEC") == nil {
                #expect(SystemdNotifier.watchdogInterval() == nil)
            }
        }
        #expect(
            SystemdNotifier.watchdogInterval(environment: ["WATCHDOG_USEC": "8", "WATCHDOG_PID": "\(getpid())"])
                == .microseconds(4))
    }
}
