/// Who may do what to which registration: the one table every handler of the control
/// socket asks before it calls the domain (pure: the handler reads the facts, this decides).
///
/// - lock (or preview a lock), survey a wipe (`PreviewWipe`), check in: administrators any
///   registration or all of them; a user only her own (`Ownership.isOwn`: by uid). Naming
///   none, a lock means her single own registration, a check-in all of hers.
/// - wipe: administrators; a user only her own *encrypted* vault ("forgot passcode").
/// - unlock, set a passcode: administrators; a user her own registration (unlock: never a
///   vault with a permission lock). What an unlock then needs depends on how the vault was
///   locked, which only the registration's turn can read race-free: `UnlockRule`.
/// - ask for an offline-code challenge, enter its response (`offlineCode`): administrators;
///   a user her own registration (naming none: her single one, as a lock).
/// - register, set credentials, unregister, provision offline codes, recover vault keys with
///   the organisation's recovery key: administrators only.
/// - lift a lock at login (`LiftAtLogin`, a password the PAM auth stack checked): root only.
/// - read the history or a certificate: administrators everything; a user what was
///   recorded for her own registrations (`Ownership.mayReadHistory`, `ownsRecord`).
///
/// A refusal is in the words the caller reads (`lockwipectl` prints them after
/// "not permitted: ").
public enum WhoMay {
    public enum Verb: String, CaseIterable, Sendable {
        case lock, previewWipe, wipe, unlock, setPasscode, checkIn, register, setCredentials, unregister, readHistory, readCertificate, liftAtLogin
        case offlineCode, provisionOfflineCodes
        /// Read the recovery wraps and hand back a recovered vault key.
        case recover
    }

    /// The caller, as the kernel says (SO_PEERCRED) and NSS names it.
    public struct Caller: Equatable, Sendable {
        public var uid: UInt32
        public var name: String?
        /// Root, or a member of the admin group.
        public var isAdmin: Bool

        public init(uid: UInt32, name: String?, isAdmin: Bool) {
            self.uid = uid
            self.name = name
            self.isAdmin = isAdmin
        }
    }

    /// What the daemon knows about a registration a request names.
    public struct Registration: Equatable, Sendable {
        public var user: String
        public var uid: UInt32
        public var protection: Protection

        public init(user: String, uid: UInt32, protection: Protection) {
            self.user = user
            self.uid = uid
            self.protection = protection
        }
    }

    public struct Request: Equatable, Sendable {
        public var caller: Caller
        /// The user the request names, if any.
        public var user: String?
        /// The request asks for every registration.
        public var all: Bool
        /// The registration of `user` (for the history: of the caller's own name when she
        /// names none); nil when that name is not registered. Read for ordinary users only.
        public var named: Registration?
        /// The names of the caller's own registrations. Read for ordinary users only.
        public var own: [String]

        public init(caller: Caller, user: String? = nil, all: Bool = false, named: Registration? = nil, own: [String] = []) {
            self.caller = caller
            self.user = user
            self.all = all
            self.named = named
            self.own = own
        }
    }

    public struct Refusal: Equatable, Sendable {
        public enum Kind: Equatable, Sendable {
            case notPermitted
            /// The request names its targets wrongly (the parameter's name).
            case invalidParameter(String)
        }

        public var kind: Kind
        public var message: String

        public init(_ kind: Kind, _ message: String) {
            self.kind = kind
            self.message = message
        }
    }

    /// What the request may act on.
    public enum Targets: Equatable, Sendable {
        /// The registration of this name (the domain says if there is none).
        case user(String)
        /// Every registration.
        case all
        /// These registrations (the caller's own).
        case users([String])
        /// The history or certificates kept under `user` (nil: everyone's), only those
        /// recorded for `owner`'s registrations (nil: whoever's).
        case records(user: String?, owner: UInt32?)
        /// Nothing: the answer is empty.
        case nothing
    }

    public enum Decision: Equatable, Sendable {
        case allowed(Targets)
        case refused(Refusal)
    }

    public static func decide(_ verb: Verb, _ r: Request) -> Decision {
        switch verb {
        case .lock: return lock(r)
        case .previewWipe:
            // Naming none, a user means her one registration (as lock and check-in do).
            if r.user == nil, !r.all, !r.caller.isAdmin { return oneOwnOrAdmin(r, verb: "survey a wipe of") }
            return selection(r, verb: "survey a wipe of", userMayTargetSelf: true)
        case .wipe:
            // "Forgot passcode": her own encrypted vault, nothing else.
            let ownEncrypted = !r.caller.isAdmin && !r.all && isOwn(r) && r.named?.protection == .encrypted
            return selection(r, verb: "wipe", userMayTargetSelf: ownEncrypted)
        case .unlock:
            if !r.caller.isAdmin, isOwn(r), r.named?.protection == .permissions { return .refused(Refusal(.notPermitted, UnlockRule.permissionLockIsAdministrators)) }
            return ownOrAdmin(r, verb: "unlock")
        case .setPasscode: return ownOrAdmin(r, verb: "set the passcode of")
        case .checkIn: return checkIn(r)
        case .register: return administrators(r, "register users")
        case .setCredentials: return administrators(r, "set credentials")
        case .unregister: return administrators(r, "unregister users")
        case .readHistory: return readHistory(r)
        case .readCertificate: return readCertificate(r)
        case .offlineCode: return oneOwnOrAdmin(r, verb: "ask for offline codes for")
        case .provisionOfflineCodes: return administrators(r, "provision offline codes")
        case .liftAtLogin: return liftAtLogin(r)
        case .recover: return administrators(r, "recover vault keys")
        }
    }

    // MARK: The rules

