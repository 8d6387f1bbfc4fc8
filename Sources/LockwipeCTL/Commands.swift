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

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the policy and every registration you may see (the verb when none is given).",
        discussion: """
            Exits 3 when a registration shown is in state lock-failed (its vault is NOT locked), \
            as systemctl status exits 3 for a unit that is not active; the report is printed all the same.
            """)
    @OptionGroup var global: GlobalOptions
    @Argument(help: ArgumentHelp("Only these users' registrations.", valueName: "user"), completion: .custom(completeUsers))
    var users: [String] = []
    @Option(help: "Only this user's registration.", completion: .custom(completeUsers)) var user: String?
    @Flag(help: "Print the stable JSON contract instead of text (--json=short: on one line; --json=pretty, as --json: indented).")
    var json = false

    func run() throws {
        let names = namedUsers(users, user)
        var report = try global.call(.getStatus, StatusRequest(user: names.count == 1 ? names[0] : nil), StatusReport.self)
        if names.count > 1 {
            if let missing = names.first(where: { n in !report.registrations.contains { $0.user == n } }) {
                throw CommandFailure(code: ExitStatus.failed, message: "no registration for user \(missing)")
            }
            report.registrations = report.registrations.filter { names.contains($0.user) }
        }
        try printStatus(report)
        let failed = report.registrations.filter { $0.state == .lockFailed }.map(\.user)
        if !failed.isEmpty {
            throw CommandFailure(code: ExitStatus.lockFailed, message: json ? "" : "the lock of \(failed.joined(separator: ", ")) failed: NOT locked")
        }
    }

    private func printStatus(_ report: StatusReport) throws {
        Pager.start()
        if json { return try printJSON(report) }
        let p = report.policy
        let lock = Policy.threshold(.lock, days: p.offlineDaysBeforeLock) + (p.offlineDaysBeforeLock > 0 ? " offline" : "")
        let wipe = Policy.threshold(.wipe, days: p.offlineDaysBeforeWipe) + (p.offlineDaysBeforeWipe > 0 ? " offline" : "")
        print("Policy:  \(lock), \(wipe) (source: \(p.source))")
        print(
            "Server:  \(report.server.configured ? report.server.url ?? "configured" : "not configured")"
                + (report.server.insecureHttp ? " (INSECURE: plain http, allow_insecure_http = true)" : ""))
        if report.registrations.isEmpty {
            print("No registrations.")
        } else {
            var rows = [["USER", "UID", "STATE", "PROTECTION", "OFFLINE", "LAST CONTACT", "NEXT"]]
            for r in report.registrations {
                var state = r.state.rawValue
                if let t = r.lockTrigger { state += " (\(t.rawValue))" }
                if r.state == .lockFailed || r.state.isWipeCommitted { state = Terminal.red(state) }
                let next = r.nextAction.map { "\($0.action.rawValue) \(relative($0.at))" } ?? "-"
                rows.append([
                    r.user, String(r.uid), state, r.protection.rawValue, RelativeTime.format(seconds: r.offlineSeconds),
                    relative(r.lastContact), next,
                ])
            }
            print()
            print(table(rows))
            if report.server.configured {
                var check = [["USER", "POLICY", "CREDENTIALS", "LAST CONTACT", "LAST ATTEMPT", "NEXT CHECK-IN"]]
                for r in report.registrations {
                    let policy =
                        r.policy.map { p in
                            "\(p.offlineDaysBeforeLock == 0 ? "-" : "\(p.offlineDaysBeforeLock)d")/\(p.offlineDaysBeforeWipe == 0 ? "-" : "\(p.offlineDaysBeforeWipe)d") (\(p.source))"
                        } ?? "-"
                    let attempt = r.lastAttempt.map { "\(relative($0)): \(r.lastError == nil ? "ok" : "failed")" } ?? "never"
                    check.append([
                        r.user, policy, r.credentials ?? "-", "\(r.lastContact) (\(relative(r.lastContact)))", attempt,
                        r.nextCheckIn.map { relative($0) } ?? "-",
                    ])
                }
                print()
                print(table(check))
            }
            for r in report.registrations {
                if let w = r.warning {
                    print(
                        "\(r.user): "
                            + Terminal.yellow(
                                "warning: \(w.action == .lock ? "LOCKS" : "WIPES") \(relative(w.at)) (\(w.at)) unless this machine checks in with the policy server"))
                }
                if let at = r.logoutLockAt { print("\(r.user): no login session: locks (lock_timeout) \(relative(at))") }
                if r.blocked { print("\(r.user): " + Terminal.red("BLOCKED by the policy server (\(r.blockedCode ?? "blocked")); data untouched")) }
                if let e = r.vaultError {
                    print(
                        "\(r.user): "
                            + Terminal.red(
                                (r.state == .lockFailed ? "LOCK FAILED, the vault is NOT locked (retried): " : "VAULT UNREACHABLE, nothing is done to it: ") + e))
                }
                if let e = r.lastError, report.server.configured { print("\(r.user): last check-in: \(e)") }
                if let p = r.wipeProgress { print("\(r.user): \(describe(p))") }
                if let wrapping = r.keyWrapping, !r.state.isWipeCommitted {
                    var line = "\(r.user): encrypted vault; key wrapped by " + (wrapping == "machine" ? "the machine key (default passcode)" : "the user's passcode")
                    if let e = r.passcodeExpires { line += "; passcode expires \(relative(e)) (\(e))" }
                    if let f = r.failedUnlocks, f > 0 { line += "; \(f) failed unlock(s)" + (r.retryLimit.map { $0 > 0 ? " of \($0) allowed" : "" } ?? "") }
                    print(line)
                }
                if r.wipeProgress == nil, let w = r.wipe, !w.complete {
                    print(
                        "\(r.user): " + Terminal.red("last wipe INCOMPLETE, \(w.skipped.count) entries not removed (lockwipectl history --user \(r.user))"))
                }
                if r.wipeProgress == nil, let w = r.wipe, !w.caveats.isEmpty {
                    // The overwrite could not reach every old copy: said until the next wipe.
                    let kinds = Set(w.caveats.map(\.kind.rawValue)).sorted().joined(separator: ", ")
                    print("\(r.user): last wipe's caveats: \(kinds); old copies of the data may remain (lockwipectl certificate --user \(r.user))")
                }
            }
        }
        for w in report.warnings { print(Terminal.yellow("warning: \(w)")) }
    }
}

