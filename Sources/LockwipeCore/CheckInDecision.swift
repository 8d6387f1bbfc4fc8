/// What one check-in answer does to the registration that asked, decided without I/O: the
/// daemon carries out the effects in this order, in that user's turn:
///
/// 1. `before`: journal lines (a server policy adopted or rejected);
/// 2. `lockChange`: a server or offline lock becomes liftable (`PolicyLockLift`), or is
///    lifted (the filesystem first) or handed back to the user's passcode;
/// 3. `write` with `events` (and the lock change's event): one transaction;
/// 4. `after`: the journal line that says what the answer was;
/// 5. `order`: a lock or wipe the server ordered (each records its own event).
///
/// Only a contact restarts the offline clock; a 403 order or block is not a contact.
public struct CheckInDecision: Sendable, Equatable {
    /// The parts of a registration an answer is decided on.
    public struct Registration: Sendable, Equatable {
        public var user: String
        public var state: RegistrationState
        public var lockTrigger: Trigger?
        public var blocked: Bool
        public var blockedCode: String?
        /// The server record's `last_error` (a repeated policy rejection is recorded once).
        public var lastError: String?
        /// Check-ins that failed in a row before this one.
        public var failures: Int
        /// The server policy in force (nil: none received yet).
        public var serverPolicy: Policy?
        /// The HTTP status of the rejection in force (`CheckInOutcome.rejected`); nil when
        /// the registration is not rejected.
        public var rejectedStatus: Int?
        /// What to check when the server rejects the registration (`RejectionAdvice`), given
        /// the HTTP status: computed from the protocol and the credentials it has.
        public var serverProtocol: ServerProtocol = .lockwipe
        public var hasCredentials = true
        public var oauth = false
        /// A lock can be lifted without the user: a permission lock, or an encrypted vault
        /// whose key the machine key wraps (the default passcode).
        public var opensWithoutPasscode: Bool
        /// An earlier contact already made the policy lock liftable (recorded).
        public var liftable: Bool
        /// `[lock] lift_after_contact`.
        public var liftAfterContact: PolicyLockLift.Setting

        public init(
            user: String, state: RegistrationState, lockTrigger: Trigger? = nil, blocked: Bool = false, blockedCode: String? = nil,
            lastError: String? = nil, failures: Int = 0, serverPolicy: Policy? = nil, opensWithoutPasscode: Bool = true,
            rejectedStatus: Int? = nil, liftable: Bool = false, liftAfterContact: PolicyLockLift.Setting = .atLogin,
            serverProtocol: ServerProtocol = .lockwipe, hasCredentials: Bool = true, oauth: Bool = false
        ) {
            self.serverProtocol = serverProtocol
            self.hasCredentials = hasCredentials
            self.oauth = oauth
            self.rejectedStatus = rejectedStatus
            self.liftable = liftable
            self.liftAfterContact = liftAfterContact
            self.user = user
            self.state = state
            self.lockTrigger = lockTrigger
            self.blocked = blocked
            self.blockedCode = blockedCode
            self.lastError = lastError
            self.failures = failures
            self.serverPolicy = serverPolicy
            self.opensWithoutPasscode = opensWithoutPasscode
        }
    }

    /// A history event (trigger `server`), written with the answer.
    public struct Event: Sendable, Equatable {
        public var kind: EventKind
        public var detail: String
        public init(_ kind: EventKind, _ detail: String) {
            self.kind = kind
            self.detail = detail
        }
    }

    /// A journal line: its MESSAGE_ID is chosen by `kind`; `fields` add to the check-in's own.
    public struct JournalLine: Sendable, Equatable {
        public enum Kind: Sendable, Equatable { case checkInOK, serverOrder, registrationBlocked, registrationRejected, checkInFailed, serverPolicyRejected, serverPolicyApplied }
        public enum Level: Sendable, Equatable { case info, notice, warning, error }
        public var kind: Kind
        public var level: Level
        public var message: String
        public var fields: [String: String]
    }

    /// The one store write for the answer.
    public enum Write: Sendable, Equatable {
        /// A contact: the offline clock restarts, the block is lifted, failures go to 0,
        /// `last_error` becomes `lastError` (nil: cleared); `policy` replaces the server
        /// policy when not nil; `settings` (a valid answer's) replace the stored ones.
        case contact(policy: Policy?, settings: ServerSettings?, lastError: String?)
        /// Not a contact: the attempt and its error are recorded, nothing else changes.
        case attempt(error: String, failures: Int)
        /// The server blocks the registration (`code` as sent); not a contact.
        case blocked(code: String, failures: Int)
        /// The server is reached but refuses the machine (`CheckInOutcome.rejected`): the
        /// attempt is recorded as failed and the rejection (status, text) kept until the
        /// next contact; not a contact, so the offline clock runs on.
        case rejected(status: Int, text: String, failures: Int)
    }

