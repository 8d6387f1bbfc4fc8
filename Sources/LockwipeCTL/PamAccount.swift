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
#endif

/// `lockwipectl pam-account`: the login gate, run by pam_lockwipe.so in the PAM account stack.
struct PamAccount: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pam-account",
        abstract: "Login gate for pam_lockwipe.so: refuse a user whose data was locked by the policy server or wiped.",
        discussion: """
            Meant for the PAM account stack (pam-auth-update --enable lockwipe adds \
            'account required pam_lockwipe.so', which runs this command and decides the login by \
            its exit status: 1 refuses with "Permission denied", after the reason printed here; \
            any status but 0 and 1 lets the login through). \
            Asks lockwiped about the account of the user in $PAM_USER (or --user) and exits 1, with \
            the reason on standard output, when a registration of that account is locked by the \
            policy server, wiped, or being wiped. The account is looked up through NSS and \
            registrations are matched by its uid, so another spelling of the name, or another \
            name sharing the uid, gets the same answer. Exits 0 for root (without asking), users who are not registered, active \
            registrations, and every other lock (offline, on logout, by an administrator), which \
            the user must be able to log in to lift; a notice is printed for those. \
            A registration whose offline lock or wipe is due within [notify] warn_before gets a \
            notice of what happens when and how to prevent it; a warning never refuses a login. \
            When lockwiped cannot be asked (not running, no answer within 10 s, an error), the \
            login is allowed and a warning goes to syslog (authpriv), and to standard error only \
            when PAM_TYPE is not set (run by hand), never to the user's terminal: a broken daemon must not \
            lock everyone out of a machine, and the vault's lock does not depend on the gate.
            """)

    @OptionGroup var global: GlobalOptions
    @Option(help: "The user to check (default: $PAM_USER, as pam_lockwipe.so sets it).") var user: String?

    func run() throws {
        guard let name = user ?? ProcessInfo.processInfo.environment["PAM_USER"].flatMap({ $0.isEmpty ? nil : $0 }) else {
            throw CommandFailure(code: ExitStatus.usage, message: "pam-account: no user: PAM_USER is not set (run it from pam_lockwipe.so, or give --user)")
        }
        // The account, not the name PAM was given: NSS may answer to other spellings of a
        // name (case-insensitive directories, aliases sharing a uid), and a registration is
        // found by the uid it was made for. An account NSS does not know cannot log in.
        guard let pw = getpwnam(name) else { return }
        let uid = pw.pointee.pw_uid
        let canonical = String(cString: pw.pointee.pw_name)
        // Root is never refused and never waits for the daemon.
        if uid == 0 { return }

        let report: StatusReport
        do {
            report = try global.askingAgainIfUnread {
                try VarlinkClient(path: global.socketPath, timeout: 10).call(.getStatus, StatusRequest(user: nil, loginGate: true))
            }
        } catch let error as VarlinkError where error.name == VarlinkError.startingUpName {
            // Not a broken daemon: one that is locking or wiping what became due while the
            // machine was off. The login waits for that, as logins wait for READY=1
            // (systemd-user-sessions); root is never refused.
            print("lockwiped is finishing its start-up pass; try again in a moment")
            Self.syslog(LOG_NOTICE, "login of \(name) refused: lockwiped is finishing its start-up pass")
            throw CommandFailure(code: ExitStatus.failed, message: "login of \(name) refused: lockwiped is finishing its start-up pass")
        } catch {
            Self.failOpen(user: name, "\(error)")
            return
        }
        let mine = report.registrations.filter { $0.uid == uid || $0.user == canonical }
        let decision = LoginGate.decide(
            among: mine.map {
                LoginGate.Registration(
                    user: $0.user, state: $0.state, lockTrigger: $0.lockTrigger, protection: $0.protection, blocked: $0.blocked,
                    warning: $0.warning.map { (action: $0.action, at: $0.at, inSeconds: $0.inSeconds) }, liftable: $0.lockLiftable == true)
            })
        if let message = decision.message { print(message) }
        // A warning planned from an offline lease's end says whose lease it is.
        for r in mine where r.warning != nil {
            if let lease = r.lease, lease.inForce { print("lockwipe: \(Status.leaseLine(lease)) holds the offline policy off until then.") }
        }
        if !decision.allowed {
            Self.syslog(LOG_NOTICE, "login of \(name) refused: \(decision.message ?? "")")
            throw CommandFailure(code: ExitStatus.failed, message: "login of \(name) refused")
        }
    }

    /// lockwiped could not be asked: allow, and say so where an administrator looks.
    /// Under PAM (PAM_TYPE set) only to syslog: pam_lockwipe.so would send standard error
    /// there too, and an internal sentence is no business of the user's terminal.
    static func failOpen(user: String, _ why: String) {
        let message = "login of \(user) allowed without the lockwipe check: \(why)"
        if ProcessInfo.processInfo.environment["PAM_TYPE"] == nil { StandardStreams.writeError("lockwipectl: \(message)\n") }
        syslog(LOG_WARNING, message)
    }

    /// To syslog, facility authpriv as PAM modules log; the identifier is the program's
    /// name (glibc's default), so `journalctl SYSLOG_IDENTIFIER=lockwipectl` finds it.
    static func syslog(_ priority: Int32, _ message: String) {
        // A C string for %s: a Swift String passed as CVarArg is not one.
        message.withCString { text in
            withVaList([text]) { vsyslog(LOG_AUTHPRIV | priority, "%s", $0) }
        }
    }
}
