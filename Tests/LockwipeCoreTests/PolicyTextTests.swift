import LockwipeCore
import Testing

struct PolicyTextTests {
    @Test(arguments: [
        (Policy(offlineDaysBeforeLock: 7, offlineDaysBeforeWipe: 30), "lock after 7d, wipe after 30d"),
        (Policy(offlineDaysBeforeLock: 2, offlineDaysBeforeWipe: 0), "lock after 2d, never wipe"),
        (Policy(offlineDaysBeforeLock: 0, offlineDaysBeforeWipe: 5), "never lock, wipe after 5d"),
        (Policy.never, "never lock, never wipe"),
    ])
    func aPolicyIsWordedOneWay(_ policy: Policy, _ text: String) {
        #expect(policy.text == text)
    }
}
