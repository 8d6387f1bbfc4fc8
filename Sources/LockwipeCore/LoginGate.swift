/// The login gate's decision (`lockwipectl pam-account`, run by pam_lockwipe.so in the PAM
/// `account` stack): whether a user may log in, given what lockwiped says about their
/// registration. Pure: the caller asks the daemon and prints the message.
///
/// Refused: a registration locked by the policy server (unless a contact made the lock
/// liftable: then the login is how its user lifts it), and one whose data is wiped or
/// being wiped — logging in cannot help the user there, and the server or the wipe means
/// "this person should not work on this machine any more".
/// Allowed, with a notice: every other lock (offline too long, on logout, by an
/// administrator, by the user), because the user must be able to log in to get it
/// lifted (bring the machine online for a check-in, unlock with a passcode).
/// The gate is a courtesy on top of the lock: a refused or allowed login changes nothing
/// about who can read the vault.
public enum LoginGate {
    public struct Decision: Equatable, Sendable {
        public var allowed: Bool
        /// Shown to the user (pam_lockwipe.so passes standard output to the PAM conversation); nil: nothing to say.
        public var message: String?

        public init(allowed: Bool, message: String?) {
            self.allowed = allowed
            self.message = message
        }
    }

    /// What the gate knows about a user's registration (from `GetStatus`).
    public struct Registration: Equatable, Sendable {
        public var user: String
        public var state: RegistrationState
        public var lockTrigger: Trigger?
        public var protection: Protection
        public var blocked: Bool
        /// A contact made the server or offline lock liftable: a login lifts it (`PolicyLockLift`).
        public var liftable: Bool
        /// The offline lock or wipe due within `[notify] warn_before`: the action, when
        /// (as shown), and in how many seconds. Never a reason to refuse.
        public var warning: (action: Action, at: String, inSeconds: Int64)?

        public init(
            user: String, state: RegistrationState, lockTrigger: Trigger?, protection: Protection, blocked: Bool,
            warning: (action: Action, at: String, inSeconds: Int64)? = nil, liftable: Bool = false
        ) {
            self.liftable = liftable
            self.user = user
            self.state = state
            self.lockTrigger = lockTrigger
            self.protection = protection
            self.blocked = blocked
            self.warning = warning
        }

        public static func == (a: Registration, b: Registration) -> Bool {
            a.user == b.user && a.state == b.state && a.lockTrigger == b.lockTrigger && a.protection == b.protection
                && a.blocked == b.blocked && a.liftable == b.liftable && a.warning?.action == b.warning?.action && a.warning?.at == b.warning?.at
                && a.warning?.inSeconds == b.warning?.inSeconds
        }
    }

    /// The decision for an account with several registrations (one Unix account known
    /// under several names, each registered): refused if any refuses, with that reason;
    /// otherwise allowed with every notice. Empty: not registered.
    public static func decide(among registrations: [Registration]) -> Decision {
        let decisions = registrations.map { decide($0) }
        if let refusal = decisions.first(where: { !$0.allowed }) { return refusal }
        let notices = decisions.compactMap(\.message)
        return Decision(allowed: true, message: notices.isEmpty ? nil : notices.joined(separator: "\n"))
    }

    /// nil registration: the user is not registered on this machine. A warning (an offline
    /// lock or wipe near) adds its notice to whatever else is said and never refuses.
    public static func decide(_ r: Registration?) -> Decision {
        guard let r else { return Decision(allowed: true, message: nil) }
        var decision = decideState(r)
        if let w = r.warning {
            let notice = WarningWindow.notice(user: r.user, action: w.action, at: w.at, inSeconds: w.inSeconds)
            decision.message = decision.message.map { $0 + "\n" + notice } ?? notice
        }
        return decision
    }

    private static func decideState(_ r: Registration) -> Decision {
        // A lock that failed (lock-failed) is still a committed lock: the gate treats it as one.
        switch r.state {
        case .wiped:
            return Decision(
                allowed: false,
                message: """
                    lockwipe: login refused: the data of \(r.user) on this machine was wiped. \
                    Ask your administrator to register you again.
                    """)
        case .wipePending, .wiping:
            return Decision(
                allowed: false,
                message: """
                    lockwipe: login refused: the data of \(r.user) on this machine is being wiped. \
                    Ask your administrator.
                    """)
        case .locked where (r.lockTrigger == .server || r.lockTrigger == .offline) && r.liftable,
            .lockFailed where (r.lockTrigger == .server || r.lockTrigger == .offline) && r.liftable:
            // The server allowed it: this login is how its user lifts it (the auth stack did,
            // when the lockwipe PAM profile hands the password on).
            return Decision(
                allowed: true,
                message: """
                    lockwipe: your data on this machine is locked; the policy server allows it to be unlocked: \
                    log in with your password, or run `lockwipectl unlock --user \(r.user)` (with your passcode).
                    """)
        case .locked where r.lockTrigger == .server, .lockFailed where r.lockTrigger == .server:
            return Decision(
                allowed: false,
                message: """
                    lockwipe: login refused: the policy server locked the data of \(r.user) on this machine. \
                    Ask your administrator: the lock can be lifted once a check-in with the policy server allows it.
                    """)
        case .locked, .lockFailed:
            let how: String
            switch r.lockTrigger {
            case .offline:
                how =
                    "This machine was offline for too long: the lock can be lifted once it checks in with the policy server "
                    + "(then log in with your password), or ask your administrator."
            case .logout:
                how =
                    r.protection == .encrypted
                    ? "It was locked when you logged out: unlock it with `lockwipectl unlock --user \(r.user)` and your passcode."
                    : "It was locked when you logged out: ask your administrator to unlock it."
            default:
                how =
                    r.protection == .encrypted
                    ? "Unlock it with `lockwipectl unlock --user \(r.user)` and your passcode, or ask your administrator."
                    : "Ask your administrator to unlock it."
            }
            return Decision(allowed: true, message: "lockwipe: your data on this machine is locked. " + how)
        case .active:
            return Decision(
                allowed: true,
                message: r.blocked
                    ? "lockwipe: the policy server has blocked your registration on this machine; your data is untouched. Ask your administrator."
                    : nil)
        }
    }
}
