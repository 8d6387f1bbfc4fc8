import LockwipeCore
import Testing

/// What a check-in answer does to a registration, as a table: one row a (registration,
/// answer) pair and the effects the daemon must carry out, in order.
@Suite struct CheckInDecisionTests {
    typealias Reg = CheckInDecision.Registration

    static func settings(lock: Int? = nil, wipe: Int = 0, locked: Bool? = nil, problems: [ServerSettings.Problem] = []) -> ServerSettings {
        ServerSettings(
            lockWipe: lock.map { LockWipeSettings(enabled: true, blockDisconnectedPeriod: $0, wipeDisconnectedPeriod: wipe) },
            registrationLocked: locked, problems: problems)
    }

    static let badPolicy = settings(lock: 3, wipe: 9, problems: [.init(key: "blockWipingPolicy.blockDisconnectedPeriod", message: "not a number")])
    static let rejection = "contact ok, but the server policy was rejected (the last valid one is kept): blockWipingPolicy.blockDisconnectedPeriod: not a number"

    struct Row: CustomTestStringConvertible, Sendable {
        var name: String
        var registration: Reg
        var outcome: CheckInOutcome
        var effects: [String]
        var testDescription: String { name }
    }

    static let rows: [Row] = [
        // Contacts
        Row(
            name: "a new server policy is adopted and announced", registration: Reg(user: "alice", state: .active),
            outcome: .contact(settings(lock: 3, wipe: 9)),
            effects: ["log serverPolicyApplied", "write contact policy 3/9 settings", "event server-policy", "log checkInOK"]),
        Row(
            name: "the same policy again is adopted silently",
            registration: Reg(user: "alice", state: .active, serverPolicy: Policy(offlineDaysBeforeLock: 3, offlineDaysBeforeWipe: 9)),
            outcome: .contact(settings(lock: 3, wipe: 9)),
            effects: ["write contact policy 3/9 settings", "log checkInOK"]),
        Row(
            name: "settings without a policy keep the policy, store the settings", registration: Reg(user: "alice", state: .active),
            outcome: .contact(settings()),
            effects: ["write contact policy - settings", "log checkInOK"]),
        Row(
            name: "an invalid policy is rejected, the contact still counts", registration: Reg(user: "alice", state: .active),
            outcome: .contact(badPolicy),
            effects: ["log serverPolicyRejected", "write contact policy - error", "event server-policy-rejected", "log checkInOK"]),
        Row(
            name: "the same rejection again is not recorded twice", registration: Reg(user: "alice", state: .active, lastError: rejection),
            outcome: .contact(badPolicy),
            effects: ["log serverPolicyRejected", "write contact policy - error", "log checkInOK"]),
        Row(
            name: "a contact lifts the block", registration: Reg(user: "alice", state: .active, blocked: true, blockedCode: "REG_BLOCKED"),
            outcome: .contact(settings()),
            effects: ["write contact policy - settings", "event unblocked", "log checkInOK"]),
        // lift_after_contact = "at-login" (the default): the lock becomes liftable.
        Row(
            name: "a server lock becomes liftable", registration: Reg(user: "alice", state: .locked, lockTrigger: .server),
            outcome: .contact(settings()),
            effects: ["liftable", "write contact policy - settings", "event lock-liftable", "log checkInOK"]),
        Row(
            name: "an offline lock that failed becomes liftable", registration: Reg(user: "alice", state: .lockFailed, lockTrigger: .offline),
            outcome: .contact(settings()),
            effects: ["liftable", "write contact policy - settings", "event lock-liftable", "log checkInOK"]),
        Row(
            name: "a vault only the passcode opens becomes liftable too",
            registration: Reg(user: "alice", state: .locked, lockTrigger: .offline, opensWithoutPasscode: false),
            outcome: .contact(settings()),
            effects: ["liftable", "write contact policy - settings", "event lock-liftable", "log checkInOK"]),
        Row(
            name: "a lock already liftable is not recorded again",
            registration: Reg(user: "alice", state: .locked, lockTrigger: .server, liftable: true),
            outcome: .contact(settings()),
            effects: ["write contact policy - settings", "log checkInOK"]),
        Row(
            name: "registration.locked takes back what an earlier contact allowed",
            registration: Reg(user: "alice", state: .locked, lockTrigger: .server, liftable: true),
            outcome: .contact(settings(locked: true)), effects: ["no longer liftable", "write contact policy - settings", "log checkInOK"]),
        // lift_after_contact = "immediately": the contact lifts it (the behaviour before issue 29).
        Row(
            name: "immediately: a server lock is lifted", registration: Reg(user: "alice", state: .locked, lockTrigger: .server, liftAfterContact: .immediately),
            outcome: .contact(settings()),
            effects: ["lift", "write contact policy - settings", "log checkInOK"]),
        Row(
            name: "immediately: an offline lock that failed is lifted",
            registration: Reg(user: "alice", state: .lockFailed, lockTrigger: .offline, liftAfterContact: .immediately),
            outcome: .contact(settings()),
            effects: ["lift", "write contact policy - settings", "log checkInOK"]),
        Row(
            name: "immediately: a vault only the passcode opens is handed back to it",
            registration: Reg(user: "alice", state: .locked, lockTrigger: .offline, opensWithoutPasscode: false, liftAfterContact: .immediately),
            outcome: .contact(settings()),
            effects: ["hand back", "write contact policy - settings", "event lock-lifted", "log checkInOK"]),
        Row(
            name: "a server lock stays (not liftable) while the settings say registration.locked",
            registration: Reg(user: "alice", state: .locked, lockTrigger: .server, liftAfterContact: .atLogin),
            outcome: .contact(settings(locked: true)), effects: ["write contact policy - settings", "log checkInOK"]),
        Row(
            name: "an administrator's lock stays", registration: Reg(user: "alice", state: .locked, lockTrigger: .admin),
            outcome: .contact(settings()), effects: ["write contact policy - settings", "log checkInOK"]),
        Row(
            name: "the user's own lock stays", registration: Reg(user: "alice", state: .locked, lockTrigger: .user),
            outcome: .contact(settings()), effects: ["write contact policy - settings", "log checkInOK"]),
        Row(
            name: "a lock on logout stays", registration: Reg(user: "alice", state: .locked, lockTrigger: .logout),
            outcome: .contact(settings()), effects: ["write contact policy - settings", "log checkInOK"]),
        Row(
            name: "a server lock stays while the settings say registration.locked",
            registration: Reg(user: "alice", state: .locked, lockTrigger: .server),
            outcome: .contact(settings(locked: true)), effects: ["write contact policy - settings", "log checkInOK"]),
        Row(
            name: "registration.locked locks an active registration", registration: Reg(user: "alice", state: .active),
            outcome: .contact(settings(locked: true)), effects: ["write contact policy - settings", "log checkInOK", "order settings lock"]),
        Row(
            name: "registration.locked = false changes nothing", registration: Reg(user: "alice", state: .active),
            outcome: .contact(settings(locked: false)), effects: ["write contact policy - settings", "log checkInOK"]),
        // Server orders: not a contact, carried out as a lock or wipe
        Row(
            name: "a 403 lock order", registration: Reg(user: "alice", state: .active, failures: 4),
            outcome: .lock, effects: ["write attempt 0 HTTP 403 TRAFFIC_REG_LOCKED: locked by the server", "log serverOrder", "order lock TRAFFIC_REG_LOCKED"]),
        Row(
            name: "a 403 lock order to a locked registration", registration: Reg(user: "alice", state: .locked, lockTrigger: .admin),
            outcome: .lock, effects: ["write attempt 0 HTTP 403 TRAFFIC_REG_LOCKED: locked by the server", "log serverOrder", "order lock TRAFFIC_REG_LOCKED"]),
        Row(
            name: "a 403 wipe order", registration: Reg(user: "alice", state: .locked, lockTrigger: .server),
            outcome: .wipe, effects: ["write attempt 0 HTTP 403 TRAFFIC_REG_WIPED: wiped by the server", "log serverOrder", "order wipe TRAFFIC_REG_WIPED"]),
        // Blocks and failures: not a contact, no data action
        Row(
            name: "a new block is recorded", registration: Reg(user: "alice", state: .active, failures: 2),
            outcome: .blocked("TRAFFIC_BLOCKED"), effects: ["write blocked 0 TRAFFIC_BLOCKED", "event blocked", "log registrationBlocked", "failed"]),
        Row(
            name: "the same block again is not recorded twice", registration: Reg(user: "alice", state: .active, blocked: true, blockedCode: "TRAFFIC_BLOCKED"),
            outcome: .blocked("TRAFFIC_BLOCKED"), effects: ["write blocked 0 TRAFFIC_BLOCKED", "log registrationBlocked", "failed"]),
        Row(
            name: "a block with another code is recorded", registration: Reg(user: "alice", state: .active, blocked: true, blockedCode: "TRAFFIC_BLOCKED"),
            outcome: .blocked("REG_BLOCKED"), effects: ["write blocked 0 REG_BLOCKED", "event blocked", "log registrationBlocked", "failed"]),
        Row(
            name: "a failure counts one more in a row", registration: Reg(user: "alice", state: .locked, lockTrigger: .server, failures: 2),
            outcome: .failure("HTTP 500"), effects: ["write attempt 3 HTTP 500", "log checkInFailed", "failed"]),
        // Rejections: the server is reached but refuses the machine. The first one counts
        // (SAP's versioning answers every request alike); not a contact; observers told once.
        Row(
            name: "a first 403 without a code rejects the registration", registration: Reg(user: "alice", state: .active),
            outcome: .rejected(status: 403, text: "no message code"),
            effects: ["write rejected 1 403 no message code", "log registrationRejected", "failed", "announce"]),
        Row(
            name: "a rejection again is logged, not announced again", registration: Reg(user: "alice", state: .active, failures: 1, rejectedStatus: 403),
            outcome: .rejected(status: 403, text: "no message code"),
            effects: ["write rejected 2 403 no message code", "log registrationRejected", "failed"]),
        Row(
            name: "a 401 after a failed check-in rejects it", registration: Reg(user: "alice", state: .locked, lockTrigger: .offline, failures: 3),
            outcome: .rejected(status: 401, text: "no message code"),
            effects: ["write rejected 4 401 no message code", "log registrationRejected", "failed", "announce"]),
        Row(
            name: "a rejection keeps a block and lifts no lock",
            registration: Reg(user: "alice", state: .locked, lockTrigger: .server, blocked: true, blockedCode: "TRAFFIC_BLOCKED"),
            outcome: .rejected(status: 403, text: "x-message-code OTHER"),
            effects: ["write rejected 1 403 x-message-code OTHER", "log registrationRejected", "failed", "announce"]),
        Row(
            name: "a timeout while rejected keeps the rejection", registration: Reg(user: "alice", state: .active, failures: 2, rejectedStatus: 403),
            outcome: .failure("timed out"), effects: ["write attempt 3 timed out", "log checkInFailed", "failed"]),
        Row(
            name: "a contact clears the rejection", registration: Reg(user: "alice", state: .active, failures: 2, rejectedStatus: 403),
            outcome: .contact(settings()), effects: ["write contact policy - settings", "log checkInOK"]),
        Row(
            name: "a contact clears the rejection and makes an offline lock liftable",
            registration: Reg(user: "alice", state: .locked, lockTrigger: .offline, rejectedStatus: 401),
            outcome: .contact(settings()), effects: ["liftable", "write contact policy - settings", "event lock-liftable", "log checkInOK"]),
    ]

