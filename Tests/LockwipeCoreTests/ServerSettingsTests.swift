import Foundation
import LockwipeCore
import Testing

@Suite struct ServerSettingsTests {
    func decode(_ json: String) throws -> ServerSettings {
        try ServerSettings.decode(Data(json.utf8))
    }

    /// SAP sends numbers and booleans as strings as often as not; both forms mean the same.
    @Test(arguments: [
        #"{"blockWipingPolicy": {"blockWipeEnabled": true, "blockDisconnectedPeriod": 8, "wipeDisconnectedPeriod": 20}}"#,
        #"{"blockWipingPolicy": {"blockWipeEnabled": "true", "blockDisconnectedPeriod": "8", "wipeDisconnectedPeriod": "20"}}"#,
        #"{"blockWipingPolicy": {"blockWipeEnabled": "TRUE", "blockDisconnectedPeriod": " 8 ", "wipeDisconnectedPeriod": 20.0}}"#,
        #"{"mobileservices": {"settingsExchange": {"blockWipingPolicy": {"blockWipeEnabled": "true", "blockDisconnectedPeriod": 8, "wipeDisconnectedPeriod": "20"}}}}"#,
        #"{"settingsExchange": {"blockWipingPolicy": {"blockDisconnectedPeriod": 8, "wipeDisconnectedPeriod": 20}}}"#,
    ])
    func stringsAndNumbersAndBooleansAreTheSame(_ json: String) throws {
        let s = try decode(json)
        #expect(s.problems.isEmpty)
        #expect(s.policy == Policy(offlineDaysBeforeLock: 8, offlineDaysBeforeWipe: 20))
        #expect(s.policyProblems.isEmpty)
    }