/// "alice: will end 3 processes: 1201 bash, 1250 vim, 1302 sleep" (the first 10, then a count).
func processLines(_ p: ActionResult) -> [String] {
    guard let list = p.processes, !list.isEmpty else { return [] }
    let shown = list.prefix(10).map { "\($0.pid) \($0.comm)" }.joined(separator: ", ")
    let more = list.count > 10 ? " and \(list.count - 10) more" : ""
    return ["\(p.user): will end \(list.count) process\(list.count == 1 ? "" : "es"): \(shown)\(more)"]
}

/// A running wipe's progress, the same words in `status` and on `wipe`'s progress line,
/// most telling first so that a line cut to the terminal's width keeps the ETA:
/// "wiping: 1200/10000 files, 120 MiB of 1.0 GiB, ETA 2s, 410 MiB/s, 1100 entries removed";
/// "wiping: 900 entries removed, ETA 3s, 300 entries/s" when nothing is overwritten.
func describe(_ p: WipeProgressInfo) -> String {
    if p.phase == "counting" { return "wiping: counting what to overwrite (\(TextFormat.fixed(p.elapsedSeconds, decimals: 0)) s)" }
    let eta = p.etaSeconds.map { "ETA \(RelativeTime.format(seconds: Int64($0.rounded(.up))))" }
    var parts: [String?]
    if let total = p.bytesTotal {
        let files = p.filesTotal.map { "\(p.filesOverwritten)/\($0) files" } ?? "\(p.filesOverwritten) files"
        parts = [
            "wiping: \(files)", "\(TextFormat.bytes(p.bytesOverwritten)) of \(TextFormat.bytes(total))", eta,
            p.bytesPerSecond > 0 ? "\(TextFormat.bytes(Int64(p.bytesPerSecond)))/s" : nil, "\(p.entriesRemoved) entries removed",
        ]
    } else {
        parts = [
            "wiping: \(p.entriesRemoved) entries removed", eta,
            p.entriesPerSecond > 0 ? TextFormat.fixed(p.entriesPerSecond, decimals: 0) + " entries/s" : nil,
        ]
    }
    if p.skipped > 0 { parts.append("\(p.skipped) skipped") }
    return parts.compactMap { $0 }.joined(separator: ", ")
}

