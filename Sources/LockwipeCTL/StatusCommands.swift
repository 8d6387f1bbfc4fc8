// The verbs that only read: status, policy, certificate and history (what lockwiped
// reports, printed as tables or as the JSON contract).

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
        commandName: "status",
        abstract: "Show the policy and every registration you may see (the verb when none is given).",
        discussion: """
            Exits 3 when a registration shown is in state lock-failed (its vault is NOT locked), \
            as systemctl status exits 3 for a unit that is not active; else 4 when lockwiped's \
            machine key cannot be opened (the encrypted vaults it wraps stay locked until it is \
            undone or recovered: lockwipectl recover). The report is printed all the same.
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
        if report.machineKey?.problem != nil {
            throw CommandFailure(
                code: ExitStatus.machineKeyUnavailable, message: json ? "" : "the machine key cannot be opened: the encrypted vaults it wraps stay locked (see the warning above)")
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
        if let codes = report.offlineCodes {
            // Not the machine id certificates name: a hash of it that challenges carry.
            let machine = codes.machine.map { $0.contains(" ") ? " (\($0))" : " (challenges name this machine \($0), a hash of /etc/machine-id)" } ?? ""
            print("Offline codes: \(codes.provisioned ? "provisioned" : "not provisioned")\(machine)")
        }
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
                    let outcome = r.rejected != nil ? "rejected" : r.lastError == nil ? "ok" : "failed"
                    let attempt = r.lastAttempt.map { "\(relative($0)): \(outcome)" } ?? "never"
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
                if let lease = r.lease, lease.inForce {
                    print("\(r.user): \(Self.leaseLine(lease)): the offline policy neither locks nor wipes before it ends (\(relative(lease.until)))")
                }
                if let waits = r.lockWaitsFor {
                    print("\(r.user): " + (r.lockLiftable == true ? "lock liftable: " : "lock waits for: ") + waits)
                }
                if let at = r.logoutLockAt { print("\(r.user): no login session: locks (lock_timeout) \(relative(at))") }
                if r.blocked { print("\(r.user): " + Terminal.red("BLOCKED by the policy server (\(r.blockedCode ?? "blocked")); data untouched")) }
                if let j = r.rejected {
                    print(
                        "\(r.user): "
                            + Terminal.red(
                                "rejected by the policy server (HTTP \(j.httpStatus): \(j.text))\(j.since.map { " since \(relative($0))" } ?? ""): "
                                    + "reached, but it refuses this machine; the offline clock runs on (what to check: under warnings)"))
                }
                if let e = r.vaultError {
                    print(
                        "\(r.user): "
                            + Terminal.red(
                                (r.state == .lockFailed ? "LOCK FAILED, the vault is NOT locked (retried): " : "VAULT UNREACHABLE, nothing is done to it: ") + e))
                }
                if let e = r.lastError, report.server.configured, r.rejected == nil { print("\(r.user): last check-in: \(e)") }
                if let p = r.wipeProgress { print("\(r.user): \(describe(p))") }
                if let wrapping = r.keyWrapping, !r.state.isWipeCommitted {
                    var line = "\(r.user): encrypted vault; key wrapped by " + (wrapping == "machine" ? "the machine key (default passcode)" : "the user's passcode")
                    if let e = r.passcodeExpires { line += "; passcode expires \(relative(e)) (\(e))" }
                    if let f = r.failedUnlocks, f > 0 { line += "; \(f) failed unlock(s)" + (r.retryLimit.map { $0 > 0 ? " of \($0) allowed" : "" } ?? "") }
                    print(line)
                }
                if let atRest = r.atRest { print("\(r.user): at rest: " + (atRest.copyOpensIt ? Terminal.yellow(atRest.sentence) : atRest.sentence)) }
                if let o = r.outbox { print("\(r.user): outbox: " + describe(o)) }
                if r.wipeProgress == nil, let w = r.wipe, !w.complete {
                    print(
                        "\(r.user): "
                            + Terminal.red("last wipe INCOMPLETE, \(TextFormat.count(w.skipped.count, "entry", "entries")) not removed (lockwipectl history --user \(r.user))"))
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

    /// `offline lease until DATE (source: reference)`.
    static func leaseLine(_ lease: LeaseInfo) -> String {
        let by = lease.source == "server" ? "granted by the policy server, \(lease.reference)" : "granted by an offline code, challenge \(lease.reference)"
        return "offline lease until \(lease.until) (\(by))"
    }
}

struct PolicyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "policy", abstract: "Show the policy in force, and with --plan what it will do to each registration and when.",
        discussion: """
            --plan lists, for each registration you may see (or those named), the steps the \
            offline policy takes if it stays offline: the warnings ([notify] warn_before), the \
            lock, the wipe, and an offline lease's end, each with its time, planned by the \
            daemon's own planner from the offline time status reports. --offline-days N also \
            says what each would be after N more days offline. Nothing is changed, and the \
            clock is not touched: this is how to try a policy.
            """)
    @OptionGroup var global: GlobalOptions
    @Argument(help: ArgumentHelp("With --plan: only these users' registrations.", valueName: "user"), completion: .custom(completeUsers))
    var users: [String] = []
    @Flag(help: "List what the policy will do to each registration, and when.") var plan = false
    @Option(name: .customLong("offline-days"), help: ArgumentHelp("With --plan: also say what each would be after this many more days offline.", valueName: "days"))
    var offlineDays: Int?
    @Flag(help: "Print JSON (--json=short: on one line).") var json = false

    func validate() throws {
        if !plan && (offlineDays != nil || !users.isEmpty) { throw ValidationError("user names and --offline-days go with --plan") }
        if let d = offlineDays, d < 0 || d > 36_500 { throw ValidationError("--offline-days must be a whole number of days from 0 to 36500, not \(d)") }
    }

    func run() throws {
        if plan { return try runPlan() }
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

    /// One step of the plan as printed and in --json.
    struct PlannedStep: Encodable {
        var step: String
        var at: String
        var inSeconds: Int64
        enum CodingKeys: String, CodingKey {
            case step, at
            case inSeconds = "in_seconds"
        }
    }

    struct RegistrationPlan: Encodable {
        var user: String
        var state: RegistrationState
        var offlineSeconds: Int64
        var steps: [PlannedStep]
        /// With --offline-days: the state after that many more days offline.
        var after: String?
        enum CodingKeys: String, CodingKey {
            case user, state, steps, after
            case offlineSeconds = "offline_seconds"
        }
    }

    private func runPlan() throws {
        let report = try global.call(.getStatus, StatusRequest(user: nil), StatusReport.self)
        let warnBefore = report.policy.warnBeforeSeconds ?? 0
        let now = Int64(Date().timeIntervalSince1970)
        let unknown = users.filter { name in !report.registrations.contains { $0.user == name } }
        if !unknown.isEmpty {
            throw CommandFailure(code: ExitStatus.usage, message: "no registration you may see: \(unknown.joined(separator: ", "))")
        }
        var plans: [RegistrationPlan] = []
        for r in report.registrations where users.isEmpty || users.contains(r.user) {
            let policy = (r.policy ?? report.policy).policy
            // The lease's end on the offline clock: until, counted from the last contact.
            let leaseEndsAt = r.lease.flatMap { lease in
                ISOTimestamp.seconds(lease.until).flatMap { until in ISOTimestamp.seconds(r.lastContact).map { until - $0 } }
            }
            let steps = PolicyPlan.steps(policy: policy, state: r.state, leaseEndsAt: leaseEndsAt, warnBefore: warnBefore)
                .filter { $0.step != .leaseEnds || $0.atOffline > r.offlineSeconds }
                .map { planned in
                    let ahead = max(0, planned.atOffline - r.offlineSeconds)
                    return PlannedStep(step: planned.step.rawValue, at: Self.iso(now + ahead), inSeconds: ahead)
                }
            let after = offlineDays.map { days in
                PolicyPlan.state(after: r.offlineSeconds + Int64(days) * 86_400, policy: policy, state: r.state, leaseEndsAt: leaseEndsAt).rawValue
            }
            plans.append(RegistrationPlan(user: r.user, state: r.state, offlineSeconds: r.offlineSeconds, steps: steps, after: after))
        }
        if json { return try printJSON(plans) }
        var rows: [[String]] = [["USER", "STEP", "WHEN"]]
        for p in plans {
            if p.steps.isEmpty { rows.append([p.user, "nothing planned (\(p.state.rawValue))", "-"]) }
            for s in p.steps {
                rows.append([p.user, s.step, s.inSeconds == 0 ? "now (due)" : "in \(RelativeTime.format(seconds: s.inSeconds)) (\(s.at))"])
            }
        }
        print(table(rows))
        if let days = offlineDays {
            for p in plans {
                print("\(p.user): after \(days) more day\(days == 1 ? "" : "s") offline: \(p.after ?? p.state.rawValue)")
            }
        }
        if !output.noLegend { print("planned from the offline time now; a contact with the policy server restarts it") }
    }

    static func iso(_ seconds: Int64) -> String { ISOTimestamp.text(seconds) }
}

struct Certificate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "certificate",
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
    static let configuration = CommandConfiguration(commandName: "history", abstract: "Show the audit history, oldest first.")
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
                e.requester.map { Self.userName($0.uid) } ?? "-", Self.detail(e),
            ])
        }
        print(table(rows))
        if reply.truncated == true {
            print(Terminal.yellow("warning: older events were left out: one reply carries at most \(HistoryRetention.maxReplyBytes >> 20) MiB of history (the newest are shown)"))
        }
        if follow { fflush(nil) }
    }

    /// The detail of `e`; for a run of refusals recorded as one event, how many and the last's time.
    static func detail(_ e: HistoryEvent) -> String {
        guard let n = e.repeats else { return e.detail }
        return "\(e.detail) (\(n) times, the last at \(e.lastTime ?? "an unknown time"))"
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

/// A registration's outbox in one line of `status`.
func describe(_ o: OutboxInfo) -> String {
    var parts: [String] = []
    if let files = o.pendingFiles {
        parts.append(
            files == 0
                ? "nothing pending"
                : "\(TextFormat.count(files, "file", "files")) pending (\(o.pendingBytes ?? 0) bytes" + (o.pendingOldest.map { ", oldest \($0)" } ?? "") + ")")
    } else if let problem = o.pendingProblem {
        parts.append("pending files not counted: \(problem)")
    }
    if o.sealedKept > 0 {
        parts.append(Terminal.yellow("\(TextFormat.count(o.sealedKept, "sealed outbox", "sealed outboxes")) (\(o.sealedKeptBytes) bytes) kept for the server"))
    }
    parts.append("last sealed " + (o.lastSealed ?? "never"))
    parts.append("last uploaded " + (o.lastUploaded ?? "never"))
    return (o.directory.map { "\($0): " } ?? "") + parts.joined(separator: "; ")
}
