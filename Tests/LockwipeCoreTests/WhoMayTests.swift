import LockwipeCore
import Testing

/// The who-may table, row by row: each verb, for an administrator, for the registered user
/// herself (by uid), for another user, for a user with no registration, with the refusal in
/// the words `lockwipectl` prints (IntegrationTests/system/test_authorization_matrix.py asserts them
/// on the real daemon).
struct WhoMayTests {
    static let root = WhoMay.Caller(uid: 0, name: "root", isAdmin: true)
    static let alice = WhoMay.Caller(uid: 1000, name: "alice", isAdmin: false)
    static let bob = WhoMay.Caller(uid: 1001, name: "bob", isAdmin: false)
    static let nameless = WhoMay.Caller(uid: 1002, name: nil, isAdmin: false)
    static let aliceEncrypted = WhoMay.Registration(user: "alice", uid: 1000, protection: .encrypted)
    static let alicePermissions = WhoMay.Registration(user: "alice", uid: 1000, protection: .permissions)
    static let bobsRegistration = WhoMay.Registration(user: "bob", uid: 1001, protection: .encrypted)

    struct Row: Sendable, CustomTestStringConvertible {
        var verb: WhoMay.Verb
        var request: WhoMay.Request
        var decision: WhoMay.Decision
        var why: String
        var testDescription: String { "\(verb.rawValue): \(why)" }

        init(_ verb: WhoMay.Verb, _ request: WhoMay.Request, _ decision: WhoMay.Decision, _ why: String) {
            self.verb = verb
            self.request = request
            self.decision = decision
            self.why = why
        }
    }

    static func refused(_ message: String) -> WhoMay.Decision { .refused(WhoMay.Refusal(.notPermitted, message)) }
    static func invalid(_ message: String) -> WhoMay.Decision { .refused(WhoMay.Refusal(.invalidParameter("user"), message)) }
    static let onlyOne = invalid("give exactly one of user or all")
    static func noRegistration(_ verb: String) -> WhoMay.Decision {
        refused("you have no registration (no data of carol (uid 1003) is registered with lockwiped); only administrators may \(verb) other users' registrations")
    }
    static let carol = WhoMay.Caller(uid: 1003, name: "carol", isAdmin: false)

