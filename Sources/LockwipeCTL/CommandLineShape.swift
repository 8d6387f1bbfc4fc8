import ArgumentParser

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// How JSON is printed: `--json` and `--json=pretty` indent, `--json=short` prints one line
/// (systemctl's `--json=`).
enum JSONStyle: String {
    case pretty, short
}

/// What the global options decided for this run, set once before the verb runs.
struct OutputSettings {
    var json: JSONStyle = .pretty
    var noPager = false
    var noLegend = false
}

nonisolated(unsafe) var output = OutputSettings()

/// systemctl's command-line habits on top of ArgumentParser, which takes options only
/// behind the (innermost) verb and knows no default verb:
/// - the global options (`--socket`, `--json[=pretty|short|off]`, `--no-pager`,
///   `--no-legend`) may stand anywhere on the line: they are moved behind the verb;
/// - no verb means `status` (`lockwipectl`, `lockwipectl --json`, `lockwipectl alice`
///   is not: a name where a verb stands is an unknown verb);
/// - a word that is no verb is said to be one ("Unknown verb 'stauts'"), with the
///   nearest verb when one is close;
/// - `--limit -5` and `--since -2h` reach the option as its value (ArgumentParser would
///   take `-5` for an option and say the value is missing), so that the check can say
///   what is wrong.
func shapedArguments(_ arguments: [String]) throws -> [String] {
    // ArgumentParser's own entry points (completion scripts call `---completion`).
    if let first = arguments.first,
        first == "---completion" || first.hasPrefix("--generate-completion-script") || first == "--experimental-dump-help"
    {
        return arguments
    }
    var rest: [String] = []
    var globals: [String] = []
    var json = false
    var i = 0
    while i < arguments.count {
        let a = arguments[i]
        i += 1
        if a == "--" {
            rest += arguments[(i - 1)...]
            break
        }
        switch a {
        case "--socket" where i < arguments.count:
            globals += [a, arguments[i]]
            i += 1
        case _ where a.hasPrefix("--socket="):
            globals.append(a)
        case "--json":
            json = true
            output.json = .pretty
        case _ where a.hasPrefix("--json="):
            let value = String(a.dropFirst("--json=".count))
            if value == "off" {
                json = false
            } else if let style = JSONStyle(rawValue: value) {
                json = true
                output.json = style
            } else {
                throw CommandFailure(code: ExitStatus.usage, message: "--json= takes pretty, short or off, not '\(value)'")
            }
        case "--no-pager":
            output.noPager = true
            globals.append(a)
        case "--no-legend":
            output.noLegend = true
            globals.append(a)
        case "--since" where i < arguments.count:
            // Its value may look like an option ("-2h").
            rest.append("--since=\(arguments[i])")
            i += 1
        case "--limit", "-n":
            // A negative number is the option's value, not an option.
            if i < arguments.count, arguments[i].count > 1, arguments[i].hasPrefix("-"), Int(arguments[i]) != nil {
                rest.append("--limit=\(arguments[i])")
                i += 1
            } else {
                rest.append(a)
            }
        default:
            rest.append(a)
        }
    }
    if json { globals.append("--json") }

    let rootOnly: Set<String> = ["-h", "--help", "-help", "--help-hidden", "--version"]
    var path: [String] = []
    if let first = rest.first, !first.hasPrefix("-") {
        if first == "help" { return rest }
        guard let verb = Verbs.command(named: first, in: LockwipeCTL.configuration.subcommands) else {
            throw CommandFailure(code: ExitStatus.usage, message: Verbs.unknownVerbMessage(first))
        }
        path.append(rest.removeFirst())
        if let sub = rest.first, Verbs.command(named: sub, in: verb.configuration.subcommands) != nil {
            path.append(rest.removeFirst())
        }
    } else if let first = rest.first, rootOnly.contains(first) {
        return rest
    } else {
        path = ["status"]
    }
    return path + globals + rest
}

enum Verbs {
    static func command(named name: String, in commands: [ParsableCommand.Type]) -> ParsableCommand.Type? {
        commands.first { $0._commandName == name }
    }

    static var names: [String] { LockwipeCTL.configuration.subcommands.map { $0._commandName } }

    /// "Unknown verb 'stauts'; did you mean 'status'? (lockwipectl --help lists the verbs)".
    static func unknownVerbMessage(_ word: String) -> String {
        let nearest = names.map { ($0, distance($0, word)) }.min { $0.1 < $1.1 }
        let hint = nearest.flatMap { $0.1 <= max(1, word.count / 3) ? "; did you mean '\($0.0)'?" : nil } ?? "."
        return "Unknown verb '\(word)'\(hint) (lockwipectl --help lists the verbs)"
    }

    /// Levenshtein distance, with a swap of neighbours counted once ("stauts").
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        if a.isEmpty || b.isEmpty { return max(a.count, b.count) }
        var d = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { d[i][0] = i }
        for j in 0...b.count { d[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] { d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1) }
            }
        }
        return d[a.count][b.count]
    }
}

/// The users a verb names: `--user`, then its positional names, each once.
func namedUsers(_ positional: [String], _ option: String?) -> [String] {
    var seen = Set<String>()
    return ((option.map { [$0] } ?? []) + positional).filter { seen.insert($0).inserted }
}

/// Runs `body` for each user, on to the next after a failure (a lock of `alice bob` must
/// not leave bob unlocked because alice's failed); every failure is printed, and the run
/// fails with the first one's code.
func forEachUser(_ users: [String], _ body: (String) throws -> Void) throws {
    if users.count <= 1 {
        for u in users { try body(u) }
        return
    }
    if let failure = eachUser(users, body).failure { throw failure }
}

/// `forEachUser`'s loop: the users `body` succeeded for, and the failure to end with.
func eachUser(_ users: [String], _ body: (String) throws -> Void) -> (done: [String], failure: CommandFailure?) {
    var first: CommandFailure? = nil
    var done: [String] = []
    for u in users {
        do {
            try body(u)
            done.append(u)
        } catch let failure as CommandFailure {
            StandardStreams.writeError("lockwipectl: \(u): \(failure.message)\n")
            if first == nil { first = CommandFailure(code: failure.code, message: "failed for \(u) (see above)", error: failure.error) }
        } catch {
            StandardStreams.writeError("lockwipectl: \(u): \(error)\n")
            if first == nil { first = CommandFailure(code: ExitStatus.failed, message: "failed for \(u) (see above)") }
        }
    }
    return (done, first)
}

/// The one user a verb acts on: its name or `--user` (both the same, or one of them);
/// with `defaultSelf`, a caller other than root who names nobody means herself (the only
/// one an ordinary user may name there).
func oneUser(_ positional: String?, _ option: String?, verb: String, defaultSelf: Bool = false) throws -> String {
    switch (positional, option) {
    case (let p?, let o?) where p != o: throw ValidationError("give one user to \(verb), as a name or with --user")
    case (let p?, _): return p
    case (nil, let o?): return o
    case (nil, nil):
        if defaultSelf, getuid() != 0, let me = ownUserName() { return me }
        throw ValidationError("give the user to \(verb) (as a name, or with --user)")
    }
}

/// The name of the calling user, when her uid has one.
func ownUserName() -> String? {
    var pwd = passwd()
    var result: UnsafeMutablePointer<passwd>?
    var buffer = [CChar](repeating: 0, count: 16_384)
    guard getpwuid_r(getuid(), &pwd, &buffer, buffer.count, &result) == 0, result != nil else { return nil }
    return String(cString: pwd.pw_name)
}