    @Test func blockWipeDisabledMeansNeverWhateverThePeriods() throws {
        let s = try decode(#"{"blockWipingPolicy": {"blockWipeEnabled": "false", "blockDisconnectedPeriod": 1, "wipeDisconnectedPeriod": 1}}"#)
        #expect(s.policy == .never)
        #expect(s.policyProblems.isEmpty)
    }

    @Test func noPolicySectionMeansNoPolicyChange() throws {
        let s = try decode(#"{"passwordPolicy": {"passwordPolicyMinLength": "10"}}"#)
        #expect(s.policy == nil)
        #expect(s.passcode?.minLength == 10)
    }

    @Test func theSameRulesAsALocalPolicy() throws {
        let s = try decode(#"{"blockWipingPolicy": {"blockWipeEnabled": true, "blockDisconnectedPeriod": 9, "wipeDisconnectedPeriod": 9}}"#)
        #expect(s.policyProblems.map(\.key) == ["blockWipingPolicy.wipeDisconnectedPeriod"])
        let negative = try decode(#"{"blockWipingPolicy": {"blockDisconnectedPeriod": "-1"}}"#)
        #expect(negative.policyProblems.map(\.key) == ["blockWipingPolicy.blockDisconnectedPeriod"])
    }

    @Test(arguments: [
        #"{"blockWipingPolicy": {"blockDisconnectedPeriod": "eight"}}"#,
        #"{"blockWipingPolicy": {"blockDisconnectedPeriod": 8.5}}"#,
        #"{"blockWipingPolicy": {"blockDisconnectedPeriod": [8]}}"#,
        #"{"blockWipingPolicy": {"blockWipeEnabled": "yes"}}"#,
        #"{"blockWipingPolicy": {"blockWipeEnabled": 1}}"#,
        #"{"blockWipingPolicy": "on"}"#,
        #"{"blockWipingPolicy": {"blockDisconnectedPeriod": 99999999999}}"#,
    ])
    func unusableValuesRejectThePolicyNeverBecomeZero(_ json: String) throws {
        let s = try decode(json)
        #expect(!s.policyProblems.isEmpty)
    }

    @Test(arguments: ["", "{", "[1, 2]", "\"text\"", "null", "{\"a\": tru}"])
    func aBodyThatIsNotAJSONObjectIsMalformed(_ body: String) {
        #expect(throws: ServerSettings.DecodingFailure.self) { try ServerSettings.decode(Data(body.utf8)) }
    }

    @Test func passcodeAndSharedDeviceAreRead() throws {
        let s = try decode(
            """
            {"passwordPolicy": {"passwordPolicyMinLength": "8", "passwordPolicyRetryLimit": 10, "passwordPolicyLockTimeout": "300",
             "passwordPolicyDigitRequired": "true", "passwordPolicyDefaultPasswordAllowed": false, "unknownField": 3},
             "sharedDevice": {"sharedDeviceEnabled": "true", "maxUsers": "20"},
             "registration": {"locked": "false"}}
            """)
        #expect(s.passcode?.minLength == 8)
        #expect(s.passcode?.retryLimit == 10)
        #expect(s.passcode?.lockTimeout == 300)
        #expect(s.passcode?.requiresDigit == true)
        #expect(s.passcode?.defaultPasswordAllowed == false)
        #expect(s.sharedDevice?.enabled == true)
        #expect(s.sharedDevice?.maxUsers == 20)
        #expect(s.registrationLocked == false)
        #expect(s.problems.isEmpty)
    }
}

@Suite struct CheckInResponseTests {
    let doc = Data(#"{"blockWipingPolicy": {"blockWipeEnabled": true, "blockDisconnectedPeriod": 7, "wipeDisconnectedPeriod": 30}}"#.utf8)

    @Test func a2xxWithJSONIsAContact() {
        let outcome = CheckInResponse.classify(status: 200, messageCode: nil, contentType: "application/json; charset=utf-8", body: doc)
        guard case .contact(let s) = outcome else {
            Issue.record("not a contact: \(outcome)")
            return
        }
        #expect(s.policy == Policy(offlineDaysBeforeLock: 7, offlineDaysBeforeWipe: 30))
    }

    @Test func serverCommands() {
        #expect(CheckInResponse.classify(status: 403, messageCode: "TRAFFIC_REG_LOCKED", contentType: nil, body: nil) == .lock)
        #expect(CheckInResponse.classify(status: 403, messageCode: "traffic_reg_wiped", contentType: nil, body: nil) == .wipe)
        for code in ["TRAFFIC_BLOCKED", "REG_BLOCKED", "TRAFFIC_REG_BLOCKED"] {
            #expect(CheckInResponse.classify(status: 403, messageCode: code, contentType: nil, body: nil) == .blocked(code))
        }
    }

    @Test(arguments: [
        (500, nil as String?, "application/json" as String?, true),
        (403, nil, "application/json", true),
        (403, "SOMETHING_ELSE", "application/json", true),
        (401, nil, "application/json", true),
        (302, nil, "application/json", true),
        (200, nil, "text/html", true),
        (200, nil, nil, true),
        (200, nil, "application/json", false),  // larger than the limit
        (404, "TRAFFIC_REG_LOCKED", "application/json", true),  // a code counts only with 403
    ])
    func everythingElseIsNotAContact(status: Int, code: String?, type: String?, hasBody: Bool) {
        let outcome = CheckInResponse.classify(status: status, messageCode: code, contentType: type, body: hasBody ? doc : nil)
        guard case .failure = outcome else {
            Issue.record("\(status) \(code ?? "-") \(type ?? "-") gave \(outcome)")
            return
        }
    }

    @Test func jsonContentTypes() {
        #expect(CheckInResponse.isJSON("application/json"))
        #expect(CheckInResponse.isJSON("Application/JSON;charset=UTF-8"))
        #expect(CheckInResponse.isJSON("application/vnd.sap+json"))
        #expect(!CheckInResponse.isJSON("text/json-ish"))
        #expect(!CheckInResponse.isJSON("text/plain"))
    }
}

@Suite struct ServerURLTests {
    @Test(arguments: [
        "https://mdm.example.com", "https://mdm.example.com:8443/base/", "http://127.0.0.1:8470",
        "http://localhost:1", "http://[::1]:8470", "http://127.1.2.3", "HTTPS://EXAMPLE.COM",
    ])
    func allowed(_ url: String) {
        #expect(ServerURL.problem(url) == nil)
    }

    @Test(arguments: [
        "http://mdm.example.com", "http://10.0.0.1", "http://127.0.0.1.example.com", "http://localhost.evil",
        "ftp://127.0.0.1", "mdm.example.com", "https://", "https://user:pw@mdm.example.com",
        "https://mdm.example.com/?x=1", "http://0.0.0.0:80", "http://[::2]",
    ])
    func refused(_ url: String) {
        #expect(ServerURL.problem(url) != nil)
    }

    @Test func settingsPath() {
        #expect(
            ServerURL.settings(base: "https://h/base/", user: "alice")
                == "https://h/base/mobileservices/settingsExchange/v1/registrations/alice")
        #expect(
            ServerURL.settings(base: "http://127.0.0.1:1", user: "a b/c")
                == "http://127.0.0.1:1/mobileservices/settingsExchange/v1/registrations/a%20b%2Fc")
    }
}

@Suite struct CheckInBackoffTests {
    let backoff = CheckInBackoff(capSeconds: 900)

    @Test func successWaitsTheInterval() {
        #expect(backoff.delay(afterFailures: 0, random: 0.3) == 900)
    }

    @Test func doublesFromThirtySecondsWithJitterInTheUpperHalf() {
        #expect(backoff.delay(afterFailures: 1, random: 0) == 15)
        #expect(backoff.delay(afterFailures: 1, random: 0.999_999) > 29.99)
        #expect(backoff.delay(afterFailures: 2, random: 0) == 30)
        #expect(backoff.delay(afterFailures: 3, random: 1) == 120)
        #expect(backoff.delay(afterFailures: 5, random: 0.5) == 480 * 0.75)
    }

    @Test func cappedAtTheIntervalForever() {
        for n in [6, 7, 20, 64, 1000, Int.max] {
            let low = backoff.delay(afterFailures: n, random: 0)
            let high = backoff.delay(afterFailures: n, random: 1)
            #expect(low == 450 && high == 900)
        }
        let tiny = CheckInBackoff(capSeconds: 1)
        #expect(tiny.delay(afterFailures: 3, random: 0) == 1)  // never less than a second
    }
}

/// `offlineLease` (lockwipe's own field, not SAP's).
@Suite struct ServerSettingsOfflineLeaseTests {
    @Test(arguments: [
        (#"{"offlineLease": {"until": "2026-12-16T08:00:00Z"}}"#, Int64(1_797_408_000) as Int64?, [String]()),
        (#"{"offlineLease": {"until": "2026-12-16T09:00:00+01:00"}}"#, 1_797_408_000, []),
        (#"{"mobileservices": {"settingsExchange": {"offlineLease": {"until": "2026-12-16T08:00:00Z"}}}}"#, 1_797_408_000, []),
        (#"{"offlineLease": {"until": "next tuesday"}}"#, nil, ["offlineLease.until"]),
        (#"{"offlineLease": {"until": 1797408000}}"#, nil, ["offlineLease.until"]),
        (#"{"offlineLease": {"until": "2026-12-16"}}"#, nil, ["offlineLease.until"]),
        (#"{"offlineLease": "soon"}"#, nil, ["offlineLease"]),
        (#"{"offlineLease": {}}"#, nil, []),
        (#"{}"#, nil, []),
    ])
    func decoded(_ json: String, until: Int64?, problems: [String]) throws {
        let s = try ServerSettings.decode(Data(json.utf8))
        #expect(s.offlineLeaseUntil == until)
        #expect(s.problems.map(\.key) == problems)
        #expect(s.policyProblems.isEmpty, "a bad lease never makes the policy unusable")
    }

    @Test func anSAPAnswerNeverGrantsALease() throws {
        let s = try ServerSettings.decode(Data(#"{"offlineLease": {"until": "nonsense"}}"#.utf8))
        let sap = ServerProtocol.sapMobileServices.interpret(try ServerSettings.decode(Data(#"{"offlineLease": {"until": "2026-12-16T08:00:00Z"}}"#.utf8)))
        #expect(sap.offlineLeaseUntil == nil)
        #expect(ServerProtocol.sapMobileServices.interpret(s).problems.isEmpty)
        #expect(ServerProtocol.lockwipe.interpret(s).problems.map(\.key) == ["offlineLease.until"])
    }
}
