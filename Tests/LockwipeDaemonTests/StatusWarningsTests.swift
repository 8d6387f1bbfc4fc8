import LockwipeCore
import LockwipeProtocol
import Testing

@testable import LockwipeDaemon

@Suite struct StatusWarningsTests {
    func record(_ user: String, _ state: RegistrationState, _ change: (inout RegistrationRecord) -> Void = { _ in }) -> RegistrationRecord {
        var r = RegistrationRecord(
            user: user, uid: 1001, state: state, protection: .permissions, directories: ["/srv/\(user)"],
            lockTrigger: nil, blocked: false, clock: .started(at: ClockReading(wall: 0, boot: 0, bootID: "b")), lastWipe: nil)
        change(&r)
        return r
    }

    static let https: ServerConfiguration = {
        var s = ServerConfiguration()
        s.url = "https://policy.example"
        return s
    }()

    static let loopbackHTTP: ServerConfiguration = {
        var s = ServerConfiguration()
        s.url = "http://127.0.0.1:8080"
        s.allowInsecureHTTP = true
        return s
    }()

    @Test func theDaemonsOwnWarningsComeFirst() {
        #expect(
            StatusWarnings.list([], server: ServerConfiguration(), adminGroup: "lockwipe-admin", logout: ["logout warning"]) == [
                "no policy server is configured: offline clocks restart only when an administrator unlocks a registration",
                "the admin group 'lockwipe-admin' does not exist: only root is an administrator",
                "logout warning",
            ])
        let insecure = StatusWarnings.list([], server: Self.loopbackHTTP, adminGroup: nil, logout: [])
        #expect(insecure.count == 1 && insecure[0].hasPrefix("the policy server is reached over plain http://"))
        #expect(StatusWarnings.list([], server: Self.https, adminGroup: nil, logout: []) == [])
    }

    @Test func aRejectedReloadIsTheFirstWarning() {
        let warnings = StatusWarnings.list(
            [], server: ServerConfiguration(), adminGroup: nil, logout: [], rejectedReload: ["/etc/l.toml:3: policy.x: unknown key"])
        #expect(warnings.count == 2)
        #expect(
            warnings.first
                == "the last configuration reload was rejected and the previous configuration is still in force: /etc/l.toml:3: policy.x: unknown key (fix it, check with lockwiped --check-config, and reload again)"
        )
    }

    /// One registration per row: what it is in, and the one warning it gives (nil: none).
    @Test(arguments: [
        (RegistrationState.active, nil as String?, false, 0, nil as String?),
        (.lockFailed, "EACCES", false, 0, "the lock of u FAILED and is not in force; it is retried: EACCES"),
        (.lockFailed, nil, false, 0, "the lock of u FAILED and is not in force; it is retried: see the journal"),
        (.locked, "moved", false, 0, "the vault of u cannot be reached: moved"),
        (.wipePending, nil, false, 0, "the wipe of u is pending (incomplete or interrupted); it is retried at start-up"),
        (.active, nil, true, 0, "u is blocked by the policy server (TRAFFIC_REG_BLOCKED); its data is untouched"),
        (.active, nil, false, 3, "check-in of u failed 3 time(s) in a row: timed out"),
        // A wiped registration: no check-in warning, the way forward instead (issue 27).
        (
            .wiped, nil, false, 3,
            "the data of u was wiped; to give u a vault again: lockwipectl unregister --user u, then lockwipectl register --user u --dir DIR (the wiped directory may be registered again: it is given back to u)"
        ),
    ])
    func eachRegistrationSaysWhatNeedsAnOperator(state: RegistrationState, vaultError: String?, blocked: Bool, failures: Int, expected: String?) {
        let r = record("u", state) {
            $0.vaultError = vaultError
            $0.blocked = blocked
            $0.server.blockedCode = blocked ? "TRAFFIC_REG_BLOCKED" : nil
            $0.server.failures = failures
            $0.server.lastError = failures > 0 ? "timed out" : nil
        }
        #expect(StatusWarnings.list([r], server: Self.https, adminGroup: nil, logout: []) == (expected.map { [$0] } ?? []))
    }

    @Test func aRegistrationWithoutSAPConnectionIsNamed() {
        let warnings = StatusWarnings.list(
            [record("u", .active)], server: Self.https, adminGroup: nil, logout: [], connectionProblems: [("u", "the answer had no id")])
        #expect(warnings == ["u has no SAP application connection yet: the answer had no id"])
    }

    @Test func failedCheckInsAreNotWarnedAboutWithoutAServer() {
        let r = record("u", .active) { $0.server.failures = 2 }
        #expect(StatusWarnings.list([r], server: ServerConfiguration(), adminGroup: nil, logout: []).count == 1)
    }
}
