// The verbs that change registrations (administrators): register, credentials,
// unregister, and where the policy-server credentials they send come from.

import ArgumentParser
import LockwipeCore
import LockwipeProtocol

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

struct Register: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "register",
        abstract: "Register a user's data directories (administrators).",
        discussion: """
            Missing directories are created, owned by the user, mode 0700. All or nothing: on any \
            problem nothing changes. When every directory is empty (or new) on a filesystem with \
            fscrypt (ext4 -O encrypt, f2fs), the vault is encrypted (fscrypt v2, a fresh 512-bit \
            key wrapped by the default passcode, or by --passcode-stdin's); otherwise all of \
            them get the permission lock, unless --require-encryption refuses. With a policy server, the registration checks in at once; \
            --token-file (and --client-cert/--client-key) give the credentials it uses, stored \
            root-only in the state directory and never shown; with [server.oauth], \
            --refresh-token-file gives an OAuth 2.0 refresh token instead, which lockwiped \
            trades for access tokens (and stores again whenever the server rotates it). \
            Change them later with `lockwipectl credentials`.
            """)
    @OptionGroup var global: GlobalOptions
    @Argument(help: ArgumentHelp("The Unix user.", valueName: "user"), completion: .custom(completeSystemUsers)) var name: String?
    @Option(help: "The Unix user.", completion: .custom(completeSystemUsers)) var user: String?
    @Option(name: .customLong("dir"), help: ArgumentHelp("A data directory (absolute path); repeat for more.", valueName: "path"), completion: .directory)
    var directories: [String] = []
    @OptionGroup var credentials: CredentialOptions
    @Flag(name: .customLong("require-encryption"), help: "Refuse unless every directory can become an encrypted (fscrypt) vault.")
    var requireEncryption = false
    @Flag(name: .customLong("passcode-stdin"), help: "Read the user's first vault passcode from standard input (one line).")
    var passcodeStdin = false
    @Option(
        name: .customLong("outbox"),
        help: ArgumentHelp(
            "The vault's outbox, relative to each directory, in place of [outbox] directory: what its applications have not yet uploaded, sealed to the organisation before a lock or wipe (docs/outbox.md).",
            valueName: "dir"))
    var outbox: String?

    func validate() throws {
        _ = try oneUser(name, user, verb: "register")
        if let outbox, let problem = OutboxConfiguration.directoryProblem(outbox) { throw ValidationError("--outbox \(problem)") }
        if directories.isEmpty { throw ValidationError("give at least one --dir") }
        if passcodeStdin && credentials.readsStandardInput {
            throw ValidationError("--passcode-stdin and --token-file - (or --refresh-token-file -) cannot both read standard input")
        }
    }

    func run() throws {
        let user = try oneUser(name, user, verb: "register")
        let c = try credentials.read()
        let passcode = passcodeStdin ? try PasscodeInput.line("passcode") : nil
        try printResults(
            try global.call(
                .register,
                RegisterRequest(
                    user: user, directories: directories, token: c.token, clientCertificate: c.certificate, clientKey: c.key,
                    requireEncryption: requireEncryption ? true : nil, passcode: passcode, refreshToken: c.refreshToken, outbox: outbox),
                ActionReply.self))
    }
}

struct Credentials: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "credentials",
        abstract: "Replace the policy-server credentials of a registration (administrators), e.g. to rotate its token.",
        discussion: """
            Replaces all stored credentials: what is not given is removed (--clear removes \
            everything). The registration then checks in with the new ones. Re-enrol a \
            registration whose OAuth refresh token the token endpoint refused (invalid_grant) \
            with a new --refresh-token-file. The values are \
            never printed, logged or shown by status, which only says which kinds are stored.
            """)
    @OptionGroup var global: GlobalOptions
    @Argument(help: ArgumentHelp("The user.", valueName: "user"), completion: .custom(completeUsers)) var name: String?
    @Option(help: "The user.", completion: .custom(completeUsers)) var user: String?
    @OptionGroup var credentials: CredentialOptions
    @Flag(help: "Remove all credentials.") var clear = false

    func validate() throws {
        _ = try oneUser(name, user, verb: "set the credentials of")
        if clear == !credentials.isEmpty { throw ValidationError("give --token-file, --refresh-token-file and/or --client-cert/--client-key, or --clear") }
    }

    func run() throws {
        let user = try oneUser(name, user, verb: "set the credentials of")
        let c = try credentials.read()
        try printResults(
            try global.call(
                .setCredentials,
                CredentialsRequest(
                    user: user, token: c.token, clientCertificate: c.certificate, clientKey: c.key, refreshToken: c.refreshToken),
                ActionReply.self))
    }
}

