import LockwipeCore
import Testing

@Suite struct UnlockRuleTests {
    // MARK: Who may unlock

    enum Who: String, Sendable {
        case admin, user
    }

    /// One row: who asks, the registration, whether a server is configured → the answer.
    struct AccessRow: CustomTestStringConvertible, Sendable {
        var who: Who
        var protection: Protection
        var state: RegistrationState
        var trigger: Trigger?
        var server: Bool
        var liftable = false
        var expected: UnlockRule.Access

        var testDescription: String {
            "\(who.rawValue) \(protection.rawValue) \(state.rawValue) by \(trigger?.rawValue ?? "-") server:\(server)" + (liftable ? " liftable" : "")
        }
    }

    static let permissionsAdminsOnly = "only root and members of the admin group may unlock a vault with a permission lock"
    static let byAnAdministrator = "alice was locked by an administrator: an administrator must unlock it"
    static func notLocked(_ state: RegistrationState) -> UnlockRule.Access {
        .refused(.init(.actionFailed, "alice is not locked (state: \(state.rawValue))" + (state.nextStep(user: "alice").map { ": " + $0 } ?? "")))
    }
    static func noServer(_ by: String) -> UnlockRule.Access {
        .refused(.init(.notPermitted, "alice was locked by \(by) and no policy server is configured: an administrator must unlock it"))
    }
    static func checkInFirst(_ by: String) -> UnlockRule.Access {
        .checkInFirst(
            otherwise: .init(
                .notPermitted,
                "alice was locked by \(by), and the check-in just tried did not let it be lifted (see lockwipectl status); try again once the server can be reached, or ask an administrator"
            ))
    }

    static let accessRows: [AccessRow] = [
        // The permission lock: administrators only; the caller is checked before the state.
        .init(who: .admin, protection: .permissions, state: .locked, trigger: .offline, server: true, expected: .allowed),
        .init(who: .admin, protection: .permissions, state: .lockFailed, trigger: .admin, server: false, expected: .allowed),
        .init(who: .admin, protection: .permissions, state: .active, trigger: nil, server: false, expected: notLocked(.active)),
        .init(who: .user, protection: .permissions, state: .locked, trigger: .user, server: true, expected: .refused(.init(.notPermitted, permissionsAdminsOnly))),
        .init(who: .user, protection: .permissions, state: .active, trigger: nil, server: false, expected: .refused(.init(.notPermitted, permissionsAdminsOnly))),
        // An encrypted vault: the state is checked first, for everyone.
        .init(who: .user, protection: .encrypted, state: .active, trigger: nil, server: true, expected: notLocked(.active)),
        .init(who: .admin, protection: .encrypted, state: .wiped, trigger: .server, server: true, expected: notLocked(.wiped)),
        .init(who: .user, protection: .encrypted, state: .wipePending, trigger: .server, server: true, expected: notLocked(.wipePending)),
        // A wiped permission vault: the refusal says the way forward (issue 27).
        .init(
            who: .admin, protection: .permissions, state: .wiped, trigger: .admin, server: false,
            expected: .refused(
                .init(
                    .actionFailed,
                    "alice is not locked (state: wiped): the data of alice was wiped; to give alice a vault again: lockwipectl unregister --user alice, "
                        + "then lockwipectl register --user alice --dir DIR (the wiped directory may be registered again: it is given back to alice)"))),
        // An administrator unlocks every lock.
        .init(who: .admin, protection: .encrypted, state: .locked, trigger: .server, server: true, expected: .allowed),
        .init(who: .admin, protection: .encrypted, state: .locked, trigger: .offline, server: false, expected: .allowed),
        .init(who: .admin, protection: .encrypted, state: .lockFailed, trigger: .admin, server: false, expected: .allowed),
        // The user: their own, logout and start-up locks.
        .init(who: .user, protection: .encrypted, state: .locked, trigger: .user, server: false, expected: .allowed),
        .init(who: .user, protection: .encrypted, state: .locked, trigger: .logout, server: true, expected: .allowed),
        .init(who: .user, protection: .encrypted, state: .lockFailed, trigger: .resume, server: false, expected: .allowed),
        // The server's and the offline lock: a check-in first, where there is a server.
        .init(who: .user, protection: .encrypted, state: .locked, trigger: .server, server: true, expected: checkInFirst("the policy server")),
        .init(who: .user, protection: .encrypted, state: .locked, trigger: .offline, server: true, expected: checkInFirst("the offline policy")),
        .init(who: .user, protection: .encrypted, state: .locked, trigger: .server, server: false, expected: noServer("the policy server")),
        .init(who: .user, protection: .encrypted, state: .lockFailed, trigger: .offline, server: false, expected: noServer("the offline policy")),
        // A contact made it liftable (PolicyLockLift, proof .passcode): her unlock goes ahead.
        .init(who: .user, protection: .encrypted, state: .locked, trigger: .server, server: true, liftable: true, expected: .allowed),
        .init(who: .user, protection: .encrypted, state: .lockFailed, trigger: .offline, server: true, liftable: true, expected: .allowed),
        // Still never a permission lock, nor an administrator's.
        .init(
            who: .user, protection: .permissions, state: .locked, trigger: .server, server: true, liftable: true,
            expected: .refused(.init(.notPermitted, permissionsAdminsOnly))),
        // An administrator's lock (and any other): administrators only.
        .init(who: .user, protection: .encrypted, state: .locked, trigger: .admin, server: true, expected: .refused(.init(.notPermitted, byAnAdministrator))),
        .init(who: .user, protection: .encrypted, state: .locked, trigger: .retryLimit, server: false, expected: .refused(.init(.notPermitted, byAnAdministrator))),
        .init(who: .user, protection: .encrypted, state: .locked, trigger: nil, server: true, expected: .refused(.init(.notPermitted, byAnAdministrator))),
    ]