struct Lock: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Lock a registration's vault now.",
        discussion: """
            Users may lock their own registration (without a name, theirs); administrators any, \
            or --all. First lists the processes the lock will end (those of the users whose \
            vaults it locks, [lock] terminate_processes). --all asks for confirmation on a \
            terminal and needs --yes otherwise, as wipe does.
            """)
    @OptionGroup var global: GlobalOptions
    @Argument(help: ArgumentHelp("The users to lock.", valueName: "user"), completion: .custom(completeUsers)) var users: [String] = []
    @Option(help: "The user to lock.", completion: .custom(completeUsers)) var user: String?
    @Flag(help: "Lock every registration.") var all = false
    @Flag(help: "With --all: do not ask for confirmation.") var yes = false

    func validate() throws {
        if all && !namedUsers(users, user).isEmpty { throw ValidationError("give user names or --all, not both") }
    }

    func run() throws {
        let names = namedUsers(users, user)
        // --all, or (no name) the caller's own registration: lockwiped decides whose.
        let targets = names.isEmpty ? [TargetSelection(all: all ? true : nil)] : names.map { TargetSelection(user: $0) }
        // First what it will end (processes may come and go until the lock itself).
        var previews: [ActionResult] = []
        let labels = names.isEmpty ? ["all"] : names
        let previewed =
            labels.count == 1
            ? (labels, nil)
            : eachUser(labels) { name in
                var target = targets[names.firstIndex(of: name) ?? 0]
                target.preview = true
                previews += try global.call(.lock, target, ActionReply.self).results
            }
        if labels.count == 1 {
            var target = targets[0]
            target.preview = true
            do {
                previews = try global.call(.lock, target, ActionReply.self).results
            } catch let failure as CommandFailure where names.isEmpty && !all && failure.code == ExitStatus.usage {
                // An administrator has no registration of her own to mean.
                throw CommandFailure(code: ExitStatus.usage, message: "give the users to lock (lockwipectl lock NAME ...), or --all")
            }
        }
        for p in previews { for line in processLines(p) { print(line) } }
        if all {
            let ending = previews.reduce(0) { $0 + ($1.processes?.count ?? 0) }
            try confirm(
                "Lock EVERY registration (\(previews.count)) and end \(ending) process\(ending == 1 ? "" : "es") of their users?", yes: yes,
                undoable: true)
        }
        // Only those whose preview worked (the others' failures are printed already).
        try forEachUser(previewed.0) { name in
            try printResults(try global.call(.lock, targets[names.firstIndex(of: name) ?? 0], ActionReply.self))
        }
        if let failure = previewed.1 { throw failure }
    }
}

struct Unlock: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Unlock a locked registration.",
        discussion: """
            A permission lock: administrators only; the offline clock restarts. An encrypted \
            vault: an administrator, or the user themselves when they locked it (or it locked \
            on logout); after a lock by the policy server or the offline policy a user's unlock \
            first checks in, and succeeds only if the server lifts the lock. A vault key \
            protected by a passcode needs it: asked without echo on a terminal, or the first \
            line of standard input with --passcode-stdin. Wrong passcodes are counted; the \
            passcode policy's retry_limit wipes the vault. An expired passcode must be replaced \
            in the same unlock: on a terminal you are asked for a new one, with \
            --passcode-stdin add --new-passcode-stdin and give it on the second line.
            """)
    @OptionGroup var global: GlobalOptions
    @Argument(help: ArgumentHelp("The users to unlock (default: yourself).", valueName: "user"), completion: .custom(completeUsers))
    var users: [String] = []
    @Option(help: "The user to unlock (default: yourself).", completion: .custom(completeUsers)) var user: String?
    @Flag(name: .customLong("passcode-stdin"), help: "Read the passcode from the first line of standard input.")
    var passcodeStdin = false
    @Flag(name: .customLong("new-passcode-stdin"), help: "Also read a new passcode from the second line (replaces an expired or current one).")
    var newPasscodeStdin = false

    func validate() throws {
        if newPasscodeStdin && !passcodeStdin { throw ValidationError("--new-passcode-stdin needs --passcode-stdin") }
        if passcodeStdin && namedUsers(users, user).count > 1 { throw ValidationError("--passcode-stdin unlocks one user: name one") }
        if namedUsers(users, user).isEmpty { _ = try oneUser(nil, nil, verb: "unlock", defaultSelf: true) }
    }

    func run() throws {
        let names = namedUsers(users, user)
        try forEachUser(names.isEmpty ? [try oneUser(nil, nil, verb: "unlock", defaultSelf: true)] : names, unlock)
    }

    private func unlock(_ user: String) throws {
        if passcodeStdin {
            let passcode = try PasscodeInput.line("passcode")
            let new = newPasscodeStdin ? try PasscodeInput.line("new passcode") : nil
            return try printResults(try global.call(.unlock, UnlockRequest(user: user, passcode: passcode, newPasscode: new), ActionReply.self))
        }
        // Interactive: ask only for what the vault turns out to need.
        var request = UnlockRequest(user: user)
        while true {
            do {
                return try printResults(try global.call(.unlock, request, ActionReply.self))
            } catch let failure as CommandFailure
                where PasscodeInput.isTerminal && request.passcode == nil
                && failure.error == VarlinkError.passcodeRequiredName
            {
                request.passcode = try PasscodeInput.prompt("Passcode for \(user): ")
            } catch let failure as CommandFailure
                where PasscodeInput.isTerminal && request.newPasscode == nil
                && failure.error == VarlinkError.passcodeExpiredName
            {
                StandardStreams.writeError("The passcode has expired: choose a new one.\n")
                request.newPasscode = try PasscodeInput.promptNew()
            }
        }
    }
}

