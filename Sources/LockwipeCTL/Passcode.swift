import ArgumentParser
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

/// Reading passcodes: on a terminal a prompt without echo (termios on /dev/tty), for
/// scripts one line per passcode from standard input (`--passcode-stdin`). Never from
/// the command line (argv is visible to every local user).
enum PasscodeInput {
    /// Prompts on the controlling terminal with echo off; nil without a terminal.
    static func prompt(_ text: String) throws -> String {
        let fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else {
            throw CommandFailure(code: ExitStatus.usage, message: "no terminal to ask for the passcode on: use --passcode-stdin")
        }
        defer { close(fd) }
        var saved = termios()
        guard tcgetattr(fd, &saved) == 0 else {
            throw CommandFailure(code: ExitStatus.usage, message: "cannot turn off echo on the terminal: use --passcode-stdin")
        }
        var quiet = saved
        quiet.c_lflag &= ~tcflag_t(ECHO)
        quiet.c_lflag |= tcflag_t(ECHONL)
        // Echo off first, then the prompt: whatever is typed once the prompt shows is
        // neither echoed nor flushed away by TCSAFLUSH.
        tcsetattr(fd, TCSAFLUSH, &quiet)
        defer { tcsetattr(fd, TCSAFLUSH, &saved) }
        _ = text.withCString { write(fd, $0, strlen($0)) }
        var bytes: [UInt8] = []
        var c: UInt8 = 0
        while read(fd, &c, 1) == 1, c != UInt8(ascii: "\n") { bytes.append(c) }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A new passcode, asked twice on a terminal.
    static func promptNew(_ what: String = "New passcode") throws -> String {
        let first = try prompt("\(what): ")
        let again = try prompt("Repeat \(what.prefix(1).lowercased() + what.dropFirst()): ")
        guard first == again else { throw CommandFailure(code: ExitStatus.failed, message: "the passcodes do not match; nothing was changed") }
        return first
    }

    /// The next line of standard input (without its newline); a usage error at its end.
    static func line(_ what: String) throws -> String {
        guard let line = readLine(strippingNewline: true) else {
            throw CommandFailure(code: ExitStatus.usage, message: "standard input ended before the \(what)")
        }
        return line
    }

    static var isTerminal: Bool { isatty(STDIN_FILENO) == 1 }
}

struct Passcode: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "passcode",
        abstract: "Set or change the passcode that protects an encrypted vault's key.",
        discussion: """
            The vault key of an encrypted registration is stored only wrapped: by the machine \
            key (the default passcode, where the passcode policy allows it) until its user sets \
            a passcode, by that passcode afterwards. A new passcode must satisfy the passcode \
            policy; every rule it breaks is named. A forgotten passcode cannot be reset, only \
            the vault wiped (lockwipectl wipe).
            """,
        subcommands: [Set.self, Change.self])

    struct Set: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set",
            abstract: "Set the first passcode of a vault still protected by the default passcode (the user or an administrator).",
            discussion: "On a terminal asks twice without echo; --passcode-stdin reads one line, the new passcode.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: ArgumentHelp("The user whose vault it is (default: yourself).", valueName: "user"), completion: .custom(completeUsers))
        var name: String?
        @Option(help: "The user whose vault it is (default: yourself).", completion: .custom(completeUsers)) var user: String?
        @Flag(name: .customLong("passcode-stdin"), help: "Read the new passcode from the first line of standard input.")
        var passcodeStdin = false

        func validate() throws { _ = try oneUser(name, user, verb: "set the passcode of", defaultSelf: true) }

        func run() throws {
            let user = try oneUser(name, user, verb: "set the passcode of", defaultSelf: true)
            let new = passcodeStdin ? try PasscodeInput.line("new passcode") : try PasscodeInput.promptNew()
            try printResults(try global.call(.setPasscode, PasscodeRequest(user: user, new: new), ActionReply.self))
        }
    }

    struct Change: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "change",
            abstract: "Change a vault's passcode; needs the current one (the user, or an administrator who knows it).",
            discussion: """
                On a terminal asks for the current passcode, then twice for the new one, without \
                echo; --passcode-stdin reads two lines: the current passcode, then the new one. \
                A wrong current passcode counts toward the retry limit like a failed unlock.
                """)
        @OptionGroup var global: GlobalOptions
        @Argument(help: ArgumentHelp("The user whose vault it is (default: yourself).", valueName: "user"), completion: .custom(completeUsers))
        var name: String?
        @Option(help: "The user whose vault it is (default: yourself).", completion: .custom(completeUsers)) var user: String?
        @Flag(name: .customLong("passcode-stdin"), help: "Read the current passcode, then the new one, one line each, from standard input.")
        var passcodeStdin = false

        func validate() throws { _ = try oneUser(name, user, verb: "change the passcode of", defaultSelf: true) }

        func run() throws {
            let user = try oneUser(name, user, verb: "change the passcode of", defaultSelf: true)
            let current: String
            let new: String
            if passcodeStdin {
                current = try PasscodeInput.line("current passcode")
                new = try PasscodeInput.line("new passcode")
            } else {
                current = try PasscodeInput.prompt("Current passcode: ")
                new = try PasscodeInput.promptNew()
            }
            try printResults(try global.call(.setPasscode, PasscodeRequest(user: user, current: current, new: new), ActionReply.self))
        }
    }
}