    /// The decision as a list of effects, in the order they are carried out.
    static func effects(_ d: CheckInDecision) -> [String] {
        var out = d.before.map { "log \($0.kind)" }
        switch d.lockChange {
        case .none: break
        case .lift: out.append("lift")
        case .handBack: out.append("hand back")
        case .becomesLiftable: out.append("liftable")
        case .noLongerLiftable: out.append("no longer liftable")
        }
        switch d.write {
        case .contact(let policy, let settings, let error):
            let p = policy.map { "\($0.offlineDaysBeforeLock)/\($0.offlineDaysBeforeWipe)" } ?? "-"
            out.append("write contact policy \(p)" + (settings != nil ? " settings" : "") + (error != nil ? " error" : ""))
        case .attempt(let error, let failures): out.append("write attempt \(failures) \(error)")
        case .blocked(let code, let failures): out.append("write blocked \(failures) \(code)")
        case .rejected(let status, let text, let failures): out.append("write rejected \(failures) \(status) \(text)")
        }
        out += d.events.map { "event \($0.kind.rawValue)" }
        if case .handBack(let e) = d.lockChange { out.append("event \(e.kind.rawValue)") }
        if case .becomesLiftable(let e) = d.lockChange { out.append("event \(e.kind.rawValue)") }
        out.append("log \(d.after.kind)")
        switch d.order {
        case .lock(let code, _)?: out.append("order lock \(code)")
        case .wipe(let code, _)?: out.append("order wipe \(code)")
        case .settingsLock?: out.append("order settings lock")
        case nil: break
        }
        if d.failed { out.append("failed") }
        if d.newlyRejected { out.append("announce") }
        return out
    }

