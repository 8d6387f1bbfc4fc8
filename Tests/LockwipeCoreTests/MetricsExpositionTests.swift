import LockwipeCore
import Testing

/// The metrics file in the text exposition format 0.0.4: what node_exporter's textfile
/// collector reads, byte for byte.
struct MetricsExpositionTests {
    static func registration(
        _ user: String, uid: UInt32 = 1000, id: String = "0123456789abcdef0123456789abcdef", state: RegistrationState = .active, protection: Protection = .permissions,
        blocked: Bool = false,
        offline: Int64 = 0, lastContact: Int64 = 1_800_000_000, next: ScheduledAction? = nil, failures: Int = 0, rejected: Int? = nil
    ) -> MetricsSnapshot.Registration {
        MetricsSnapshot.Registration(
            user: user, uid: uid, id: id, state: state, protection: protection, blocked: blocked, offlineSeconds: offline, lastContact: lastContact, next: next,
            failedCheckIns: failures, rejectedStatus: rejected)
    }

    static func snapshot(_ registrations: [MetricsSnapshot.Registration], degraded: Bool = false) -> MetricsSnapshot {
        MetricsSnapshot(version: "1.4.0", writtenAt: 1_800_000_123, degraded: degraded, wipesComplete: 2, wipesIncomplete: 1, registrations: registrations)
    }

