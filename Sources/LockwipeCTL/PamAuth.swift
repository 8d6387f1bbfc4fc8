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

/// `lockwipectl pam-auth`: hands the password of a login to lockwiped, run by the PAM
/// module pam_lockwipe.so (packaging/pam/pam_lockwipe.c) in the auth stack (pam_fscrypt's
/// model), so that a lock a contact with the policy server made liftable is lifted by its
/// user's login. The module runs it only when the stack holds a password (PAM_AUTHTOK):
/// pam_exec expose_authtok, used before, asked for one when the login needed none.
struct PamAuth: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pam-auth",
        abstract: "Lift a liftable lock at login, for the PAM module pam_lockwipe.so in the PAM auth stack.",
        discussion: """
            Run by the PAM module pam_lockwipe.so in the auth stack, after the module that checks \
            the password (pam-auth-update --enable lockwipe adds 'auth optional pam_lockwipe.so' \
            as an Additional module, which runs only when the login was accepted), and only when \
            the stack holds a password: a login without one (nullok, a fingerprint) runs nothing. \
            Reads the password from standard input (the module writes it followed by a NUL byte) and \
            hands it to lockwiped (LiftAtLogin, root only) for every registration of the account \
            of $PAM_USER (or --user): a server or offline lock that a contact with the policy \
            server made liftable ([lock] lift_after_contact = "at-login") is lifted, and an \
            encrypted vault whose passcode is the login password is opened. A login password that \
            is not the vault passcode never counts toward retry_limit: the vault stays locked for \
            lockwipectl unlock. Always exits 0: it never refuses a login (the account stack's \
            pam-account is the gate); what it did goes to standard output and, on a failure, to \
            syslog (authpriv). Does nothing for root, or outside the auth stack (PAM_TYPE other than auth).
            """)

    @OptionGroup var global: GlobalOptions
    @Option(help: "The user who logs in (default: $PAM_USER, as pam_lockwipe.so sets it).") var user: String?

    /// The longest password read (Linux-PAM's PAM_MAX_RESP_SIZE is 512).
    static let maximumBytes = 4096

    func run() throws {
        let environment = ProcessInfo.processInfo.environment
        if let type = environment["PAM_TYPE"], type != "auth" { return }
        guard let name = user ?? environment["PAM_USER"].flatMap({ $0.isEmpty ? nil : $0 }) else {
            PamAccount.syslog(LOG_WARNING, "pam-auth: no user: PAM_USER is not set")
            return
        }
        guard let password = Self.password(StandardStreams.readInputToEnd() ?? Data()) else { return }
        guard let pw = getpwnam(name) else { return }
        let uid = pw.pointee.pw_uid
        if uid == 0 { return }
        do {
            // The key work (one scrypt run per vault a passcode wraps) takes about a second.
            let client = try VarlinkClient(path: global.socketPath, timeout: 30)
            let reply = try client.call(.liftAtLogin, LoginLiftRequest(uid: uid, password: password))
            for r in reply.results where r.lifted == true {
                print("lockwipe: \(r.user): \(r.detail)")
                PamAccount.syslog(LOG_NOTICE, "login of \(name): \(r.user): \(r.detail)")
            }
        } catch {
            // Never a reason to refuse the login: the lock simply stays.
            PamAccount.syslog(LOG_WARNING, "login of \(name): the lock was not lifted at login: \(error)")
            StandardStreams.writeError("lockwipectl: the lock was not lifted at login: \(error)\n")
        }
    }

    /// The password as pam_lockwipe.so writes it: its bytes and a NUL (pam_exec wrote them
    /// without one); nothing (an empty password, none at all) gives nil.
    static func password(_ data: Data) -> String? {
        let bytes = data.prefix(maximumBytes).prefix { $0 != 0 }
        guard !bytes.isEmpty else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }
}
