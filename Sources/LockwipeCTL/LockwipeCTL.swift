import ArgumentParser
import LockwipeCore
import LockwipeProtocol

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

/// The exit codes of README.md ("Exit codes") and lockwipectl(1): scripts rely on them.
public enum ExitStatus {
    public static let ok: Int32 = 0
    public static let failed: Int32 = 1
    public static let usage: Int32 = 2
    /// `status`: a registration shown is in state lock-failed (`systemctl status`'s 3).
    public static let lockFailed: Int32 = 3
    /// `status`: lockwiped's machine key cannot be opened (a PCR changed, the TPM was
    /// cleared): the encrypted vaults it wraps stay locked. A lock-failed vault (3) wins.
    public static let machineKeyUnavailable: Int32 = 4
    public static let unreachable: Int32 = 69
    public static let notPermitted: Int32 = 77
    /// `wipe`: Ctrl-C while it waited (the wipe goes on in lockwiped), as a shell reports
    /// a process ended by SIGINT.
    public static let interrupted: Int32 = 130
}

/// A failure with the exit code it maps to and the sentence to print.
struct CommandFailure: Error {
    var code: Int32
    var message: String
    /// The daemon's varlink error name, when the failure is one: what callers switch on
    /// (never the message, which is for people and may be reworded).
    var error: String? = nil
}

/// `lockwipectl`: control lockwiped from the shell.
public struct LockwipeCTL: ParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "lockwipectl",
        abstract: "Control lockwiped: see and lock, unlock, wipe and register users' data.",
        discussion: """
            Without a verb, lockwipectl runs status. The global options (--socket, --json, --no-pager, \
            --no-legend) may stand anywhere on the line. Users are named as arguments \
            (lockwipectl lock alice bob) or with --user. \
            Exit codes: 0 ok, 1 failed, 2 usage, 3 status: a lock failed (a vault is NOT locked), \
            69 daemon unreachable, 77 not permitted, 130 wipe: interrupted while waiting (the wipe goes on). \
            The socket is /run/lockwipe/io.lockwipe.Manager unless --socket or LOCKWIPE_SOCKET says otherwise.
            """,
        version: LockwipeVersion.current,
        subcommands: [
            Status.self, Lock.self, Unlock.self, Wipe.self, Register.self, Unregister.self, CheckIn.self, Credentials.self,
            PolicyCommand.self, History.self, Certificate.self, Passcode.self, OfflineCodeCommand.self, RecoveryKeyCommand.self, Recover.self, OutboxCommand.self,
            PamAccount.self, PamAuth.self,
        ])

    public init() {}

    /// Parses, runs, and exits with the documented codes (`ExitStatus`; ArgumentParser's own
    /// usage code is 64).
    public static func mainWithExitCodes(_ arguments: [String]) -> Never {
        do {
            var command = try parseAsRoot(shapedArguments(arguments))
            Terminal.decide()
            try command.run()
            exitProcess(ExitStatus.ok)
        } catch let failure as CommandFailure {
            if !failure.message.isEmpty { StandardStreams.writeError("lockwipectl: \(failure.message)\n") }
            exitProcess(failure.code)
        } catch {
            let code = exitCode(for: error)
            if code == .success {
                print(fullMessage(for: error))
                exitProcess(ExitStatus.ok)
            }
            StandardStreams.writeError("\(fullMessage(for: error))\n")
            exitProcess(ExitStatus.usage)
        }
    }
}

