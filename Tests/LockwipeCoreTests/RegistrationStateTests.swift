import LockwipeCore
import Testing

/// What a lock does to a registration in each state: a table over every state, so that a
/// new state cannot be added without deciding it.
@Suite struct RegistrationStateTests {
    static let lockSteps: [(RegistrationState, RegistrationState.LockStep)] = [
        (.active, .lock),
        (.locked, .alreadyLocked),
        (.lockFailed, .retry),
        (.wipePending, .refuse),
        (.wiping, .refuse),
        (.wiped, .refuse),
    ]

    @Test(arguments: lockSteps)
    func aLockDoes(_ state: RegistrationState, _ step: RegistrationState.LockStep) {
        #expect(state.lockStep == step)
    }

    @Test func everyStateIsInTheTable() {
        #expect(Set(Self.lockSteps.map(\.0)) == Set(RegistrationState.allCases))
    }

    /// A refused lock always has a next step to tell the operator; the others need none.
    @Test(arguments: RegistrationState.allCases)
    func aRefusalSaysWhatToDoInstead(_ state: RegistrationState) {
        #expect((state.nextStep(user: "alice") != nil) == (state.lockStep == .refuse))
    }
}