    @Test(arguments: accessRows)
    func whoMayUnlock(_ row: AccessRow) {
        let request = UnlockRule.Request(
            user: "alice", byAdmin: row.who == .admin, protection: row.protection, state: row.state,
            lockTrigger: row.trigger, serverConfigured: row.server, liftable: row.liftable)
        #expect(UnlockRule.access(request) == row.expected)
    }

    // MARK: What opens the key

    struct OpeningRow: CustomTestStringConvertible, Sendable {
        var wrapping: UnlockRule.Wrapping
        var passcode: String?
        var newPasscode: String?
        var expected: UnlockRule.Opening
        var testDescription: String { "\(wrapping) passcode:\(passcode ?? "-") new:\(newPasscode ?? "-")" }
    }

    static let required = UnlockRule.Opening.refused(
        .init(
            .passcodeRequired,
            "the vault key of alice is protected by a passcode: give it (lockwipectl unlock prompts for it, or reads it with --passcode-stdin)"))
    static let noPasscodeYet = UnlockRule.Opening.refused(.init(.invalidParameter("new_passcode"), "alice has no passcode yet; set one with lockwipectl passcode set"))

    static let openingRows: [OpeningRow] = [
        .init(wrapping: .machine, passcode: nil, newPasscode: nil, expected: .withMachineKey),
        // The machine key opens whatever passcode is given (there is none to check).
        .init(wrapping: .machine, passcode: "anything", newPasscode: nil, expected: .withMachineKey),
        .init(wrapping: .machine, passcode: nil, newPasscode: "new one", expected: noPasscodeYet),
        .init(wrapping: .machine, passcode: "old", newPasscode: "new one", expected: noPasscodeYet),
        .init(wrapping: .passcode, passcode: nil, newPasscode: nil, expected: required),
        .init(wrapping: .passcode, passcode: nil, newPasscode: "new one", expected: required),
        .init(wrapping: .passcode, passcode: "secret", newPasscode: nil, expected: .withPasscode("secret")),
        .init(wrapping: .passcode, passcode: "secret", newPasscode: "new one", expected: .withPasscode("secret")),
    ]

    /// Issue 42, item 3: before a lock, what will undo it for the one asking, from the
    /// unlock's own rule. A user's own permission lock is the one she cannot undo.
    @Test(
        arguments: [
            (
                false, Protection.permissions, false,
                "only an administrator can unlock it (lockwipectl unlock alice, as root or a member of the admin group): you cannot undo this lock yourself"
            ),
            (false, .encrypted, true, "you can unlock it yourself (lockwipectl unlock, with your passcode once you have set one)"),
            (true, .permissions, true, "an administrator unlocks it (lockwipectl unlock alice, as root or a member of the admin group)"),
            (true, .encrypted, true, "an administrator unlocks it (lockwipectl unlock alice, as root or a member of the admin group)"),
        ] as [(Bool, Protection, Bool, String)])
    func beforeALockTheAskerIsToldWhatUndoesIt(byAdmin: Bool, protection: Protection, byAsker: Bool, text: String) {
        for server in [false, true] {
            #expect(UnlockRule.undo(user: "alice", byAdmin: byAdmin, protection: protection, serverConfigured: server) == .init(byAsker: byAsker, text: text))
        }
    }