struct Wipe: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Irreversibly erase a registration's data (administrators; users their own encrypted vault).",
        discussion: """
            Asks for confirmation on a terminal; needs --yes otherwise. Files are overwritten \
            ([wipe] passes, default 1 random pass) and made durable before they are unlinked; \
            symlinks are never followed and other filesystems never entered. An encrypted vault \
            is crypto-erased instead: its key is removed from the kernel and every wrapped copy \
            destroyed first (the report says when), then the ciphertext is unlinked without \
            overwriting. A user who forgot their passcode may wipe their own encrypted vault. \
            Waits until the wipe is done and prints the report; a wipe that could not remove \
            everything exits 1 and stays pending. Meanwhile it shows the progress on standard \
            error (files, bytes, rate and ETA, as lockwipectl status does): one line redrawn \
            on a terminal, a plain line every 3 seconds otherwise, nothing with --quiet. Ctrl-C \
            does not stop the wipe: it goes on in lockwiped (lockwipectl status shows it), and \
            lockwipectl exits 130. If lockwiped stops during the wipe, the wipe is recorded and \
            resumes at its next start.
            """)
    @OptionGroup var global: GlobalOptions
    @Argument(help: ArgumentHelp("The users whose data to wipe.", valueName: "user"), completion: .custom(completeUsers))
    var users: [String] = []
    @Option(help: "The user whose data to wipe.", completion: .custom(completeUsers)) var user: String?
    @Flag(help: "Wipe every registration.") var all = false
    @Flag(help: "Do not ask for confirmation.") var yes = false
    @Flag(
        name: .customLong("dry-run"),
        help: """
            Change nothing: print what the wipe would remove, the media, the mount points it would not enter \
            and the caveats (copy-on-write, snapshots, shared extents, names, flash).
            """)
    var dryRun = false
    @Flag(help: "With --dry-run: print JSON (--json=short: on one line).") var json = false
    @Flag(name: .shortAndLong, help: "Do not show the progress while waiting (the report is still printed).") var quiet = false

    func validate() throws {
        if all == !namedUsers(users, user).isEmpty { throw ValidationError("give user names or --all (one of them)") }
        if json && !dryRun { throw ValidationError("--json goes with --dry-run (a wipe prints its report)") }
    }

    func run() throws {
        let names = namedUsers(users, user)
        // One request per user named (each fails or succeeds on its own), or one for --all.
        let target = { (name: String) in all ? TargetSelection(all: true) : TargetSelection(user: name) }
        if dryRun {
            var previews: [WipePreview] = []
            try forEachUser(all ? ["all"] : names) { name in
                previews += try global.call(.previewWipe, target(name), WipePreviewReply.self).previews
            }
            Pager.start()
            if json { return try printJSON(WipePreviewReply(previews: previews)) }
            for line in previews.flatMap(previewLines) { print(line) }
            print("dry run: nothing was changed")
            return
        }
        try confirm(all ? "Wipe the data of EVERY registered user?" : "Wipe all data of \(names.joined(separator: ", "))?", yes: yes)
        let display = WipeWatch.display(quiet: quiet)
        try forEachUser(all ? ["all"] : names) { name in
            try printResults(try WipeWatch(global: global, user: all ? nil : name, display: display).run(target(name)))
        }
    }
}

