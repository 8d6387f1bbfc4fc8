import LockwipeCore
import Testing

@Suite struct LoginGateTests {
    func reg(_ state: RegistrationState, _ trigger: Trigger? = nil, _ protection: Protection = .permissions, blocked: Bool = false) -> LoginGate.Registration {
        LoginGate.Registration(user: "alice", state: state, lockTrigger: trigger, protection: protection, blocked: blocked)
    }

    @Test func unregisteredAndActiveUsersPassSilently() {
        #expect(LoginGate.decide(nil) == .init(allowed: true, message: nil))
        #expect(LoginGate.decide(reg(.active)) == .init(allowed: true, message: nil))
    }

    @Test func aServerLockIsRefusedWithTheReason() {
        let d = LoginGate.decide(reg(.locked, .server))
        #expect(!d.allowed)
        #expect(d.message?.contains("login refused: the policy server locked the data of alice") == true)
    }

    /// A contact made it liftable: this login is how she lifts it (`PolicyLockLift`).
    @Test(arguments: [(RegistrationState.locked, Trigger.server), (.lockFailed, .server), (.locked, .offline)])
    func aLiftableLockPassesWithANotice(_ state: RegistrationState, _ trigger: Trigger) {
        let d = LoginGate.decide(
            LoginGate.Registration(user: "alice", state: state, lockTrigger: trigger, protection: .permissions, blocked: false, liftable: true))
        #expect(d.allowed)
        #expect(d.message?.contains("the policy server allows it to be unlocked: log in with your password") == true)
    }

    @Test(arguments: [RegistrationState.wiped, .wipePending, .wiping])
    func wipedOrBeingWipedIsRefused(_ state: RegistrationState) {
        let d = LoginGate.decide(reg(state, .server))
        #expect(!d.allowed)
        #expect(d.message?.hasPrefix("lockwipe: login refused: the data of alice on this machine") == true)
    }

    /// The user must be able to log in to get these lifted: check in from their session,
    /// or unlock with their passcode.
    @Test(arguments: [Trigger.offline, .logout, .admin, .user])
    func otherLocksPassWithANotice(_ trigger: Trigger) {
        let d = LoginGate.decide(reg(.locked, trigger))
        #expect(d.allowed)
        #expect(d.message?.hasPrefix("lockwipe: your data on this machine is locked.") == true)
    }

    /// A lock that failed (the vault could not be reached as registered) is still a
    /// committed lock: the gate decides exactly as for one in force.
    @Test(arguments: [Trigger.server, .offline, .logout, .admin, .user])
    func aFailedLockIsGatedAsALock(_ trigger: Trigger) {
        #expect(LoginGate.decide(reg(.lockFailed, trigger)) == LoginGate.decide(reg(.locked, trigger)))
    }

    @Test func theNoticeSaysHowToUnlock() {
        #expect(LoginGate.decide(reg(.locked, .offline)).message?.contains("once it checks in with the policy server (then log in with your password)") == true)
        #expect(LoginGate.decide(reg(.locked, .logout, .encrypted)).message?.contains("lockwipectl unlock --user alice") == true)
        #expect(LoginGate.decide(reg(.locked, .logout, .permissions)).message?.contains("ask your administrator") == true)
    }

    @Test func aBlockedRegistrationPassesWithANotice() {
        let d = LoginGate.decide(reg(.active, blocked: true))
        #expect(d.allowed && d.message?.contains("blocked") == true)
    }

    /// One account registered under two names (aliases sharing a uid): the strictest
    /// decision wins, whichever name the user logs in with.
    @Test func severalRegistrationsOfOneAccountGiveTheStrictestDecision() {
        #expect(LoginGate.decide(among: []) == .init(allowed: true, message: nil))
        #expect(LoginGate.decide(among: [reg(.active), reg(.locked, .server)]).allowed == false)
        #expect(LoginGate.decide(among: [reg(.wiped), reg(.active)]).allowed == false)
        let both = LoginGate.decide(among: [reg(.locked, .offline), reg(.active, blocked: true)])
        #expect(both.allowed)
        #expect(both.message?.contains("locked") == true && both.message?.contains("blocked") == true)
        #expect(LoginGate.decide(among: [reg(.active), reg(.active)]) == .init(allowed: true, message: nil))
    }
}

@Suite struct LoginGateWarningTests {
    func reg(_ state: RegistrationState, _ trigger: Trigger? = nil, warning action: Action) -> LoginGate.Registration {
        LoginGate.Registration(
            user: "alice", state: state, lockTrigger: trigger, protection: .permissions, blocked: false,
            warning: (action: action, at: "2026-11-25T10:00:00Z", inSeconds: 3_600))
    }

    /// A warning is a notice: the login goes ahead, and the user is told what happens when
    /// and what to do.
    @Test func aWarningNeverRefusesAndSaysWhatToDo() {
        let d = LoginGate.decide(reg(.active, warning: .lock))
        #expect(d.allowed)
        #expect(d.message == WarningWindow.notice(user: "alice", action: .lock, at: "2026-11-25T10:00:00Z", inSeconds: 3_600))
        #expect(d.message?.contains("will be LOCKED in 1h (at 2026-11-25T10:00:00Z)") == true)
    }

    /// Locked offline with the wipe near: both notices, still allowed.
    @Test func aLockedUserIsWarnedOfTheWipeToo() {
        let d = LoginGate.decide(reg(.locked, .offline, warning: .wipe))
        #expect(d.allowed)
        #expect(d.message?.hasPrefix("lockwipe: your data on this machine is locked.") == true)
        #expect(d.message?.contains("will be WIPED for good in 1h") == true)
    }

    /// A refusal stays a refusal (a server lock), with the warning beside the reason.
    @Test func aRefusalIsNotTurnedIntoAnAllowByAWarning() {
        let d = LoginGate.decide(reg(.locked, .server, warning: .wipe))
        #expect(!d.allowed)
        #expect(d.message?.hasPrefix("lockwipe: login refused: the policy server locked") == true)
    }
}
