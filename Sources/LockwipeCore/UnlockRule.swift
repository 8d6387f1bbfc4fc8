/// Who may unlock what, and what an unlock of an encrypted vault needs: a pure decision,
/// in two steps, that every unlock path of the daemon asks (the caller has already been
/// found to be an administrator or the registered user themselves).
///
/// Step 1, `access(_:)`, before any key is touched:
/// - a vault with the permission lock: administrators only;
/// - an encrypted vault: an administrator always; the user themselves when it was locked
///   by `user` or `logout`, or found without its key at start-up (`resume`). A lock by the
///   policy server or the offline policy needs a successful check-in first: the unlock
///   request makes one attempt (`checkInFirst`); a contact that makes the lock liftable
///   (`PolicyLockLift`, proof `.passcode`) lets her passcode lift it, one that lifts it
///   (`lift_after_contact = "immediately"`) hands the vault back to its passcode. Without a server, or after a lock by an
///   administrator, only an administrator unlocks.
///
/// Step 2, for an encrypted vault: what opens its key (`opening`: the machine key, or the
/// user's passcode, which must be given) and, once a passcode has proved right
/// (`afterPasscode`), whether it has expired and must be replaced, or is changed at the unlock.
public enum UnlockRule {
    /// Why an unlock does not go ahead; `kind` is the domain error the daemon raises,
    /// `message` the sentence an operator reads.
    public struct Refusal: Equatable, Sendable {
        public enum Kind: Equatable, Sendable {
            case notPermitted
            /// Not possible in the registration's state (not locked), or a request that
            /// cannot be carried out as given.
            case actionFailed
            /// A parameter of the request cannot be used (its name).
            case invalidParameter(String)
            case passcodeRequired
            case passcodeExpired
        }

        public var kind: Kind
        public var message: String

        public init(_ kind: Kind, _ message: String) {
            self.kind = kind
            self.message = message
        }
    }

    // MARK: Step 1: who may unlock

    public struct Request: Equatable, Sendable {
        public var user: String
        /// An administrator (root or the admin group); otherwise the registered user.
        public var byAdmin: Bool
        public var protection: Protection
        public var state: RegistrationState
        public var lockTrigger: Trigger?
        /// A policy server is configured.
        public var serverConfigured: Bool
        /// A contact made the server or offline lock liftable (`PolicyLockLift`).
        public var liftable: Bool

        public init(
            user: String, byAdmin: Bool, protection: Protection, state: RegistrationState, lockTrigger: Trigger?, serverConfigured: Bool,
            liftable: Bool = false
        ) {
            self.liftable = liftable
            self.user = user
            self.byAdmin = byAdmin
            self.protection = protection
            self.state = state
            self.lockTrigger = lockTrigger
            self.serverConfigured = serverConfigured
        }
    }

    public enum Access: Equatable, Sendable {
        case allowed
        /// Only a successful check-in lifts this lock: the request makes one attempt
        /// (outside the user's turn); while the lock stays, it is refused with `otherwise`.
        case checkInFirst(otherwise: Refusal)
        case refused(Refusal)
    }

    /// Why a user may not unlock her own vault with a permission lock (`WhoMay` refuses it
    /// before the domain is asked; `access` again in the turn).
    public static let permissionLockIsAdministrators = "only root and members of the admin group may unlock a vault with a permission lock"

    public static func access(_ r: Request) -> Access {
        let nextStep = r.state.nextStep(user: r.user).map { ": " + $0 } ?? ""
        let notLocked = Access.refused(Refusal(.actionFailed, "\(r.user) is not locked (state: \(r.state.rawValue))\(nextStep)"))
        guard r.protection == .encrypted else {
            guard r.byAdmin else {
                return .refused(Refusal(.notPermitted, permissionLockIsAdministrators))
            }
            return r.state.isLockCommitted ? .allowed : notLocked
        }
        guard r.state.isLockCommitted else { return notLocked }
        if r.byAdmin { return .allowed }
        switch r.lockTrigger {
        case .user?, .logout?, .resume?:
            return .allowed
        case .server?, .offline?:
            // Her passcode (or, for a key the machine key wraps, her own session) is the
            // proof `PolicyLockLift` asks once a contact made the lock liftable.
            let lock = PolicyLockLift.Lock(state: r.state, trigger: r.lockTrigger, liftable: r.liftable)
            switch PolicyLockLift.decide(lock, proof: .passcode, setting: .atLogin, opens: true) {
            case .lift, .handBack: return .allowed
            case .notAPolicyLock, .stays, .becomesLiftable: break
            }
            let by = r.lockTrigger == .server ? "the policy server" : "the offline policy"
            guard r.serverConfigured else {
                return .refused(Refusal(.notPermitted, "\(r.user) was locked by \(by) and no policy server is configured: an administrator must unlock it"))
            }
            return .checkInFirst(
                otherwise: Refusal(
                    .notPermitted,
                    "\(r.user) was locked by \(by), and the check-in just tried did not let it be lifted (see lockwipectl status); try again once the server can be reached, or ask an administrator"
                ))
        default:
            return .refused(Refusal(.notPermitted, "\(r.user) was locked by an administrator: an administrator must unlock it"))
        }
    }

    // MARK: Before a lock: what will undo it

