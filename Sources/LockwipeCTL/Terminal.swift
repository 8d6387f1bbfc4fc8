import LockwipeCore

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

/// Colour as systemd's tools use it: only when standard output is a terminal (decided
/// before a pager takes it over), never with `NO_COLOR` set (no-color.org) or `TERM=dumb`.
enum Terminal {
    nonisolated(unsafe) static var colors = false

    /// Decides once, at the start, while standard output is still what the user gave.
    static func decide(environment: [String: String] = ProcessInfo.processInfo.environment) {
        let noColor = environment["NO_COLOR"].map { !$0.isEmpty } ?? false
        colors = isatty(STDOUT_FILENO) == 1 && !noColor && environment["TERM"] != "dumb"
    }

    static func red(_ text: String) -> String { colors ? "\u{1B}[1;31m\(text)\u{1B}[0m" : text }
    static func yellow(_ text: String) -> String { colors ? "\u{1B}[1;33m\(text)\u{1B}[0m" : text }

    /// The width `text` takes on a terminal: its characters less colour sequences.
    static func visibleWidth(_ text: String) -> Int {
        var width = 0
        var escape = false
        for c in text {
            if escape {
                if c == "m" { escape = false }
            } else if c == "\u{1B}" {
                escape = true
            } else {
                width += 1
            }
        }
        return width
    }
}

/// The pager systemd's tools start for their output on a terminal: `$SYSTEMD_PAGER`, else
/// `$PAGER`, else `less` (else `more`), with `LESS=FRXMK` when `LESS` is not set (quit when
/// the output fits the screen, keep colours); none when standard output is not a terminal,
/// with `--no-pager`, or when the variable says `cat` or is empty. Under sudo or pkexec
/// only `less`, with `LESSSECURE=1` (`SYSTEMD_PAGERSECURE`).
enum Pager {
    nonisolated(unsafe) private static var pid: pid_t = 0

    static func start(environment: [String: String] = ProcessInfo.processInfo.environment) {
        guard pid == 0, !output.noPager, isatty(STDOUT_FILENO) == 1, let command = command(environment) else { return }
        if secure(environment) {
            // As systemd's SYSTEMD_PAGERSECURE: a pager that can run commands must not run
            // them with privileges someone was given for lockwipectl alone (sudo, pkexec).
            guard command == "less" || command.hasPrefix("less ") else { return }
            setenv("LESSSECURE", "1", 1)
        }
        if environment["LESS"] == nil { setenv("LESS", "FRXMK", 1) }
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { return }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, fds[0], STDIN_FILENO)
        posix_spawn_file_actions_addclose(&actions, fds[0])
        posix_spawn_file_actions_addclose(&actions, fds[1])
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup("sh"), strdup("-c"), strdup(command), nil]
        defer { for a in argv { free(a) } }
        var child: pid_t = 0
        let rc = posix_spawn(&child, "/bin/sh", &actions, nil, argv, environ)
        close(fds[0])
        guard rc == 0 else {
            close(fds[1])
            return
        }
        // A pager that quits early must not kill us mid-line: writes then fail quietly.
        signal(SIGPIPE, SIG_IGN)
        fflush(nil)
        dup2(fds[1], STDOUT_FILENO)
        close(fds[1])
        pid = child
    }

    /// Hands the pager the end of the output and waits until the user leaves it.
    static func finish() {
        guard pid != 0 else { return }
        fflush(nil)
        close(STDOUT_FILENO)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        pid = 0
    }

    /// `SYSTEMD_PAGERSECURE` when set (1/yes/true or 0/no/false); otherwise on when
    /// lockwipectl runs with privileges given by sudo or pkexec, or set-user-ID.
    static func secure(_ environment: [String: String]) -> Bool {
        if let value = environment["SYSTEMD_PAGERSECURE"]?.lowercased() {
            if ["1", "yes", "true", "on"].contains(value) { return true }
            if ["0", "no", "false", "off"].contains(value) { return false }
        }
        return geteuid() != getuid() || (geteuid() == 0 && (environment["SUDO_UID"] != nil || environment["PKEXEC_UID"] != nil))
    }

    static func command(_ environment: [String: String]) -> String? {
        for name in ["SYSTEMD_PAGER", "PAGER"] {
            if let value = environment[name] {
                let trimmed = value.trimmingWhitespace()
                return trimmed.isEmpty || trimmed == "cat" ? nil : trimmed
            }
        }
        let path = (environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        for candidate in ["less", "more"] where path.contains(where: { access("\($0)/\(candidate)", X_OK) == 0 }) {
            return candidate
        }
        return nil
    }
}
