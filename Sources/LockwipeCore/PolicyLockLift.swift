/// How a lock the policy set is lifted: a lock by the policy server (`server`) or by the
/// offline policy (`offline`). One decision, asked by every path that can lift one: a
/// server contact, a login through PAM, an unlock with the passcode, an administrator's
/// unlock, a helpdesk's offline code.
///
/// A contact alone does not give the data back (SAP's MDK client policy: once locked, "the
/// user can unlock the app by connecting to the server and re-authenticating"): with
/// `[lock] lift_after_contact = "at-login"` (the default) a contact makes the lock
/// *liftable*, and it is lifted once its user proves who she is (a login, her passcode)
/// or an administrator lifts it. A stolen machine put back on a network stays locked.
/// `"immediately"` keeps the older behaviour: the contact lifts the lock itself.
///
/// An offline code answers a challenge only the helpdesk, holding the fleet secret, can
/// answer for this machine and this registration: it stands for the contact and the proof
/// at once, so it lifts a lock that is not liftable.
///
/// Lifting opens the vault when nothing else is needed (a permission lock, or an
/// encrypted vault whose key the machine key wraps, or whose passcode the proof just
/// gave); otherwise the policy lock is handed back to the user's passcode (`handBack`:
/// the vault stays locked, its lock trigger becomes `user`).
public enum PolicyLockLift {
    /// `[lock] lift_after_contact`.
    public enum Setting: String, Sendable, Codable, Equatable, CaseIterable {
        case atLogin = "at-login"
        case immediately
    }

    /// What proves that the lock may go.
    public enum Proof: String, Sendable, Equatable, CaseIterable {
        /// A contact with the policy server that did not say the registration stays locked.
        case serverContact = "server-contact"
        /// The user authenticated at a login (the PAM auth stack handed her password on).
        case login
        /// The user's passcode opened her vault key (`lockwipectl unlock`).
        case passcode
        /// An administrator's unlock.
        case administrator
        /// A helpdesk's response to this machine's challenge for this registration.
        case offlineCode = "offline-code"
    }

    /// The parts of a registration the decision reads.
    public struct Lock: Sendable, Equatable {
        public var state: RegistrationState
        public var trigger: Trigger?
        /// A contact made the lock liftable (recorded; `lift_after_contact = "at-login"`).
        public var liftable: Bool

        public init(state: RegistrationState, trigger: Trigger?, liftable: Bool) {
            self.state = state
            self.trigger = trigger
            self.liftable = liftable
        }

        /// A committed lock set by the policy server or the offline policy.
        public var isPolicyLock: Bool {
            state.isLockCommitted && (trigger == .server || trigger == .offline)
        }
    }

    public enum Outcome: Sendable, Equatable {
        /// Not a committed lock by the server or the offline policy: another rule decides.
        case notAPolicyLock
        /// The lock stays, for the reason given (in words, for the reply and `status`).
        case stays(String)
        /// Record that the lock is liftable (nothing changes on the filesystem); nothing to
        /// record when `lock.liftable` already says so.
        case becomesLiftable
        /// Lift it and open the vault.
        case lift
        /// Lift the policy lock; the vault stays locked until its user gives the passcode
        /// (lock trigger `user`).
        case handBack
    }

    /// What `proof` does to `lock`. `opens`: the vault opens without anything more (a
    /// permission lock, a key the machine key wraps, or a key the proof's passcode opened).
    public static func decide(_ lock: Lock, proof: Proof, setting: Setting, opens: Bool) -> Outcome {
        guard lock.isPolicyLock else { return .notAPolicyLock }
        let give: Outcome = opens ? .lift : .handBack
        switch proof {
        case .administrator, .offlineCode:
            return give
        case .serverContact:
            return setting == .immediately ? give : .becomesLiftable
        case .login, .passcode:
            guard lock.liftable else { return .stays(notYetLiftable(lock)) }
            return give
        }
    }

    /// Why a login or a passcode does not lift `lock` yet.
    static func notYetLiftable(_ lock: Lock) -> String {
        let by = lock.trigger == .server ? "the policy server" : "the offline policy"
        return "the lock by \(by) is lifted only after a contact with the policy server that allows it"
    }

    /// What a policy lock waits for, in words for `status`; nil when `lock` is not one.
    public static func waitingFor(_ lock: Lock, user: String, setting: Setting, serverConfigured: Bool) -> String? {
        guard lock.isPolicyLock else { return nil }
        if lock.liftable {
            return "the policy server allows it: lifted at \(user)'s next login, with lockwipectl unlock and the passcode, or by an administrator"
        }
        guard serverConfigured else { return "no policy server is configured: an administrator must unlock it" }
        let then =
            setting == .immediately
            ? "lifted at the next contact with the policy server that allows it" : "lifted at \(user)'s first login after a contact with the policy server that allows it"
        return then + ", or by an administrator"
    }
}