    /// The whole file for one registration: every metric, its HELP and TYPE, in order.
    @Test func oneRegistrationIsRenderedCompletely() {
        var alice = Self.registration(
            "alice", uid: 1001, state: .locked, protection: .encrypted, blocked: true, offline: 90_000, lastContact: 1_799_910_123,
            next: ScheduledAction(action: .wipe, inSeconds: 3600), failures: 3, rejected: 403)
        alice.atRest = .host
        var snapshot = Self.snapshot([alice])
        snapshot.machineKeyUnavailable = true
        let text = MetricsExposition.render(snapshot)
        #expect(
            text == """
                # HELP lockwipe_build_info The running lockwiped's version (always 1).
                # TYPE lockwipe_build_info gauge
                lockwipe_build_info{version="1.4.0"} 1
                # HELP lockwipe_metrics_last_write_timestamp_seconds When lockwiped wrote this file (Unix seconds); it is rewritten at every change and at least every check-in interval.
                # TYPE lockwipe_metrics_last_write_timestamp_seconds gauge
                lockwipe_metrics_last_write_timestamp_seconds 1800000123
                # HELP lockwipe_degraded 1 when the state database is damaged and nothing is enforced (lockwipectl status says why).
                # TYPE lockwipe_degraded gauge
                lockwipe_degraded 0
                # HELP lockwipe_machine_key_unavailable 1 when lockwiped's sealed machine key does not open (a PCR changed, the TPM was cleared): the encrypted vaults it wraps stay locked.
                # TYPE lockwipe_machine_key_unavailable gauge
                lockwipe_machine_key_unavailable 1
                # HELP lockwipe_wipes_total Wipes that finished, by result (complete, or incomplete with exceptions), as the history records them.
                # TYPE lockwipe_wipes_total counter
                lockwipe_wipes_total{result="complete"} 2
                lockwipe_wipes_total{result="incomplete"} 1
                # HELP lockwipe_registration_info A registration and how its vault is protected (always 1).
                # TYPE lockwipe_registration_info gauge
                lockwipe_registration_info{user="alice",uid="1001",protection="encrypted"} 1
                # HELP lockwipe_registration_at_rest What a copy of the disk gets of the vault (always 1): at_rest is tpm2 (nothing), host or disk (the vault), passcode (offline guessing) or none (a permission vault); absent once wiped.
                # TYPE lockwipe_registration_at_rest gauge
                lockwipe_registration_at_rest{user="alice",uid="1001",at_rest="host"} 1
                # HELP lockwipe_registration_state 1 for the state a registration is in, 0 for the others.
                # TYPE lockwipe_registration_state gauge
                lockwipe_registration_state{user="alice",uid="1001",state="active"} 0
                lockwipe_registration_state{user="alice",uid="1001",state="locked"} 1
                lockwipe_registration_state{user="alice",uid="1001",state="lock-failed"} 0
                lockwipe_registration_state{user="alice",uid="1001",state="wipe-pending"} 0
                lockwipe_registration_state{user="alice",uid="1001",state="wiping"} 0
                lockwipe_registration_state{user="alice",uid="1001",state="wiped"} 0
                # HELP lockwipe_registration_blocked 1 while the policy server blocks the registration.
                # TYPE lockwipe_registration_blocked gauge
                lockwipe_registration_blocked{user="alice",uid="1001"} 1
                # HELP lockwipe_registration_rejected 1 while the policy server is reached but rejects the registration (HTTP 403 without a known message code, or 401); not a contact.
                # TYPE lockwipe_registration_rejected gauge
                lockwipe_registration_rejected{user="alice",uid="1001"} 1
                # HELP lockwipe_registration_offline_seconds Offline time as the policy counts it (seconds since the last contact, suspend included).
                # TYPE lockwipe_registration_offline_seconds gauge
                lockwipe_registration_offline_seconds{user="alice",uid="1001"} 90000
                # HELP lockwipe_registration_last_contact_timestamp_seconds The last successful contact with the policy server, registration or administrator unlock (Unix seconds).
                # TYPE lockwipe_registration_last_contact_timestamp_seconds gauge
                lockwipe_registration_last_contact_timestamp_seconds{user="alice",uid="1001"} 1799910123
                # HELP lockwipe_registration_next_action_seconds Offline seconds left until the policy's next action (lock or wipe); absent when nothing is due.
                # TYPE lockwipe_registration_next_action_seconds gauge
                lockwipe_registration_next_action_seconds{user="alice",uid="1001",action="wipe"} 3600
                # HELP lockwipe_registration_check_in_failures Check-ins that failed in a row (0 after a successful contact).
                # TYPE lockwipe_registration_check_in_failures gauge
                lockwipe_registration_check_in_failures{user="alice",uid="1001"} 3

                """)
    }

    /// Label values are quoted; a user name (from NSS, which a hostile directory service
    /// may fill) can never end the value, add a label or start a line of its own.
    @Test(arguments: [
        ("plain", "plain"),
        ("back\\slash", "back\\\\slash"),
        ("quo\"te", "quo\\\"te"),
        ("new\nline", "new\\nline"),
        ("x\"} 1\nlockwipe_degraded 1\n#", "x\\\"} 1\\nlockwipe_degraded 1\\n#"),
        ("\\\"\n", "\\\\\\\"\\n"),
        ("tab\tand ünïcode", "tab\tand ünïcode"),
        ("", ""),
    ])
    func labelValuesAreEscaped(_ raw: String, _ escaped: String) {
        #expect(MetricsExposition.escapeLabelValue(raw) == escaped)
        let text = MetricsExposition.render(Self.snapshot([Self.registration(raw)]))
        #expect(text.contains("lockwipe_registration_blocked{user=\"\(escaped)\",uid=\"1000\"} 0\n"))
        // Every line is a comment or a sample of a lockwipe metric: nothing was injected.
        for line in text.split(separator: "\n") {
            #expect(line.hasPrefix("# HELP lockwipe_") || line.hasPrefix("# TYPE lockwipe_") || line.hasPrefix("lockwipe_"), "\(line)")
        }
        #expect(text.split(separator: "\n").filter { $0.hasPrefix("lockwipe_degraded") } == ["lockwipe_degraded 0"])
    }

    /// The same state is the same text: registrations by user name (then uid), whatever
    /// order they were read in; all samples of a metric in one group.
    @Test func orderIsStable() {
        let a = Self.registration("bob", uid: 1002)
        let b = Self.registration("alice", uid: 1003)
        let c = Self.registration("alice", uid: 1001)
        let one = MetricsExposition.render(Self.snapshot([a, b, c]))
        #expect(one == MetricsExposition.render(Self.snapshot([c, a, b])))
        let blocked = one.split(separator: "\n").filter { $0.hasPrefix("lockwipe_registration_blocked") }
        #expect(
            blocked == [
                "lockwipe_registration_blocked{user=\"alice\",uid=\"1001\"} 0", "lockwipe_registration_blocked{user=\"alice\",uid=\"1003\"} 0",
                "lockwipe_registration_blocked{user=\"bob\",uid=\"1002\"} 0",
            ])
        // Each metric name appears in one contiguous run of lines.
        var seen: [Substring] = []
        for line in one.split(separator: "\n") where !line.hasPrefix("#") {
            let name = line.prefix { $0 != "{" && $0 != " " }
            if seen.last != name {
                #expect(!seen.contains(name), "\(name) is split into two groups")
                seen.append(name)
            }
        }
    }

    /// Exactly one state is 1 per registration, for each state there is.
    @Test(arguments: RegistrationState.allCases)
    func stateIsOneHot(_ state: RegistrationState) {
        let lines = MetricsExposition.render(Self.snapshot([Self.registration("u", state: state)])).split(separator: "\n")
            .filter { $0.hasPrefix("lockwipe_registration_state{") }
        #expect(lines.count == RegistrationState.allCases.count)
        #expect(lines.filter { $0.hasSuffix(" 1") } == ["lockwipe_registration_state{user=\"u\",uid=\"1000\",state=\"\(state.rawValue)\"} 1"])
    }

    /// Without registrations the per-registration metrics are left out whole (no HELP or
    /// TYPE without samples); the daemon's own are always there. A damaged database says so.
    @Test func noRegistrationsAndDegraded() {
        let text = MetricsExposition.render(Self.snapshot([], degraded: true))
        #expect(!text.contains("lockwipe_registration"))
        #expect(text.contains("\nlockwipe_degraded 1\n"))
        #expect(text.contains("\nlockwipe_metrics_last_write_timestamp_seconds 1800000123\n"))
        #expect(text.hasSuffix("\n"))
    }

    /// Nothing due: no next-action sample for that registration.
    @Test func nothingDueHasNoNextAction() {
        let text = MetricsExposition.render(
            Self.snapshot([Self.registration("a", next: nil), Self.registration("b", next: ScheduledAction(action: .lock, inSeconds: 5))]))
        #expect(
            text.split(separator: "\n").filter { $0.hasPrefix("lockwipe_registration_next_action_seconds") } == [
                "lockwipe_registration_next_action_seconds{user=\"b\",uid=\"1000\",action=\"lock\"} 5"
            ])
    }

    /// Without user labels every per-registration series is labelled by the registration
    /// id alone, in id order, and the file holds no user name or uid anywhere; the same
    /// series (names, other labels, values) remain for the alert rules.
    @Test func withoutUserLabelsOnlyTheRegistrationIDIsShown() {
        let a = Self.registration(
            "alice", uid: 1001, id: "ffff0000ffff0000ffff0000ffff0000", state: .locked, next: ScheduledAction(action: .wipe, inSeconds: 3600), failures: 2)
        let b = Self.registration("bob", uid: 1002, id: "00000000aaaaaaaa00000000aaaaaaaa")
        let labelled = MetricsExposition.render(Self.snapshot([a, b]))
        let text = MetricsExposition.render(Self.snapshot([a, b]), userLabels: false)
        #expect(text == MetricsExposition.render(Self.snapshot([b, a]), userLabels: false))
        for secret in ["alice", "bob", "1001", "1002", "user=", "uid="] {
            #expect(!text.contains(secret), "\(secret) in:\n\(text)")
        }
        // The same lines as with user labels, the labels swapped.
        let relabelled = labelled.replacingOccurrences(of: "user=\"alice\",uid=\"1001\"", with: "registration=\"\(a.id)\"")
            .replacingOccurrences(of: "user=\"bob\",uid=\"1002\"", with: "registration=\"\(b.id)\"")
        #expect(Set(text.split(separator: "\n")) == Set(relabelled.split(separator: "\n")))
        let lines = text.split(separator: "\n")
        #expect(lines.contains("lockwipe_registration_state{registration=\"\(a.id)\",state=\"locked\"} 1"))
        #expect(lines.contains("lockwipe_registration_next_action_seconds{registration=\"\(a.id)\",action=\"wipe\"} 3600"))
        #expect(lines.contains("lockwipe_registration_check_in_failures{registration=\"\(a.id)\"} 2"))
        // Ordered by id: b's id sorts first.
        #expect(
            lines.filter { $0.hasPrefix("lockwipe_registration_blocked") } == [
                "lockwipe_registration_blocked{registration=\"\(b.id)\"} 0", "lockwipe_registration_blocked{registration=\"\(a.id)\"} 0",
            ])
    }
}
