import ArgumentParser
import Foundation
import LockwipeCore
import LockwipeProtocol

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show the policy and every registration you may see.")
    @OptionGroup var global: GlobalOptions
    @Option(help: "Only this user's registration.") var user: String?
    @Flag(help: "Print the stable JSON contract instead of text.") var json = false

    func run() throws {
        let report = try global.call(.getStatus, UserFilter(user: user), StatusReport.self)
        if json { return try printJSON(report) }
        let p = report.policy
        let lock = p.offlineDaysBeforeLock > 0 ? "lock after \(p.offlineDaysBeforeLock)d offline" : "never lock"
        let wipe = p.offlineDaysBeforeWipe > 0 ? "wipe after \(p.offlineDaysBeforeWipe)d offline" : "never wipe"
        print("Policy:  \(lock), \(wipe) (source: \(p.source))")
        print("Server:  \(report.server.configured ? report.server.url ?? "configured" : "not configured")")
        if report.registrations.isEmpty {
            print("No registrations.")
        } else {
            var rows = [["USER", "UID", "STATE", "PROTECTION", "OFFLINE", "LAST CONTACT", "NEXT"]]
            for r in report.registrations {
                var state = r.state.rawValue
                if let t = r.lockTrigger { state += " (\(t.rawValue))" }
                let next = r.nextAction.map { "\($0.action.rawValue) \(relative($0.at))" } ?? "-"
                rows.append([r.user, String(r.uid), state, r.protection.rawValue, RelativeTime.format(seconds: r.offlineSeconds),
                             relative(r.lastContact), next])
            }
            print()
            print(table(rows))
            for r in report.registrations {
                if let p = r.wipeProgress { print("\(r.user): \(describe(p))") }
                if r.wipeProgress == nil, let w = r.wipe, !w.complete {
                    print("\(r.user): last wipe INCOMPLETE, \(w.skipped.count) entries not removed (lockwipectl history --user \(r.user))")
                }
            }
        }
        for w in report.warnings { print("warning: \(w)") }
    }
}

/// "wiping: 1200/10000 files, 120 MiB of 1.0 GiB at 410 MiB/s, ETA 2s".
func describe(_ p: WipeProgressInfo) -> String {
    if p.phase == "counting" { return "wiping: counting what to overwrite (\(String(format: "%.0f", p.elapsedSeconds)) s)" }
    var parts = ["wiping: \(p.entriesRemoved) entries removed"]
    if let total = p.bytesTotal {
        let files = p.filesTotal.map { "\(p.filesOverwritten)/\($0) files" } ?? "\(p.filesOverwritten) files"
        parts.append("\(files), \(bytes(p.bytesOverwritten)) of \(bytes(total)) overwritten at \(bytes(Int64(p.bytesPerSecond)))/s")
    } else {
        parts.append(String(format: "%.0f entries/s", p.entriesPerSecond))
    }
    if let eta = p.etaSeconds { parts.append("ETA \(RelativeTime.format(seconds: Int64(eta.rounded(.up))))") }
    if p.skipped > 0 { parts.append("\(p.skipped) skipped") }
    return parts.joined(separator: ", ")
}

/// Bytes in binary units, one decimal.
func bytes(_ n: Int64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"]
    var value = Double(n)
    var unit = 0
    while value >= 1024, unit < units.count - 1 {
        value /= 1024
        unit += 1
    }
    return unit == 0 ? "\(n) B" : String(format: "%.1f", value) + " " + units[unit]
}

struct Lock: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Lock a registration's vault now.",
        discussion: "Users may lock their own registration; administrators any, or --all.")
    @OptionGroup var global: GlobalOptions
    @Option(help: "The user to lock.") var user: String?
    @Flag(help: "Lock every registration.") var all = false

    func validate() throws {
        if all == (user != nil) { throw ValidationError("give exactly one of --user or --all") }
    }

    func run() throws {
        try printResults(try global.call(.lock, TargetSelection(user: user, all: all ? true : nil), ActionReply.self))
    }
}

