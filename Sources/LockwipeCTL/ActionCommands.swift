// The verbs that act on vaults: lock, unlock, wipe, and check-in (contact the policy
// server now).

import ArgumentParser
import LockwipeCore
import LockwipeProtocol

struct Lock: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lock",
        abstract: "Lock a registration's vault now.",
        discussion: """
            Users may lock their own registration (without a name, theirs); administrators any, \
            or --all. First lists the processes the lock will end (those of the users whose \
            vaults it locks, [lock] terminate_processes). --all asks for confirmation on a \
            terminal and needs --yes otherwise, as wipe does; so does a lock you cannot undo \
            yourself (a user's own lock of a permission vault: only an administrator unlocks \
            it), which is said first.
            """)
    @OptionGroup var global: GlobalOptions
    @Argument(help: ArgumentHelp("The users to lock.", valueName: "user"), completion: .custom(completeUsers)) var users: [String] = []
    @Option(help: "The user to lock.", completion: .custom(completeUsers)) var user: String?
    @Flag(help: "Lock every registration.") var all = false
    @Flag(help: "Do not ask for confirmation (--all, or a lock you cannot undo yourself).") var yes = false

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
        // A lock the one asking cannot undo herself is said first, and asked for (a user's
        // own permission lock: only an administrator unlocks it).
        let lockedOut = previews.filter { $0.undoneByAsker == false && $0.state?.isLockCommitted != true }
        for p in lockedOut { print("\(p.user): once locked, \(p.undo ?? "only an administrator can unlock it")") }
        if !all, !lockedOut.isEmpty {
            try confirm("Lock \(lockedOut.map(\.user).joined(separator: ", ")), which you cannot unlock yourself?", yes: yes, undoable: true)
        }
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
        commandName: "unlock",
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
        commandName: "wipe",
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
            and the caveats (copy-on-write, snapshots, shared extents, names, flash). Without a user name, \
            your own registration.
            """)
    var dryRun = false
    @Flag(help: "With --dry-run: print JSON (--json=short: on one line).") var json = false
    @Flag(name: .shortAndLong, help: "Do not show the progress while waiting (the report is still printed).") var quiet = false

    func validate() throws {
        let named = !namedUsers(users, user).isEmpty
        if all && named { throw ValidationError("give user names or --all, not both") }
        // A wipe names whom it erases; a dry run changes nothing, and without a name
        // previews the caller's own registration, as lock and check-in mean her own.
        if !all && !named && !dryRun { throw ValidationError("give the users whose data to wipe, or --all (--dry-run alone previews your own)") }
        if json && !dryRun { throw ValidationError("--json goes with --dry-run (a wipe prints its report)") }
    }

    func run() throws {
        let names = namedUsers(users, user)
        // One request per user named (each fails or succeeds on its own), or one for --all.
        let target = { (name: String) in all ? TargetSelection(all: true) : TargetSelection(user: name) }
        if dryRun {
            var previews: [WipePreview] = []
            if !all && names.isEmpty {
                // The caller's own registration: lockwiped decides whose.
                do {
                    previews = try global.call(.previewWipe, TargetSelection(), WipePreviewReply.self).previews
                } catch let failure as CommandFailure where failure.code == ExitStatus.usage {
                    throw CommandFailure(code: ExitStatus.usage, message: "give the users whose wipe to preview (lockwipectl wipe --dry-run NAME ...), or --all")
                }
            }
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

struct CheckIn: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-in", abstract: "Contact the policy server now, for one registration or all.",
        discussion: """
            Waits for the answers and prints one line per registration. Exits 1 when any \
            check-in was not a successful contact (timeout, TLS or HTTP error, bad answer, \
            blocked), or a wipe the server ordered, or one ordered before, is incomplete \
            (wipe-pending). Users may check in their own registration (without a name, theirs).
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