/// What `wipe --dry-run` prints for one vault.
func previewLines(_ p: WipePreview) -> [String] {
    let at = "\(p.user): \(p.path)"
    if let problem = p.problem { return ["\(at): \(problem); a wipe would not touch it and would stay pending"] }
    let entries = p.files + p.directories + p.otherEntries
    let floor = p.partial ? "at least " : ""
    var lines: [String] = []
    switch p.method {
    case "crypto-erase":
        lines.append("\(at): would crypto-erase: destroy the vault key, then unlink \(floor)\(entries) entries (ciphertext)")
    case "overwrite":
        lines.append(
            "\(at): would overwrite \(floor)\(p.files) files (\(TextFormat.bytes(p.bytes)), \(p.passes) \(p.pattern) pass\(p.passes == 1 ? "" : "es"))"
                + " and unlink \(floor)\(entries) entries (\(p.directories) director\(p.directories == 1 ? "y" : "ies"), \(p.otherEntries) other)")
    default:
        lines.append("\(at): would unlink \(floor)\(entries) entries without overwriting ([wipe] passes = 0)")
    }
    if let m = p.media {
        var media = "on \(m.filesystem)" + (m.filesystemUUID.map { " (UUID \($0))" } ?? "")
        for d in m.devices {
            var facts = [d.model, d.serial.map { "serial \($0)" }, d.rotational.map { $0 ? "rotational" : "non-rotational" }].compactMap { $0 }
            if let file = d.backingFile { facts.append("backed by \(file)") }
            media += ", device \(d.partition ?? d.name)" + (facts.isEmpty ? "" : " (" + facts.joined(separator: ", ") + ")")
        }
        lines.append("\(at): \(media)")
    }
    lines += p.mountPoints.map { "\(at): would NOT enter \($0) (a mount point of another file system): the wipe would be incomplete" }
    lines += p.caveats.map { "\(at): caveat (\($0.kind.rawValue)): \($0.detail)" }
    return lines
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

struct Register: ParsableCommand {
    static let configuration = CommandConfiguration(
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

    func validate() throws {
        _ = try oneUser(name, user, verb: "register")
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
                    requireEncryption: requireEncryption ? true : nil, passcode: passcode, refreshToken: c.refreshToken), ActionReply.self))
    }
}

struct Credentials: ParsableCommand {
    static let configuration = CommandConfiguration(
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

struct CheckIn: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-in", abstract: "Contact the policy server now, for one registration or all.",
        discussion: """
            Waits for the answers and prints one line per registration. Exits 1 when any \
            check-in was not a successful contact (timeout, TLS or HTTP error, bad answer, \
            blocked). Users may check in their own registration (without a name, theirs).
            """)
    @OptionGroup var global: GlobalOptions
    @Argument(help: ArgumentHelp("Only these users' registrations.", valueName: "user"), completion: .custom(completeUsers))
    var users: [String] = []
    @Option(help: "Only this user's registration.", completion: .custom(completeUsers)) var user: String?

    func run() throws {
        let names = namedUsers(users, user)
        var failed = false
        try forEachUser(names.isEmpty ? [""] : names) { name in
            let reply = try global.call(.checkIn, UserFilter(user: name.isEmpty ? nil : name), ActionReply.self)
            try printResults(reply)
            if reply.results.contains(where: { $0.failed == true }) { failed = true }
        }
        if failed { throw CommandFailure(code: ExitStatus.failed, message: "check-in failed (see above)") }
    }
}

struct PolicyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "policy", abstract: "Show the policy in force.")
    @OptionGroup var global: GlobalOptions
    @Flag(help: "Print JSON (--json=short: on one line).") var json = false

    func run() throws {
        let p = try global.call(.getPolicy, NoParameters(), PolicyInfo.self)
        if json { return try printJSON(p) }
        print(
            table(
                [
                    ["offline_days_before_lock", p.offlineDaysBeforeLock == 0 ? "0 (never)" : "\(p.offlineDaysBeforeLock)"],
                    ["offline_days_before_wipe", p.offlineDaysBeforeWipe == 0 ? "0 (never)" : "\(p.offlineDaysBeforeWipe)"],
                    ["source", p.source],
                ], header: false))
    }
}