struct GlobalOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Path of lockwiped's control socket (default: $LOCKWIPE_SOCKET or /run/lockwipe/io.lockwipe.Manager).", valueName: "path"), completion: .file())
    var socket: String?
    @Flag(name: .customLong("no-pager"), help: "Do not pipe the output into a pager.") var noPager = false
    @Flag(name: .customLong("no-legend"), help: "Do not print column headers and hints.") var noLegend = false

    var socketPath: String {
        socket ?? ProcessInfo.processInfo.environment["LOCKWIPE_SOCKET"].flatMap { $0.isEmpty ? nil : $0 } ?? VarlinkClient.defaultSocketPath
    }

    /// Calls the daemon, mapping every failure to the documented exit codes (`ExitStatus`).
    /// The method's declaration (`ManagerMethods`) fixes its name and the types of
    /// `parameters` and `reply`.
    func call<P, R>(_ method: VarlinkMethod<P, R>, _ parameters: P, _ reply: R.Type) throws -> R {
        try mappingErrors(method) {
            // A wipe takes as long as its data needs (minutes for many GiB); everything
            // else answers within seconds.
            let timeout: TimeInterval? = method.name == ManagerMethods.wipe.name ? nil : 120
            // A request made during the start-up pass waits for it, saying so, as long as
            // systemd waits for READY=1 (TimeoutStartSec=5min): a script that restarts
            // lockwiped and goes on must not fail on it (issue 42). One that a stopping
            // lockwiped did not read is asked again.
            var waited = false
            let deadline = ContinuousClock.now + Self.startUpWait
            while true {
                do {
                    return try askingAgainIfUnread { try VarlinkClient(path: socketPath, timeout: timeout).call(method, parameters) }
                } catch let error as VarlinkError where error.name == VarlinkError.startingUpName {
                    if ContinuousClock.now >= deadline {
                        throw CommandFailure(
                            code: ExitStatus.failed,
                            message:
                                "lockwiped is still in its start-up pass after \(Self.startUpWait.components.seconds) s (\(error.message)); try again later, lockwipectl status shows what it is doing"
                        )
                    }
                    if !waited {
                        StandardStreams.writeError(
                            "lockwipectl: waiting for lockwiped to finish its start-up pass (it locks or wipes what became due while it was not running; lockwipectl status shows it)\n"
                        )
                        waited = true
                    }
                    usleep(250_000)
                }
            }
        }
    }

    /// How long a request waits for the start-up pass: systemd's TimeoutStartSec.
    static let startUpWait: Duration = .seconds(300)

    /// Runs `call` again, a few times, when lockwiped did not read its request: it was
    /// stopping (`Stopping`, or the connection closed unread). The next lockwiped answers
    /// (with socket activation systemd holds the socket meanwhile), or none does (exit 69).
    /// A few times only: one with too many connections closes unread too.
    func askingAgainIfUnread<T>(_ call: () throws -> T) throws -> T {
        var attempt = 1
        while true {
            do {
                return try call()
            } catch  where attempt < Self.unreadAttempts && Self.wasNotRead(error) {
                attempt += 1
            }
            usleep(100_000)
        }
    }

    /// How often a request that lockwiped did not read is asked.
    static let unreadAttempts = 5

    private static func wasNotRead(_ error: any Error) -> Bool {
        if let error = error as? VarlinkError { return error.name == VarlinkError.stoppingName }
        if case .notRead? = error as? VarlinkClient.ConnectionError { return true }
        return false
    }

    /// Runs `body`, which talks to the daemon, mapping its failures to the documented exit
    /// codes (`ExitStatus`).
    func mappingErrors<P, R, T>(_ method: VarlinkMethod<P, R>, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as VarlinkClient.ConnectionError {
            switch error {
            case .unreachable, .notRead: throw CommandFailure(code: ExitStatus.unreachable, message: "\(error)")
            default: break
            }
            throw CommandFailure(code: ExitStatus.failed, message: "\(error)")
        } catch let error as VarlinkError {
            switch error.name {
            case VarlinkError.notPermittedName: throw CommandFailure(code: ExitStatus.notPermitted, message: "not permitted: \(error.message)")
            case VarlinkError.invalidParameterName: throw CommandFailure(code: ExitStatus.usage, message: error.message)
            case VarlinkError.passcodeRequiredName:
                throw CommandFailure(code: ExitStatus.usage, message: error.message, error: error.name)
            case VarlinkError.passcodeExpiredName:
                throw CommandFailure(code: ExitStatus.failed, message: error.message, error: error.name)
            default: throw CommandFailure(code: ExitStatus.failed, message: error.message)
            }
        } catch let error as DecodingError {
            _ = error
            throw CommandFailure(
                code: ExitStatus.failed,
                message: "cannot understand lockwiped's reply to \(method.name): are lockwiped and lockwipectl the same version (lockwipectl --version)?")
        }
    }
}

/// Prints JSON exactly as the daemon's contract encodes it.
func printJSON<T: Encodable>(_ value: T) throws {
    let encoder = VarlinkCoding.encoder()
    encoder.outputFormatting = output.json == .short ? [.sortedKeys, .withoutEscapingSlashes] : [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    print(String(decoding: try encoder.encode(value), as: UTF8.self))
}

/// Prints action results: one line per user, and the wipe report when there is one.
/// A result that is not what was asked (an incomplete wipe) makes the command fail.
func printResults(_ reply: ActionReply) throws {
    var incomplete = false
    for r in reply.results {
        print("\(r.user): \(r.detail)")
        if let w = r.wipe {
            for line in w.reportLines { print("  " + line) }
            if !w.complete { incomplete = true }
        }
    }
    if incomplete { throw CommandFailure(code: ExitStatus.failed, message: "the wipe is incomplete; it stays pending") }
}

/// Asks on a terminal; without one, `--yes` is required (a usage error otherwise).
func confirm(_ question: String, yes: Bool, undoable: Bool = false) throws {
    if yes { return }
    guard isatty(STDIN_FILENO) == 1 else {
        throw CommandFailure(code: ExitStatus.usage, message: "refusing without --yes: standard input is not a terminal to confirm on")
    }
    StandardStreams.writeError("\(question)\(undoable ? "" : " This cannot be undone.") Type 'yes' to go ahead: ")
    guard readLine()?.trimmingBlanks().lowercased() == "yes" else {
        throw CommandFailure(code: ExitStatus.failed, message: "not confirmed; nothing was done")
    }
}

/// "in 2d 4h" / "2d 4h ago" from an ISO 8601 time.
func relative(_ iso: String, now: Date = Date()) -> String {
    // The daemon's own format without Foundation's parser (`ISOTimestamp`), any other with it.
    guard let date = ISOTimestamp.seconds(iso).map({ Date(timeIntervalSince1970: Double($0)) }) ?? (try? Date(iso, strategy: .iso8601)) else { return iso }
    let seconds = Int64(date.timeIntervalSince(now).rounded())
    return seconds > 0 ? "in \(RelativeTime.format(seconds: seconds))" : "\(RelativeTime.format(seconds: -seconds)) ago"
}

/// Aligned columns for human output; the first row is the header, left out with
/// `--no-legend` (`header: false`: there is none).
func table(_ rows: [[String]], header: Bool = true) -> String {
    let rows = header && output.noLegend ? Array(rows.dropFirst()) : rows
    guard let width = rows.first?.count else { return "" }
    let widths = (0..<width).map { c in rows.map { Terminal.visibleWidth($0[c]) }.max() ?? 0 }
    return rows.map { row in
        row.enumerated().map { i, cell in
            i == width - 1 ? cell : cell + String(repeating: " ", count: max(0, widths[i] - Terminal.visibleWidth(cell)))
        }
        .joined(separator: "  ")
    }.joined(separator: "\n")
}