    /// What will undo a lock the one asking is about to make (`byAdmin`: an administrator
    /// asks; otherwise the registered user, trigger `user`), from the same rule the unlock
    /// asks (`access`): a user who cannot undo her own lock is told so before it, and asked
    /// (issue 42: a user locked her permission vault and could not unlock it).
    public struct Undo: Equatable, Sendable {
        /// The one asking can unlock it herself afterwards.
        public var byAsker: Bool
        /// Who unlocks it, and how, in her words.
        public var text: String

        public init(byAsker: Bool, text: String) {
            self.byAsker = byAsker
            self.text = text
        }
    }

    public static func undo(user: String, byAdmin: Bool, protection: Protection, serverConfigured: Bool) -> Undo {
        let request = Request(
            user: user, byAdmin: byAdmin, protection: protection, state: .locked, lockTrigger: byAdmin ? .admin : .user, serverConfigured: serverConfigured)
        let adminUnlock = "lockwipectl unlock \(user), as root or a member of the admin group"
        guard access(request) == .allowed else {
            return Undo(byAsker: false, text: "only an administrator can unlock it (\(adminUnlock)): you cannot undo this lock yourself")
        }
        if byAdmin { return Undo(byAsker: true, text: "an administrator unlocks it (\(adminUnlock))") }
        return Undo(byAsker: true, text: "you can unlock it yourself (lockwipectl unlock, with your passcode once you have set one)")
    }

    /// What a lock that is not the policy's waits for (`PolicyLockLift.waitingFor` says it
    /// for a server or offline lock), from the rule the unlock asks: `status` shows it, so
    /// that a lock handed back to the passcode (an offline code, a contact) does not read
    /// as one its user made and cannot undo (issue 42). Nil when not locked.
    public static func waitingFor(user: String, protection: Protection, state: RegistrationState, trigger: Trigger?) -> String? {
        // A policy lock's way back is `PolicyLockLift.waitingFor`'s.
        guard state.isLockCommitted, !PolicyLockLift.Lock(state: state, trigger: trigger, liftable: false).isPolicyLock else { return nil }
        let byUser = Request(user: user, byAdmin: false, protection: protection, state: state, lockTrigger: trigger, serverConfigured: false)
        guard access(byUser) == .allowed else { return "an administrator (lockwipectl unlock \(user))" }
        return "\(user)'s own unlock (lockwipectl unlock, with the passcode once one is set), or an administrator"
    }

    // MARK: Step 2: what opens the key

    /// What wraps a vault key (the daemon's `WrappedKey.Wrapping`).
    public enum Wrapping: Sendable {
        /// The machine key: the default passcode, which asks nobody.
        case machine
        case passcode
    }

    public enum Opening: Equatable, Sendable {
        case withMachineKey
        /// Check the new passcode against the passcode policy (when one is given), then
        /// try this passcode.
        case withPasscode(String)
        case refused(Refusal)
    }

    /// How the key of `user`'s vault is opened, given what the request brings.
    public static func opening(user: String, wrapping: Wrapping, passcode: String?, newPasscode: String?) -> Opening {
        switch wrapping {
        case .machine:
            guard newPasscode == nil else {
                return .refused(Refusal(.invalidParameter("new_passcode"), "\(user) has no passcode yet; set one with lockwipectl passcode set"))
            }
            return .withMachineKey
        case .passcode:
            guard let passcode else {
                return .refused(
                    Refusal(
                        .passcodeRequired,
                        "the vault key of \(user) is protected by a passcode: give it (lockwipectl unlock prompts for it, or reads it with --passcode-stdin)"))
            }
            return .withPasscode(passcode)
        }
    }

    public enum AfterPasscode: Equatable, Sendable {
        /// The key stays wrapped as it is.
        case keep
        /// Wrap the open key under `new`; `detail` for the history, `note` for the reply.
        case rewrap(new: String, detail: String, note: String)
        /// The key is not used: it is wiped, and the vault stays locked.
        case refused(Refusal)
    }

    /// What follows once `passcode` has opened the key: whether it has expired (told only
    /// to whoever proved they know it) and must be replaced by `newPasscode`, or is
    /// changed to it at the unlock. `expired`: when the expired passcode was set (ISO 8601,
    /// as `status` shows it) and for how many days a passcode holds; nil while it holds.
    public static func afterPasscode(
        user: String, passcode: String, newPasscode: String?,
        expired: (setAt: String, expirationDays: Int)?
    ) -> AfterPasscode {
        if let expired {
            guard let newPasscode else {
                return .refused(
                    Refusal(
                        .passcodeExpired,
                        "passcode expired: change it (it was set \(expired.setAt); expiration_days = \(expired.expirationDays)): "
                            + "lockwipectl unlock --user \(user) --new-passcode-stdin, or on a terminal answer the prompts for a new one"))
            }
            guard newPasscode != passcode else { return .refused(Refusal(.actionFailed, "the new passcode must differ from the expired one")) }
            return .rewrap(new: newPasscode, detail: "expired passcode replaced at unlock", note: "expired passcode replaced")
        }
        guard let newPasscode else { return .keep }
        return .rewrap(new: newPasscode, detail: "passcode changed at unlock", note: "passcode changed")
    }
}