struct Certificate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the sanitization certificate of a user's newest wipe attempt (administrators; users their own).",
        discussion: """
            Every wipe attempt, complete or not, leaves a certificate in the state database: \
            host, user, trigger and requester, method type (NIST SP 800-88 words where they \
            apply), tool and version, media (file system, UUID, device model, serial and \
            rotational flag where the kernel exposes them), start and end, result with every \
            exception, the verification made after the wipe and the caveats detected \
            (copy-on-write, snapshots, shared extents, names, flash). history --json carries each \
            certificate on its wipe event.
            """)
    @OptionGroup var global: GlobalOptions
    @Argument(help: ArgumentHelp("The user whose certificate to show (default: yourself).", valueName: "user"), completion: .custom(completeUsers))
    var name: String?
    @Option(help: "The user whose certificate to show (default: yourself).", completion: .custom(completeUsers)) var user: String?
    @Option(help: ArgumentHelp("This certificate instead of the newest.", valueName: "id")) var id: String?
    @Flag(help: "Print JSON (--json=short: on one line).") var json = false

    func validate() throws { _ = try oneUser(name, user, verb: "show the certificate of", defaultSelf: true) }

    func run() throws {
        let user = try oneUser(name, user, verb: "show the certificate of", defaultSelf: true)
        let reply = try global.call(.getCertificate, CertificateRequest(user: user, id: id), CertificateReply.self)
        Pager.start()
        if json { return try printJSON(reply.certificate) }
        print(reply.certificate.textLines.joined(separator: "\n"))
    }
}

struct History: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show the audit history, oldest first.")
    @OptionGroup var global: GlobalOptions
    @Argument(help: ArgumentHelp("Only this user's events.", valueName: "user"), completion: .custom(completeUsers)) var name: String?
    @Option(help: "Only this user's events.", completion: .custom(completeUsers)) var user: String?
    @Option(name: [.customLong("limit"), .customShort("n")], help: ArgumentHelp("At most this many (newest) events; 0 shows none.", valueName: "N"))
    var limit: Int = 1000
    @Option(
        help: ArgumentHelp(
            "Only events at or after TIME: 2026-11-26, '2026-11-26 10:00[:00]' (local time), an ISO 8601 time, -2h, '3d ago', today, yesterday, @EPOCH.",
            valueName: "time"))
    var since: String?
    @Flag(name: [.customLong("follow"), .customShort("f")], help: "After the events so far, print new ones as they come (every second) until interrupted.")
    var follow = false
    @Flag(help: "Print JSON (--json=short: on one line; with --follow, one line per poll).") var json = false

    func validate() throws {
        if limit < 0 { throw ValidationError("--limit must be a number ≥ 0, not \(limit)") }
        if name != nil && user != nil && name != user { throw ValidationError("give one user, as a name or with --user") }
        if let since, SinceTime.parse(since) == nil {
            throw ValidationError("--since: cannot read '\(since)' as a time (2026-11-26, '2026-11-26 10:00', -2h, '3d ago', today, yesterday, @EPOCH)")
        }
    }

    func run() throws {
        try show()
        guard follow else { return }
        // The header once; then only what is new, as `journalctl -f` does.
        output.noLegend = true
        while true {
            sleep(1)
            try show()
        }
    }

    /// Asks for the events (with --follow, after the first time only those not yet
    /// printed); nil when there is nothing new to print.
    private func fetch() throws -> HistoryReply? {
        let first = HistoryFollowing.last == nil
        let from = HistoryFollowing.last ?? since.flatMap { SinceTime.parse($0) }
        var reply = try global.call(
            .getHistory, HistoryRequest(user: name ?? user, limit: first ? limit : 10_000, since: from), HistoryReply.self)
        guard follow else { return reply }
        reply.events = HistoryFollowing.new(reply.events)
        return first || !reply.events.isEmpty ? reply : nil
    }

    private func show() throws {
        guard let reply = try fetch() else { return }
        if !follow { Pager.start() }
        if json { return try printJSON(reply) }
        // UID and REGISTRATION (its id's first 8 digits) tell apart the registrations one
        // name had; "-" for an event that belongs to none. BY: who asked for it on the
        // control socket (the requester's user name, or uid), "-" for lockwiped's own.
        var rows = [["TIME", "USER", "UID", "REGISTRATION", "EVENT", "TRIGGER", "BY", "DETAIL"]]
        for e in reply.events {
            rows.append([
                e.time, e.user, e.uid.map { "\($0)" } ?? "-", e.registrationId.map { String($0.prefix(8)) } ?? "-", e.kind, e.trigger?.rawValue ?? "-",
                e.requester.map { Self.userName($0.uid) } ?? "-", e.detail,
            ])
        }
        print(table(rows))
        if follow { fflush(nil) }
    }

    /// `uid`'s user name on this machine, or the number when it has none.
    static func userName(_ uid: UInt32) -> String {
        var pwd = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16_384)
        guard getpwuid_r(uid, &pwd, &buffer, buffer.count, &result) == 0, result != nil else { return "\(uid)" }
        return String(cString: pwd.pw_name)
    }
}