    public enum LockChange: Sendable, Equatable {
        case none
        /// The server's or the offline lock is lifted: the filesystem first, then the record
        /// (state active) with this event. When the filesystem step fails, nothing changes.
        case lift(Event)
        /// The server's or the offline lock is lifted, but only the user's passcode opens the
        /// vault: it stays locked, its lock trigger becomes `user` (with this event).
        case handBack(Event)
        /// The lock stays, and is recorded as liftable (`lift_after_contact = "at-login"`):
        /// its user's next login, her passcode or an administrator lifts it (with this event).
        case becomesLiftable(Event)
        /// The settings say the registration stays locked (`registration.locked`): what an
        /// earlier contact allowed is taken back (nothing changes on the filesystem).
        case noLongerLiftable
    }

    public enum Order: Sendable, Equatable {
        /// 403 `TRAFFIC_REG_LOCKED`.
        case lock(code: String, reason: String)
        /// 403 `TRAFFIC_REG_WIPED`.
        case wipe(code: String, reason: String)
        /// A contact whose settings say `registration.locked` while the registration is active.
        case settingsLock(reason: String)
    }

    public var before: [JournalLine] = []
    public var lockChange: LockChange = .none
    public var write: Write
    public var events: [Event] = []
    public var after: JournalLine
    public var order: Order?
    /// What the answer did, for the check-in's result (a contact adds its summary first).
    public var notes: [String] = []
    /// The answer brought a policy other than the one in force: the contact's summary
    /// says the policy is new (said once, not again as a note).
    public var newPolicy = false
    /// The result's detail when the answer was not a contact (nil for a contact, whose
    /// detail is its summary and the notes).
    public var detail: String?
    /// The check-in counts as failed (it was not a contact nor a server order).
    public var failed = false
    /// The registration was not rejected before this answer rejected it: the observers
    /// (the `warnRejected` hook) are told once, not at every check-in.
    public var newlyRejected = false

    /// The decision for `outcome` applied to `r`.
    public static func decide(_ r: Registration, _ outcome: CheckInOutcome) -> CheckInDecision {
        switch outcome {
        case .contact(let settings):
            return contact(r, settings)
        case .lock, .wipe:
            let lock = outcome == .lock
            let code = lock ? "TRAFFIC_REG_LOCKED" : "TRAFFIC_REG_WIPED"
            let verb = lock ? "locked" : "wiped"
            let action = lock ? "lock" : "wipe"
            let reason = "the policy server \(verb) the registration (HTTP 403 \(code))"
            return CheckInDecision(
                write: .attempt(error: "HTTP 403 \(code): \(verb) by the server", failures: 0),
                after: JournalLine(
                    kind: .serverOrder, level: .notice, message: "check-in of \(r.user): the server orders a \(action) (\(code))",
                    fields: ["result": code]),
                order: lock ? .lock(code: code, reason: reason) : .wipe(code: code, reason: reason))
        case .blocked(let code):
            let newly = !r.blocked || r.blockedCode != code
            return CheckInDecision(
                write: .blocked(code: code, failures: 0),
                events: newly ? [Event(.blocked, "the policy server blocked the registration (HTTP 403 \(code)); data untouched")] : [],
                after: JournalLine(
                    kind: .registrationBlocked, level: .warning, message: "\(r.user) is blocked by the policy server (\(code)); no data action",
                    fields: ["result": code]),
                detail: "blocked by the server (\(code)); not a contact", failed: true)
        case .rejected(let status, let text):
            let failures = r.failures + 1
            let rejectionAdvice = RejectionAdvice.text(
                status: status, serverProtocol: r.serverProtocol, hasCredentials: r.hasCredentials, oauth: r.oauth, user: r.user)
            return CheckInDecision(
                write: .rejected(status: status, text: text, failures: failures),
                after: JournalLine(
                    kind: .registrationRejected, level: .warning,
                    message:
                        "check-in of \(r.user) rejected: the server is reached but refuses this machine (HTTP \(status): \(text)); \(rejectionAdvice)",
                    fields: ["result": "rejected", "http_status": "\(status)", "error": "HTTP \(status): \(text)", "failures": "\(failures)"]),
                detail: "rejected by the server (HTTP \(status): \(text)); not a contact; \(rejectionAdvice)", failed: true,
                newlyRejected: r.rejectedStatus == nil)
        case .failure(let why):
            let failures = r.failures + 1
            return CheckInDecision(
                write: .attempt(error: why, failures: failures),
                after: JournalLine(
                    kind: .checkInFailed, level: .warning, message: "check-in of \(r.user) failed: \(why)",
                    fields: ["result": "failed", "error": why, "failures": "\(failures)"]),
                detail: "failed: \(why)", failed: true)
        }
    }