    static func isOwn(_ r: Request) -> Bool {
        guard let user = r.user, let named = r.named, named.user == user else { return false }
        return Ownership.isOwn(registrationUID: named.uid, callerUID: r.caller.uid)
    }

    /// Why an ordinary user may not `verb` a registration that is not hers: that she has
    /// none at all, or that only her own is hers to act on.
    static func notHers(_ r: Request, verb: String) -> Decision {
        guard r.own.isEmpty else { return .refused(Refusal(.notPermitted, "you may only \(verb) your own registration")) }
        let who = r.caller.name.map { "\($0) (uid \(r.caller.uid))" } ?? "uid \(r.caller.uid)"
        return .refused(
            Refusal(
                .notPermitted,
                "you have no registration (no data of \(who) is registered with lockwiped); only administrators may \(verb) other users' registrations"))
    }

    static func administrators(_ r: Request, _ what: String) -> Decision {
        r.caller.isAdmin ? .allowed(.user(r.user ?? "")) : .refused(Refusal(.notPermitted, "only root and members of the admin group may \(what)"))
    }

    static func ownOrAdmin(_ r: Request, verb: String) -> Decision {
        guard let user = r.user else { return .refused(Refusal(.invalidParameter("user"), "give a user")) }
        return r.caller.isAdmin || isOwn(r) ? .allowed(.user(user)) : notHers(r, verb: verb)
    }

    /// Exactly one of a user or all; an ordinary user only her own registration, and only
    /// when `userMayTargetSelf`.
    static func selection(_ r: Request, verb: String, userMayTargetSelf: Bool) -> Decision {
        if r.all == (r.user != nil) { return .refused(Refusal(.invalidParameter("user"), "give exactly one of user or all")) }
        if !r.caller.isAdmin {
            guard userMayTargetSelf, !r.all, isOwn(r) else {
                if userMayTargetSelf, !r.all { return notHers(r, verb: verb) }
                return .refused(
                    Refusal(.notPermitted, userMayTargetSelf ? "you may only \(verb) your own registration" : "only root and members of the admin group may \(verb)"))
            }
        }
        return .allowed(r.all ? .all : .user(r.user ?? ""))
    }

    /// A user naming nobody locks her one registration; with several she must name one.
    static func lock(_ r: Request) -> Decision {
        guard r.user == nil, !r.all, !r.caller.isAdmin else { return selection(r, verb: "lock", userMayTargetSelf: true) }
        guard let first = r.own.first else { return notHers(r, verb: "lock") }
        guard r.own.count == 1 else {
            return .refused(
                Refusal(.invalidParameter("user"), "you have \(r.own.count) registrations (\(r.own.joined(separator: ", "))): name the one to lock"))
        }
        return .allowed(.user(first))
    }

    /// A user naming nobody means her one registration; an administrator must name one.
    static func oneOwnOrAdmin(_ r: Request, verb: String) -> Decision {
        guard r.user == nil, !r.caller.isAdmin else { return ownOrAdmin(r, verb: verb) }
        guard let first = r.own.first else { return notHers(r, verb: verb) }
        guard r.own.count == 1 else {
            return .refused(Refusal(.invalidParameter("user"), "you have \(r.own.count) registrations (\(r.own.joined(separator: ", "))): name one"))
        }
        return .allowed(.user(first))
    }

    /// Naming none: every registration for administrators, all of hers for a user.
    static func checkIn(_ r: Request) -> Decision {
        if r.caller.isAdmin { return .allowed(r.user.map { .user($0) } ?? .all) }
        guard let user = r.user else { return r.own.isEmpty ? notHers(r, verb: "check in") : .allowed(.users(r.own)) }
        return isOwn(r) ? .allowed(.user(user)) : notHers(r, verb: "check in")
    }

    /// A user naming nobody reads her own name's history; naming another, a refusal.
    static func readHistory(_ r: Request) -> Decision {
        if r.caller.isAdmin { return .allowed(.records(user: r.user, owner: nil)) }
        guard let name = r.user ?? r.caller.name else { return .allowed(.nothing) }
        let registrationUID = r.named?.user == name ? r.named?.uid : nil
        guard Ownership.mayReadHistory(of: name, registrationUID: registrationUID, callerUID: r.caller.uid, callerName: r.caller.name) else {
            if r.user == nil { return .allowed(.nothing) }
            return .refused(Refusal(.notPermitted, "only administrators may read the history of other users"))
        }
        return .allowed(.records(user: name, owner: r.caller.uid))
    }

    /// Root only, not the admin group: the password is tried as a vault passcode without
    /// counting toward `retry_limit` (a login that failed never gets here), so only the PAM
    /// auth stack, which has checked it and runs as root for login, gdm, su and sshd, may
    /// give one. Anyone else could guess passcodes without limit.
    static func liftAtLogin(_ r: Request) -> Decision {
        guard r.caller.uid == 0 else {
            return .refused(
                Refusal(
                    .notPermitted,
                    "only root may hand a login password to lockwiped (the PAM auth stack does, through lockwipectl pam-auth); "
                        + "to unlock your own vault use lockwipectl unlock and your passcode"))
        }
        return .allowed(.nothing)
    }

    static func readCertificate(_ r: Request) -> Decision {
        guard let user = r.user else { return .refused(Refusal(.invalidParameter("user"), "give a user")) }
        if r.caller.isAdmin { return .allowed(.records(user: user, owner: nil)) }
        let registrationUID = r.named?.user == user ? r.named?.uid : nil
        guard Ownership.mayReadHistory(of: user, registrationUID: registrationUID, callerUID: r.caller.uid, callerName: r.caller.name) else {
            return .refused(Refusal(.notPermitted, "only administrators may read the certificates of other users"))
        }
        return .allowed(.records(user: user, owner: r.caller.uid))
    }
}