    static let rows: [Row] = [
        // Lock (and its preview).
        Row(.lock, .init(caller: root, user: "alice"), .allowed(.user("alice")), "an administrator, any registration"),
        Row(.lock, .init(caller: root, all: true), .allowed(.all), "an administrator, all"),
        Row(.lock, .init(caller: root), onlyOne, "an administrator naming nothing"),
        Row(.lock, .init(caller: root, user: "alice", all: true), onlyOne, "both a user and all"),
        Row(.lock, .init(caller: alice, user: "alice", named: aliceEncrypted, own: ["alice"]), .allowed(.user("alice")), "her own"),
        Row(.lock, .init(caller: alice, own: ["alice"]), .allowed(.user("alice")), "naming none: her single own registration"),
        Row(
            .lock, .init(caller: alice, own: ["alice", "alice-work"]),
            invalid("you have 2 registrations (alice, alice-work): name the one to lock"), "naming none with two of her own"),
        Row(.lock, .init(caller: carol), noRegistration("lock"), "naming none without a registration"),
        Row(.lock, .init(caller: alice, user: "bob", named: bobsRegistration, own: ["alice"]), refused("you may only lock your own registration"), "another's"),
        Row(.lock, .init(caller: carol, user: "bob", named: bobsRegistration), noRegistration("lock"), "another's, having none"),
        Row(.lock, .init(caller: alice, all: true, own: ["alice"]), refused("you may only lock your own registration"), "all, as a user"),
        Row(
            .lock, .init(caller: alice, user: "alice", named: WhoMay.Registration(user: "alice", uid: 1001, protection: .encrypted), own: []),
            noRegistration("lock").replacing("carol (uid 1003)", with: "alice (uid 1000)"), "her name, but another uid's registration"),
        // Survey a wipe.
        Row(.previewWipe, .init(caller: alice, user: "alice", named: alicePermissions, own: ["alice"]), .allowed(.user("alice")), "her own, whatever its protection"),
        Row(.previewWipe, .init(caller: alice, own: ["alice"]), .allowed(.user("alice")), "naming none, her one registration (issue 42)"),
        Row(.previewWipe, .init(caller: root), onlyOne, "an administrator naming none: no registration of her own"),
        Row(
            .previewWipe, .init(caller: alice, user: "bob", named: bobsRegistration, own: ["alice"]), refused("you may only survey a wipe of your own registration"),
            "another's"),
        Row(.previewWipe, .init(caller: root, all: true), .allowed(.all), "an administrator, all"),
        // Wipe.
        Row(.wipe, .init(caller: root, user: "bob"), .allowed(.user("bob")), "an administrator"),
        Row(.wipe, .init(caller: alice, user: "alice", named: aliceEncrypted, own: ["alice"]), .allowed(.user("alice")), "her own encrypted vault"),
        Row(
            .wipe, .init(caller: alice, user: "alice", named: alicePermissions, own: ["alice"]), refused("only root and members of the admin group may wipe"),
            "her own vault with a permission lock"),
        Row(.wipe, .init(caller: alice, user: "bob", named: bobsRegistration, own: ["alice"]), refused("only root and members of the admin group may wipe"), "another's"),
        Row(.wipe, .init(caller: alice, all: true, own: ["alice"]), refused("only root and members of the admin group may wipe"), "all, as a user"),
        Row(.wipe, .init(caller: alice, own: ["alice"]), onlyOne, "naming none"),
        // Unlock, passcodes.
        Row(.unlock, .init(caller: root, user: "bob"), .allowed(.user("bob")), "an administrator"),
        Row(.unlock, .init(caller: alice, user: "alice", named: aliceEncrypted, own: ["alice"]), .allowed(.user("alice")), "her own encrypted vault"),
        Row(
            .unlock, .init(caller: alice, user: "alice", named: alicePermissions, own: ["alice"]),
            refused("only root and members of the admin group may unlock a vault with a permission lock"), "her own permission lock"),
        Row(.unlock, .init(caller: alice, user: "bob", named: bobsRegistration, own: ["alice"]), refused("you may only unlock your own registration"), "another's"),
        Row(.unlock, .init(caller: carol, user: "bob", named: bobsRegistration), noRegistration("unlock"), "another's, having none"),
        Row(.setPasscode, .init(caller: alice, user: "alice", named: aliceEncrypted, own: ["alice"]), .allowed(.user("alice")), "her own"),
        Row(
            .setPasscode, .init(caller: alice, user: "bob", named: bobsRegistration, own: ["alice"]), refused("you may only set the passcode of your own registration"),
            "another's"),
        Row(.setPasscode, .init(caller: alice, user: "nobody", own: ["alice"]), refused("you may only set the passcode of your own registration"), "an unregistered name"),
        // Offline codes: a user her own registration, permission lock included (the
        // helpdesk's response stands for an administrator); provisioning: administrators.
        Row(.offlineCode, .init(caller: alice, user: "alice", named: alicePermissions, own: ["alice"]), .allowed(.user("alice")), "her own permission lock"),
        Row(.offlineCode, .init(caller: alice, own: ["alice"]), .allowed(.user("alice")), "naming none: her single own registration"),
        Row(
            .offlineCode, .init(caller: alice, own: ["alice", "alice-work"]), invalid("you have 2 registrations (alice, alice-work): name one"),
            "naming none with two of her own"),
        Row(.offlineCode, .init(caller: carol), noRegistration("ask for offline codes for"), "naming none without a registration"),
        Row(
            .offlineCode, .init(caller: alice, user: "bob", named: bobsRegistration, own: ["alice"]),
            refused("you may only ask for offline codes for your own registration"), "another's"),
        Row(.offlineCode, .init(caller: root, user: "bob"), .allowed(.user("bob")), "an administrator"),
        Row(.offlineCode, .init(caller: root), invalid("give a user"), "an administrator naming none"),
        Row(.provisionOfflineCodes, .init(caller: root), .allowed(.user("")), "an administrator"),
        Row(
            .provisionOfflineCodes, .init(caller: alice, own: ["alice"]), refused("only root and members of the admin group may provision offline codes"),
            "a user"),
        // Recovery with the organisation's key: administrators only, even for her own vault.
        Row(.recover, .init(caller: root, user: "alice"), .allowed(.user("alice")), "an administrator"),
        Row(.recover, .init(caller: root), .allowed(.user("")), "an administrator naming none: every vault"),
        Row(
            .recover, .init(caller: alice, user: "alice", named: aliceEncrypted, own: ["alice"]),
            refused("only root and members of the admin group may recover vault keys"), "a user, her own encrypted vault"),
        // Check in.
        Row(.checkIn, .init(caller: root), .allowed(.all), "an administrator naming none: all"),
        Row(.checkIn, .init(caller: root, user: "bob"), .allowed(.user("bob")), "an administrator"),
        Row(.checkIn, .init(caller: alice, own: ["alice", "alice-work"]), .allowed(.users(["alice", "alice-work"])), "naming none: all of hers"),
        Row(.checkIn, .init(caller: carol), noRegistration("check in"), "naming none, having none"),
        Row(.checkIn, .init(caller: alice, user: "alice", named: aliceEncrypted, own: ["alice"]), .allowed(.user("alice")), "her own"),
        Row(.checkIn, .init(caller: alice, user: "bob", named: bobsRegistration, own: ["alice"]), refused("you may only check in your own registration"), "another's"),
        // Administrators only.
        Row(.register, .init(caller: root, user: "alice"), .allowed(.user("alice")), "an administrator registers"),
        Row(.register, .init(caller: alice, user: "alice"), refused("only root and members of the admin group may register users"), "a user, even herself"),
        Row(.setCredentials, .init(caller: alice, user: "alice", named: aliceEncrypted), refused("only root and members of the admin group may set credentials"), "a user"),
        Row(.unregister, .init(caller: alice, user: "alice", named: aliceEncrypted), refused("only root and members of the admin group may unregister users"), "a user"),
        // History.
        Row(.readHistory, .init(caller: root), .allowed(.records(user: nil, owner: nil)), "an administrator: everything"),
        Row(.readHistory, .init(caller: root, user: "bob"), .allowed(.records(user: "bob", owner: nil)), "an administrator: one user's"),
        Row(.readHistory, .init(caller: alice, named: aliceEncrypted), .allowed(.records(user: "alice", owner: 1000)), "naming none: her own name's, hers only"),
        Row(.readHistory, .init(caller: alice, user: "alice", named: aliceEncrypted), .allowed(.records(user: "alice", owner: 1000)), "her own"),
        Row(.readHistory, .init(caller: alice, user: "alice"), .allowed(.records(user: "alice", owner: 1000)), "her name, unregistered"),
        Row(
            .readHistory, .init(caller: alice, user: "bob", named: bobsRegistration), refused("only administrators may read the history of other users"),
            "another's"),
        Row(
            .readHistory, .init(caller: alice, named: WhoMay.Registration(user: "alice", uid: 1001, protection: .encrypted)), .allowed(.nothing),
            "naming none, her name registered to another uid: nothing"),
        Row(.readHistory, .init(caller: nameless), .allowed(.nothing), "naming none, without a name: nothing"),
        // A lift at login: root (the PAM auth stack) only, not the admin group.
        Row(.liftAtLogin, .init(caller: root), .allowed(.nothing), "root: the PAM auth stack"),
        Row(
            .liftAtLogin, .init(caller: WhoMay.Caller(uid: 1005, name: "ops", isAdmin: true)),
            refused(
                "only root may hand a login password to lockwiped (the PAM auth stack does, through lockwipectl pam-auth); to unlock your own vault use lockwipectl unlock and your passcode"
            ), "an admin group member is not root"),
        Row(
            .liftAtLogin, .init(caller: alice),
            refused(
                "only root may hand a login password to lockwiped (the PAM auth stack does, through lockwipectl pam-auth); to unlock your own vault use lockwipectl unlock and your passcode"
            ), "the user herself"),
        // Certificates.
        Row(.readCertificate, .init(caller: root, user: "bob"), .allowed(.records(user: "bob", owner: nil)), "an administrator"),
        Row(.readCertificate, .init(caller: alice, user: "alice", named: aliceEncrypted), .allowed(.records(user: "alice", owner: 1000)), "her own"),
        Row(
            .readCertificate, .init(caller: alice, user: "bob", named: bobsRegistration),
            refused("only administrators may read the certificates of other users"), "another's"),
        Row(
            .readCertificate, .init(caller: bob, user: "alice", named: aliceEncrypted),
            refused("only administrators may read the certificates of other users"), "another's, though she has one of her own"),
    ]

    @Test(arguments: rows)
    func decides(_ row: Row) {
        #expect(WhoMay.decide(row.verb, row.request) == row.decision)
    }

    @Test func everyVerbHasRows() {
        #expect(Set(Self.rows.map(\.verb)) == Set(WhoMay.Verb.allCases))
    }
}

extension WhoMay.Decision {
    fileprivate func replacing(_ old: String, with new: String) -> WhoMay.Decision {
        guard case .refused(var refusal) = self else { return self }
        refusal.message = refusal.message.replacing(old, with: new)
        return .refused(refusal)
    }
}