    /// A successful contact: clock restarted, block lifted, server policy (when valid)
    /// adopted, a server or offline lock lifted unless the server says it stays locked.
    private static func contact(_ r: Registration, _ settings: ServerSettings) -> CheckInDecision {
        var d = CheckInDecision(
            write: .contact(policy: nil, settings: nil, lastError: nil),
            after: JournalLine(kind: .checkInOK, level: .info, message: "check-in of \(r.user) ok", fields: ["result": "ok", "offline_seconds": "0"]))
        var policy: Policy?
        var lastError: String?
        let rejected = settings.policyProblems
        if !rejected.isEmpty {
            let text = rejected.map(\.description).joined(separator: "; ")
            lastError = "contact ok, but the server policy was rejected (the last valid one is kept): \(text)"
            // Said once in the history, not at every check-in while the server sends it.
            if r.lastError != lastError { d.events.append(Event(.serverPolicyRejected, "rejected, last valid policy kept: \(text)")) }
            d.before.append(
                JournalLine(
                    kind: .serverPolicyRejected, level: .error,
                    message: "the server policy for \(r.user) is invalid and was rejected; keeping the last valid policy: \(text)",
                    fields: ["problems": text]))
            d.notes.append("server policy rejected: \(text)")
        } else if let p = settings.policy {
            policy = p
            if p != r.serverPolicy {
                let text = p.text
                d.events.append(Event(.serverPolicy, "policy from the server: \(text)"))
                d.before.append(
                    JournalLine(
                        kind: .serverPolicyApplied, level: .notice, message: "new server policy for \(r.user): \(text)",
                        fields: [
                            "offline_days_before_lock": "\(p.offlineDaysBeforeLock)", "offline_days_before_wipe": "\(p.offlineDaysBeforeWipe)",
                        ]))
                d.newPolicy = true
            }
        }
        if r.rejectedStatus != nil { d.notes.append("no longer rejected") }
        if r.blocked {
            d.events.append(Event(.unblocked, "the policy server no longer blocks the registration"))
            d.notes.append("no longer blocked")
        }
        if settings.registrationLocked == true, r.liftable, r.state.isLockCommitted {
            d.lockChange = .noLongerLiftable
        }
        // A contact makes the server's own and the offline lock liftable, or lifts it
        // (`PolicyLockLift`); never one an administrator or the user set.
        if settings.registrationLocked != true, let trigger = r.lockTrigger {
            let lock = PolicyLockLift.Lock(state: r.state, trigger: trigger, liftable: r.liftable)
            switch PolicyLockLift.decide(lock, proof: .serverContact, setting: r.liftAfterContact, opens: r.opensWithoutPasscode) {
            case .notAPolicyLock, .stays:
                break
            case .becomesLiftable:
                if !r.liftable {
                    d.lockChange = .becomesLiftable(
                        Event(
                            .lockLiftable,
                            "the policy server allows the \(trigger.rawValue) lock to be lifted: it is lifted at \(r.user)'s next login, with the passcode, or by an administrator"
                        ))
                    d.notes.append("lock liftable: lifted at \(r.user)'s next login")
                }
            case .lift:
                d.lockChange = .lift(Event(.unlock, "unlocked by a successful contact with the policy server (lock trigger: \(trigger.rawValue))"))
            case .handBack:
                d.lockChange = .handBack(
                    Event(.lockLifted, "the policy server lifted the \(trigger.rawValue) lock; the encrypted vault stays locked until its user unlocks it with the passcode"))
                d.notes.append("lock lifted; unlock with the passcode")
            }
        }
        // A valid answer's settings are kept also when it has no lock/wipe policy (e.g.
        // only a passwordPolicy, whose lock timeout then applies).
        d.write = .contact(policy: policy, settings: rejected.isEmpty ? settings : nil, lastError: lastError)
        if settings.registrationLocked == true, r.state == .active {
            d.order = .settingsLock(reason: "the policy server says the registration is locked (registration.locked)")
        }
        return d
    }
}