struct Unlock: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Unlock a locked registration (administrators); restarts its offline clock.")
    @OptionGroup var global: GlobalOptions
    @Option(help: "The user to unlock.") var user: String

    func run() throws {
        try printResults(try global.call(.unlock, UserParameter(user: user), ActionReply.self))
    }
}

struct Wipe: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Irreversibly erase a registration's data (administrators).",
        discussion: """
            Asks for confirmation on a terminal; needs --yes otherwise. Files are overwritten \
            ([wipe] passes, default 1 random pass) and made durable before they are unlinked; \
            symlinks are never followed and other filesystems never entered. Waits until the \
            wipe is done (lockwipectl status shows its progress meanwhile) and prints the report; \
            a wipe that could not remove everything exits 1 and stays pending.
            """)
    @OptionGroup var global: GlobalOptions
    @Option(help: "The user whose data to wipe.") var user: String?
    @Flag(help: "Wipe every registration.") var all = false
    @Flag(help: "Do not ask for confirmation.") var yes = false

    func validate() throws {
        if all == (user != nil) { throw ValidationError("give exactly one of --user or --all") }
    }

    func run() throws {
        try confirm(all ? "Wipe the data of EVERY registered user?" : "Wipe all data of \(user!)?", yes: yes)
        try printResults(try global.call(.wipe, TargetSelection(user: user, all: all ? true : nil), ActionReply.self))
    }
}

struct Register: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Register a user's data directories (administrators).",
        discussion: "Missing directories are created, owned by the user, mode 0700. All or nothing: on any problem nothing changes.")
    @OptionGroup var global: GlobalOptions
    @Option(help: "The Unix user.") var user: String
    @Option(name: .customLong("dir"), help: ArgumentHelp("A data directory (absolute path); repeat for more.", valueName: "path"))
    var directories: [String] = []

    func validate() throws {
        if directories.isEmpty { throw ValidationError("give at least one --dir") }
    }

    func run() throws {
        try printResults(try global.call(.register, RegisterRequest(user: user, directories: directories), ActionReply.self))
    }
}

struct Unregister: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Stop protecting a user's data (administrators); the directories stay as they are.")
    @OptionGroup var global: GlobalOptions
    @Option(help: "The user.") var user: String

    func run() throws {
        try printResults(try global.call(.unregister, UserParameter(user: user), ActionReply.self))
    }
}

struct CheckIn: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "check-in", abstract: "Contact the policy server now.")
    @OptionGroup var global: GlobalOptions
    @Option(help: "Only this user's registration.") var user: String?

    func run() throws {
        try printResults(try global.call(.checkIn, UserFilter(user: user), ActionReply.self))
    }
}

struct PolicyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "policy", abstract: "Show the policy in force.")
    @OptionGroup var global: GlobalOptions
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        let p = try global.call(.getPolicy, NoParameters(), PolicyInfo.self)
        if json { return try printJSON(p) }
        print(table([
            ["offline_days_before_lock", p.offlineDaysBeforeLock == 0 ? "0 (never)" : "\(p.offlineDaysBeforeLock)"],
            ["offline_days_before_wipe", p.offlineDaysBeforeWipe == 0 ? "0 (never)" : "\(p.offlineDaysBeforeWipe)"],
            ["source", p.source],
        ]))
    }
}

struct History: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show the audit history, oldest first.")
    @OptionGroup var global: GlobalOptions
    @Option(help: "Only this user's events.") var user: String?
    @Option(help: "At most this many (newest) events.") var limit: Int = 1000
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        let reply = try global.call(.getHistory, HistoryRequest(user: user, limit: limit), HistoryReply.self)
        if json { return try printJSON(reply) }
        var rows = [["TIME", "USER", "EVENT", "TRIGGER", "DETAIL"]]
        for e in reply.events { rows.append([e.time, e.user, e.kind, e.trigger?.rawValue ?? "-", e.detail]) }
        print(table(rows))
    }
}