    /// Issue 42: status says what every lock waits for; a lock handed back to the passcode
    /// (trigger `user`) waits for her own unlock, a permission lock for an administrator.
    @Test func whatALockThatIsNotThePolicysWaitsFor() {
        let own = "alice's own unlock (lockwipectl unlock, with the passcode once one is set), or an administrator"
        let admin = "an administrator (lockwipectl unlock alice)"
        #expect(UnlockRule.waitingFor(user: "alice", protection: .encrypted, state: .locked, trigger: .user) == own)
        #expect(UnlockRule.waitingFor(user: "alice", protection: .encrypted, state: .lockFailed, trigger: .logout) == own)
        #expect(UnlockRule.waitingFor(user: "alice", protection: .encrypted, state: .locked, trigger: .admin) == admin)
        #expect(UnlockRule.waitingFor(user: "alice", protection: .permissions, state: .locked, trigger: .user) == admin)
        #expect(UnlockRule.waitingFor(user: "alice", protection: .encrypted, state: .locked, trigger: .server) == nil)
        #expect(UnlockRule.waitingFor(user: "alice", protection: .encrypted, state: .active, trigger: nil) == nil)
    }

    @Test(arguments: openingRows)
    func whatOpensTheKey(_ row: OpeningRow) {
        #expect(UnlockRule.opening(user: "alice", wrapping: row.wrapping, passcode: row.passcode, newPasscode: row.newPasscode) == row.expected)
    }

    // MARK: Once the passcode opened the key

    struct AfterRow: CustomTestStringConvertible, Sendable {
        var newPasscode: String?
        var expired: Bool
        var expected: UnlockRule.AfterPasscode
        var testDescription: String { "new:\(newPasscode ?? "-") expired:\(expired)" }
    }

    static let afterRows: [AfterRow] = [
        .init(newPasscode: nil, expired: false, expected: .keep),
        .init(newPasscode: "new one", expired: false, expected: .rewrap(new: "new one", detail: "passcode changed at unlock", note: "passcode changed")),
        // Not expired: the same passcode again is a change like any other.
        .init(newPasscode: "secret", expired: false, expected: .rewrap(new: "secret", detail: "passcode changed at unlock", note: "passcode changed")),
        .init(
            newPasscode: nil, expired: true,
            expected: .refused(
                .init(
                    .passcodeExpired,
                    "passcode expired: change it (it was set 2026-01-02T03:04:05Z; expiration_days = 90): "
                        + "lockwipectl unlock --user alice --new-passcode-stdin, or on a terminal answer the prompts for a new one"))),
        .init(newPasscode: "secret", expired: true, expected: .refused(.init(.actionFailed, "the new passcode must differ from the expired one"))),
        .init(newPasscode: "new one", expired: true, expected: .rewrap(new: "new one", detail: "expired passcode replaced at unlock", note: "expired passcode replaced")),
    ]

    @Test(arguments: afterRows)
    func afterThePasscodeOpenedTheKey(_ row: AfterRow) {
        let expired = row.expired ? (setAt: "2026-01-02T03:04:05Z", expirationDays: 90) : nil
        #expect(UnlockRule.afterPasscode(user: "alice", passcode: "secret", newPasscode: row.newPasscode, expired: expired) == row.expected)
    }

    /// An administrator lifts every committed lock of either protection, whatever set it
    /// and whether or not there is a server: a user never may more than an administrator.
    @Test(arguments: [Protection.permissions, .encrypted], [Trigger.user, .logout, .resume, .server, .offline, .admin, .retryLimit])
    func anAdministratorUnlocksEveryLock(_ protection: Protection, _ trigger: Trigger) {
        for state in [RegistrationState.locked, .lockFailed] {
            for server in [false, true] {
                #expect(UnlockRule.access(.init(user: "alice", byAdmin: true, protection: protection, state: state, lockTrigger: trigger, serverConfigured: server)) == .allowed)
            }
        }
    }
}

/// Every state that a wipe committed to says what to do next; the others need nothing.
@Suite struct RegistrationNextStepTests {
    @Test(
        arguments: [
            (RegistrationState.active, nil),
            (.locked, nil),
            (.lockFailed, nil),
            (.wipePending, "is pending: it is retried at the next start of lockwiped"),
            (.wiping, "lockwipectl status shows its progress"),
            (.wiped, "lockwipectl unregister --user alice, then lockwipectl register --user alice --dir DIR"),
        ] as [(RegistrationState, String?)])
    func nextStep(_ state: RegistrationState, _ phrase: String?) {
        let step = state.nextStep(user: "alice")
        #expect((step != nil) == state.isWipeCommitted)
        if let phrase { #expect(step?.contains(phrase) == true, "\(step ?? "nil")") }
    }
}
