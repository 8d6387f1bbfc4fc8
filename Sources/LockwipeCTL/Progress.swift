import LockwipeCore
import LockwipeProtocol
import Synchronization

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

/// How `lockwipectl wipe` waits for a wipe and shows how far it is.
///
/// The Wipe call goes out on one connection, whose reply is the report; a second
/// connection asks `GetStatus` every 250 ms for the wipe's progress (the same
/// `wipe_progress`, with the same smoothed rate and ETA, that `lockwipectl status`
/// shows), and waits for the reply with `poll` in between. Polling was chosen over
/// varlink's `more` replies: the daemon's status is already the one place the progress
/// is read, and a second connection needs nothing new on the wire or in the server.
///
/// On a terminal (standard error) the progress is one line redrawn in place; otherwise
/// a plain line every `plainLineInterval` seconds; with `--quiet` nothing. Ctrl-C does
/// not stop the wipe, which goes on in lockwiped: it says so and exits 130. A connection
/// broken while the wipe ran means lockwiped stopped: the wipe is recorded and resumes
/// at its next start.
struct WipeWatch {
    enum Display {
        /// One line on standard error, redrawn in place.
        case terminal
        /// A plain line every `plainLineInterval` seconds.
        case lines
        case quiet
    }

    static let pollInterval: Int32 = 250  // ms
    static let plainLineInterval = 3.0  // s

    let global: GlobalOptions
    /// nil: every registration (`--all`).
    let user: String?
    let display: Display

    static func display(quiet: Bool) -> Display {
        if quiet { return .quiet }
        return isatty(STDERR_FILENO) == 1 ? .terminal : .lines
    }

    /// Sends the wipe, shows its progress until the report arrives, and returns the report.
    func run(_ target: TargetSelection) throws -> ActionReply {
        let wipe = try global.mappingErrors(.wipe) { () -> VarlinkClient in
            let client = try VarlinkClient(path: global.socketPath, timeout: nil)
            try client.send(.wipe, target)
            return client
        }
        Interrupt.install()
        defer { Interrupt.restore() }
        var line = ProgressLine(display: display)
        var status: VarlinkClient?
        var started = false
        var first = true
        while true {
            var pfd = pollfd(fd: wipe.descriptor, events: Int16(POLLIN), revents: 0)
            // The first status read at once: a short wipe is seen, and so is one that lockwiped's
            // stop breaks off early.
            let ready = poll(&pfd, 1, first ? 0 : Self.pollInterval)
            first = false
            if Interrupt.raised {
                line.clear()
                StandardStreams.writeError(
                    "lockwipectl: interrupted; the wipe was not stopped: it goes on in lockwiped. Watch it with `lockwipectl status\(user.map { " --user \($0)" } ?? "")`.\n"
                )
                exitProcess(ExitStatus.interrupted)
            }
            if ready > 0 {
                line.clear()
                do {
                    return try wipe.receive(ActionReply.self)
                } catch VarlinkClient.ConnectionError.broken(let reason) {
                    throw brokenDuringWipe(reason, started: started)
                } catch {
                    return try global.mappingErrors(.wipe) { throw error }
                }
            }
            // The progress is shown as well as it can be read: a failed status read only
            // leaves the line as it was (the report still arrives on the other connection).
            if status == nil { status = try? VarlinkClient(path: global.socketPath, timeout: 10) }
            guard let client = status, let report = try? client.call(.getStatus, StatusRequest(user: user))
            else {
                status = nil
                continue
            }
            // Wipe-pending: committed (lockwiped records a wipe before it touches anything),
            // locking the vault before the erase starts.
            let wiping = report.registrations.filter { $0.wipeProgress != nil || $0.state == .wiping || $0.state == .wipePending }
            if !wiping.isEmpty { started = true }
            line.show(wiping.map(Self.line(for:)).joined(separator: "; "))
        }
    }

    /// What to say when the connection breaks while the wipe runs: lockwiped stopped.
    private func brokenDuringWipe(_ reason: String, started: Bool) -> CommandFailure {
        let who = user ?? "the registrations"
        let watch = "lockwipectl status\(user.map { " --user \($0)" } ?? "")"
        guard started else {
            // Broken before a status read showed the wipe: lockwiped commits a wipe before it
            // touches anything, so one it began is recorded all the same.
            return CommandFailure(
                code: ExitStatus.failed,
                message:
                    "the connection to lockwiped broke before the wipe of \(who) was seen to start (\(reason)): lockwiped stopped? A wipe it began is recorded and resumes at lockwiped's next start; `\(watch)` shows whether it did"
            )
        }
        return CommandFailure(
            code: ExitStatus.failed,
            message: "lockwiped stopped while wiping \(who): the wipe is recorded and resumes at lockwiped's next start; `\(watch)` shows it then")
    }

    /// "alice: wiping: 1200/10000 files, 120 MiB of 1.0 GiB, ETA 2s, ...": the words
    /// `lockwipectl status` uses (`describe`).
    static func line(for r: RegistrationInfo) -> String {
        "\(r.user): " + (r.wipeProgress.map { describe($0) } ?? "wiping")
    }
}

/// The progress line on standard error: redrawn in place on a terminal (carriage return,
/// clear to the end of the line, cut to the terminal's width so it never wraps), a plain
/// line now and then otherwise.
struct ProgressLine {
    let display: WipeWatch.Display
    private var drawn = false
    private var lastPlain: ContinuousClock.Instant = .now

    init(display: WipeWatch.Display) { self.display = display }

    mutating func show(_ text: String) {
        if text.isEmpty { return }
        switch display {
        case .quiet: return
        case .terminal:
            let width = Self.terminalWidth()
            let cut = text.count >= width ? String(text.prefix(max(1, width - 2))) + "…" : text
            StandardStreams.writeError("\r\u{1B}[K" + cut)
            drawn = true
        case .lines:
            let now = ContinuousClock.now
            guard now - lastPlain >= .seconds(WipeWatch.plainLineInterval) else { return }
            lastPlain = now
            StandardStreams.writeError("\(text)\n")
        }
    }

    /// Removes the line before anything else is printed.
    mutating func clear() {
        guard drawn else { return }
        StandardStreams.writeError("\r\u{1B}[K")
        drawn = false
    }

    static func terminalWidth() -> Int {
        var size = winsize()
        guard ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return 80 }
        return Int(size.ws_col)
    }
}

/// Ctrl-C while waiting for a wipe: noted by the handler, acted on by the waiting loop
/// (`poll` returns early with EINTR).
enum Interrupt {
    private static let flag = Atomic<Bool>(false)
    nonisolated(unsafe) private static var previous = sigaction()

    static var raised: Bool { flag.load(ordering: .relaxed) }

    static func install() {
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in Interrupt.flag.store(true, ordering: .relaxed) }
        sigemptyset(&action.sa_mask)
        action.sa_flags = 0
        sigaction(SIGINT, &action, &previous)
    }

    static func restore() { sigaction(SIGINT, &previous, nil) }
}