struct Unregister: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unregister",
        abstract: "Stop protecting a user's data (administrators); the directories stay as they are.")
    @OptionGroup var global: GlobalOptions
    @Argument(help: ArgumentHelp("The users.", valueName: "user"), completion: .custom(completeUsers)) var users: [String] = []
    @Option(help: "The user.", completion: .custom(completeUsers)) var user: String?

    func validate() throws {
        if namedUsers(users, user).isEmpty { throw ValidationError("give the user to unregister (lockwipectl unregister USER)") }
    }

    func run() throws {
        try forEachUser(namedUsers(users, user)) { name in
            try printResults(try global.call(.unregister, UserParameter(user: name), ActionReply.self))
        }
    }
}

/// Where a registration's policy-server credentials come from: files, never the command
/// line (argv is visible to every local user in /proc).
struct CredentialOptions: ParsableArguments {
    @Option(
        name: .customLong("token-file"),
        help: ArgumentHelp(
            "File holding the bearer token for the policy server ('-' reads standard input); surrounding whitespace is ignored.",
            valueName: "path"), completion: .file())
    var tokenFile: String?
    @Option(
        name: .customLong("refresh-token-file"),
        help: ArgumentHelp(
            "File holding an OAuth 2.0 refresh token ('-' reads standard input); lockwiped trades it for access tokens at [server.oauth] token_url.",
            valueName: "path"), completion: .file())
    var refreshTokenFile: String?
    @Option(name: .customLong("client-cert"), help: ArgumentHelp("PEM client certificate (chain) for TLS client authentication.", valueName: "path"), completion: .file())
    var clientCertificateFile: String?
    @Option(name: .customLong("client-key"), help: ArgumentHelp("PEM private key of --client-cert (unencrypted).", valueName: "path"), completion: .file())
    var clientKeyFile: String?

    func validate() throws {
        if (clientCertificateFile == nil) != (clientKeyFile == nil) { throw ValidationError("--client-cert and --client-key go together") }
        if tokenFile == "-" && refreshTokenFile == "-" { throw ValidationError("--token-file - and --refresh-token-file - cannot both read standard input") }
    }

    var isEmpty: Bool { tokenFile == nil && refreshTokenFile == nil && clientCertificateFile == nil && clientKeyFile == nil }

    /// Reads standard input (a passcode cannot come from there too).
    var readsStandardInput: Bool { tokenFile == "-" || refreshTokenFile == "-" }

    /// The token and PEM texts, read here so that only their contents reach the daemon.
    func read() throws -> (token: String?, certificate: String?, key: String?, refreshToken: String?) {
        let token = try tokenFile.map { try readSecret($0, what: "token").trimmingWhitespace() }
        if let token, token.isEmpty {
            throw CommandFailure(code: ExitStatus.usage, message: "the token file \(tokenFile!) is empty (only blanks): it must hold the token")
        }
        let refreshToken = try refreshTokenFile.map { try readSecret($0, what: "refresh token").trimmingWhitespace() }
        if let refreshToken, refreshToken.isEmpty {
            throw CommandFailure(code: ExitStatus.usage, message: "the refresh token file \(refreshTokenFile!) is empty")
        }
        return (
            token, try clientCertificateFile.map { try readSecret($0, what: "client certificate") },
            try clientKeyFile.map { try readSecret($0, what: "client key") }, refreshToken
        )
    }

    private func readSecret(_ path: String, what: String) throws -> String {
        let data = path == "-" ? try UserFile.readStandardInput(what: what) : try UserFile.contents(path, what: what)
        let file = path == "-" ? "standard input" : "the \(what) file \(path)"
        guard data.count <= 32_768 else { throw CommandFailure(code: ExitStatus.usage, message: "\(file) is larger than 32 KiB") }
        guard !data.isEmpty else { throw CommandFailure(code: ExitStatus.usage, message: "\(file) is empty: it must hold the \(what)") }
        guard let text = String(data: data, encoding: .utf8) else {
            throw CommandFailure(code: ExitStatus.usage, message: "\(file) is not UTF-8 text")
        }
        return text
    }
}