    @Test(arguments: rows)
    func effectsOfAnAnswer(_ row: Row) {
        #expect(Self.effects(CheckInDecision.decide(row.registration, row.outcome)) == row.effects)
    }

    /// Only a contact and a server order are a check-in that did not fail; only a contact
    /// restarts the offline clock (writes `contact`).
    @Test(arguments: rows)
    func onlyAContactRestartsTheClock(_ row: Row) {
        let d = CheckInDecision.decide(row.registration, row.outcome)
        if case .contact = d.write { #expect(row.outcome.isContact) } else { #expect(!row.outcome.isContact) }
        #expect(d.failed == (!row.outcome.isContact && d.order == nil))
    }

    /// Issue 42: advice that fits the protocol and the credentials. SAP's hints (versions,
    /// roles, application connection) only for SAP; a 401 with no credentials says to
    /// store some, whatever the protocol.
    @Test(
        arguments: [
            (401, ServerProtocol.lockwipe, false, false, "the registration has no credentials to show the server: store them (lockwipectl credentials alice --token-file PATH)"),
            (401, .sapMobileServices, false, true, "the registration has no credentials to show the server: store them (lockwipectl credentials alice --refresh-token-file PATH)"),
            (
                401, .lockwipe, true, false,
                "check the registration's bearer token (replace it with lockwipectl credentials alice --token-file PATH) and that the server serves alice"
            ),
            (
                403, .lockwipe, false, false,
                "check the registration's bearer token (replace it with lockwipectl credentials alice --token-file PATH) and that the server serves alice"
            ),
            (
                403, .sapMobileServices, true, false,
                "check application versioning ([server] application_version against the versions active for the app), the user's roles, "
                    + "the registration's credentials (lockwipectl credentials alice --token-file PATH) and its application connection"
            ),
        ] as [(Int, ServerProtocol, Bool, Bool, String)])
    func rejectionAdviceFitsTheProtocolAndTheCredentials(status: Int, serverProtocol: ServerProtocol, hasCredentials: Bool, oauth: Bool, expected: String) {
        #expect(RejectionAdvice.text(status: status, serverProtocol: serverProtocol, hasCredentials: hasCredentials, oauth: oauth, user: "alice") == expected)
        let lockwipeAdvice = RejectionAdvice.text(status: status, serverProtocol: .lockwipe, hasCredentials: hasCredentials, oauth: oauth, user: "alice")
        #expect(!lockwipeAdvice.contains("application_version") && !lockwipeAdvice.contains("application connection"))
    }

    @Test func theWordsOfTheHistoryAndTheJournal() {
        let applied = CheckInDecision.decide(
            Reg(user: "alice", state: .locked, lockTrigger: .offline, liftAfterContact: .immediately), .contact(Self.settings(lock: 3, wipe: 0)))
        #expect(applied.events.map(\.detail) == ["policy from the server: lock after 3d, never wipe"])
        #expect(applied.lockChange == .lift(.init(.unlock, "unlocked by a successful contact with the policy server (lock trigger: offline)")))
        #expect(applied.notes.isEmpty && applied.newPolicy)
        #expect(applied.before.first?.fields == ["offline_days_before_lock": "3", "offline_days_before_wipe": "0"])
        #expect(applied.after.message == "check-in of alice ok")

        let liftable = CheckInDecision.decide(Reg(user: "alice", state: .locked, lockTrigger: .server), .contact(Self.settings()))
        #expect(
            liftable.lockChange
                == .becomesLiftable(
                    .init(
                        .lockLiftable,
                        "the policy server allows the server lock to be lifted: it is lifted at alice's next login, with the passcode, or by an administrator")))
        #expect(liftable.notes == ["lock liftable: lifted at alice's next login"])

        let handedBack = CheckInDecision.decide(
            Reg(user: "alice", state: .locked, lockTrigger: .server, opensWithoutPasscode: false, liftAfterContact: .immediately), .contact(Self.settings()))
        #expect(
            handedBack.lockChange
                == .handBack(
                    .init(
                        .lockLifted,
                        "the policy server lifted the server lock; the encrypted vault stays locked until its user unlocks it with the passcode")))
        #expect(handedBack.notes == ["lock lifted; unlock with the passcode"])

