import LockwipeCore
import Testing

@Suite struct PolicyLockLiftTests {
    /// One row: the lock, the proof, the setting, whether the vault opens → the outcome.
    struct Row: CustomTestStringConvertible, Sendable {
        var state: RegistrationState
        var trigger: Trigger?
        var liftable: Bool
        var proof: PolicyLockLift.Proof
        var setting: PolicyLockLift.Setting
        var opens: Bool
        var expected: PolicyLockLift.Outcome

        var testDescription: String {
            "\(state.rawValue) by \(trigger?.rawValue ?? "-") liftable:\(liftable) \(proof.rawValue) \(setting.rawValue) opens:\(opens)"
        }
    }

    static let afterServer = PolicyLockLift.Outcome.stays("the lock by the policy server is lifted only after a contact with the policy server that allows it")
    static let afterOffline = PolicyLockLift.Outcome.stays("the lock by the offline policy is lifted only after a contact with the policy server that allows it")

    static let rows: [Row] = [
        // A contact makes the lock liftable (at-login), or lifts it (immediately).
        .init(state: .locked, trigger: .server, liftable: false, proof: .serverContact, setting: .atLogin, opens: true, expected: .becomesLiftable),
        .init(state: .locked, trigger: .offline, liftable: false, proof: .serverContact, setting: .atLogin, opens: false, expected: .becomesLiftable),
        .init(state: .lockFailed, trigger: .offline, liftable: true, proof: .serverContact, setting: .atLogin, opens: true, expected: .becomesLiftable),
        .init(state: .locked, trigger: .server, liftable: false, proof: .serverContact, setting: .immediately, opens: true, expected: .lift),
        .init(state: .locked, trigger: .offline, liftable: false, proof: .serverContact, setting: .immediately, opens: false, expected: .handBack),
        // A login or a passcode lifts a liftable lock only.
        .init(state: .locked, trigger: .server, liftable: false, proof: .login, setting: .atLogin, opens: true, expected: afterServer),
        .init(state: .locked, trigger: .offline, liftable: false, proof: .passcode, setting: .atLogin, opens: true, expected: afterOffline),
        .init(state: .locked, trigger: .server, liftable: true, proof: .login, setting: .atLogin, opens: true, expected: .lift),
        .init(state: .locked, trigger: .offline, liftable: true, proof: .login, setting: .atLogin, opens: false, expected: .handBack),
        .init(state: .lockFailed, trigger: .server, liftable: true, proof: .passcode, setting: .atLogin, opens: true, expected: .lift),
        .init(state: .locked, trigger: .server, liftable: true, proof: .login, setting: .immediately, opens: true, expected: .lift),
        // An administrator and an offline code need no contact.
        .init(state: .locked, trigger: .server, liftable: false, proof: .administrator, setting: .atLogin, opens: true, expected: .lift),
        .init(state: .locked, trigger: .offline, liftable: false, proof: .offlineCode, setting: .atLogin, opens: true, expected: .lift),
        .init(state: .locked, trigger: .offline, liftable: false, proof: .offlineCode, setting: .atLogin, opens: false, expected: .handBack),
        .init(state: .lockFailed, trigger: .server, liftable: false, proof: .offlineCode, setting: .immediately, opens: true, expected: .lift),
        // Not a lock the policy set: another rule decides.
        .init(state: .locked, trigger: .admin, liftable: false, proof: .offlineCode, setting: .atLogin, opens: true, expected: .notAPolicyLock),
        .init(state: .locked, trigger: .user, liftable: true, proof: .login, setting: .atLogin, opens: true, expected: .notAPolicyLock),
        .init(state: .locked, trigger: .logout, liftable: false, proof: .serverContact, setting: .immediately, opens: true, expected: .notAPolicyLock),
        .init(state: .locked, trigger: .retryLimit, liftable: false, proof: .administrator, setting: .atLogin, opens: true, expected: .notAPolicyLock),
        .init(state: .active, trigger: nil, liftable: false, proof: .serverContact, setting: .atLogin, opens: true, expected: .notAPolicyLock),
        .init(state: .wiped, trigger: .server, liftable: true, proof: .login, setting: .atLogin, opens: true, expected: .notAPolicyLock),
        .init(state: .wipePending, trigger: .offline, liftable: false, proof: .offlineCode, setting: .atLogin, opens: true, expected: .notAPolicyLock),
    ]

    @Test(arguments: rows)
    func decision(_ row: Row) {
        let lock = PolicyLockLift.Lock(state: row.state, trigger: row.trigger, liftable: row.liftable)
        #expect(PolicyLockLift.decide(lock, proof: row.proof, setting: row.setting, opens: row.opens) == row.expected)
    }

    @Test func statusSaysWhatTheLockWaitsFor() {
        let server = PolicyLockLift.Lock(state: .locked, trigger: .server, liftable: false)
        let liftable = PolicyLockLift.Lock(state: .locked, trigger: .offline, liftable: true)
        #expect(
            PolicyLockLift.waitingFor(server, user: "alice", setting: .atLogin, serverConfigured: true)
                == "lifted at alice's first login after a contact with the policy server that allows it, or by an administrator")
        #expect(
            PolicyLockLift.waitingFor(server, user: "alice", setting: .immediately, serverConfigured: true)
                == "lifted at the next contact with the policy server that allows it, or by an administrator")
        #expect(
            PolicyLockLift.waitingFor(server, user: "alice", setting: .atLogin, serverConfigured: false)
                == "no policy server is configured: an administrator must unlock it")
        #expect(
            PolicyLockLift.waitingFor(liftable, user: "alice", setting: .atLogin, serverConfigured: true)
                == "the policy server allows it: lifted at alice's next login, with lockwipectl unlock and the passcode, or by an administrator")
        #expect(PolicyLockLift.waitingFor(.init(state: .locked, trigger: .admin, liftable: false), user: "alice", setting: .atLogin, serverConfigured: true) == nil)
    }
}