        let rejected = CheckInDecision.decide(Reg(user: "alice", state: .active), .contact(Self.badPolicy))
        #expect(rejected.write == .contact(policy: nil, settings: nil, lastError: Self.rejection))
        #expect(rejected.events.map(\.detail) == ["rejected, last valid policy kept: blockWipingPolicy.blockDisconnectedPeriod: not a number"])

        let order = CheckInDecision.decide(Reg(user: "alice", state: .active), .wipe)
        #expect(order.order == .wipe(code: "TRAFFIC_REG_WIPED", reason: "the policy server wiped the registration (HTTP 403 TRAFFIC_REG_WIPED)"))
        #expect(order.after.message == "check-in of alice: the server orders a wipe (TRAFFIC_REG_WIPED)")
        #expect(order.after.kind == .serverOrder)

        let rejected403 = CheckInDecision.decide(
            Reg(user: "alice", state: .active, serverProtocol: .sapMobileServices), .rejected(status: 403, text: "no message code"))
        let sapAdvice = RejectionAdvice.text(status: 403, serverProtocol: .sapMobileServices, hasCredentials: true, oauth: false, user: "alice")
        #expect(
            rejected403.after.message
                == "check-in of alice rejected: the server is reached but refuses this machine (HTTP 403: no message code); " + sapAdvice)
        #expect(rejected403.after.fields == ["result": "rejected", "http_status": "403", "error": "HTTP 403: no message code", "failures": "1"])
        #expect(rejected403.detail == "rejected by the server (HTTP 403: no message code); not a contact; " + sapAdvice)
        #expect(sapAdvice.contains("[server] application_version") && sapAdvice.contains("roles"))

        let cleared = CheckInDecision.decide(Reg(user: "alice", state: .active, rejectedStatus: 403), .contact(Self.settings()))
        #expect(cleared.notes == ["no longer rejected"])

        let failed = CheckInDecision.decide(Reg(user: "alice", state: .active), .failure("timeout"))
        #expect(failed.detail == "failed: timeout")
        #expect(failed.after.fields == ["result": "failed", "error": "timeout", "failures": "1"])

    }
}
