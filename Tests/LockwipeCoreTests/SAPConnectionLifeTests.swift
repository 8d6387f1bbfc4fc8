import Foundation
import LockwipeCore
import Testing

/// The pure decisions of issue 29's SAP connection life: the staleness probe, the full
/// reset after a wipe, and settings without blockWipingPolicy.
@Suite struct SAPConnectionLifeTests {
    /// Which settings answers make lockwiped ask whether its stored connection still exists.
    @Test func staleSuspicion() {
        let contact = CheckInOutcome.contact(ServerSettings())
        let table: [(Int?, CheckInOutcome, Bool)] = [
            (404, .failure("HTTP 404"), true),
            (403, .failure("HTTP 403 without x-message-code"), true),
            (403, .failure("HTTP 403 with unknown x-message-code 'X'"), true),
            (403, .lock, false),
            (403, .wipe, false),
            (403, .blocked("TRAFFIC_BLOCKED"), false),
            (401, .failure("HTTP 401"), false),
            (500, .failure("HTTP 500"), false),
            (200, contact, false),
            (nil, .failure("timed out after 3 s"), false),
        ]
        for (status, outcome, expected) in table {
            #expect(StaleConnection.suspect(status: status, outcome: outcome) == expected, "\(String(describing: status)) \(outcome)")
        }
    }

    @Test func probeAnswers() {
        let table: [(Int, StaleConnection.Probe)] = [
            (200, .present), (204, .present), (404, .gone), (403, .unknown("HTTP 403")), (401, .unknown("HTTP 401")),
            (500, .unknown("HTTP 500")), (410, .unknown("HTTP 410")),
        ]
        for (status, expected) in table { #expect(StaleConnection.probe(status: status) == expected, "\(status)") }
    }

    /// Only the wipes the server stands behind, and only with SAP, give the enrolment up.
    @Test func resetApplies() {
        let triggers: [Trigger] = [.server, .offline, .admin, .user, .resume, .logout, .retryLimit]
        for t in triggers {
            #expect(ServerReset.applies(protocol: .sapMobileServices, trigger: t) == (t == .server || t == .offline), "\(t)")
            #expect(!ServerReset.applies(protocol: .lockwipe, trigger: t), "\(t)")
        }
    }

    @Test func resetWords() {
        #expect(
            ServerReset.enrolCommands(user: "alice", oauth: false)
                == "lockwipectl unregister --user alice, then lockwipectl register --user alice --dir DIR --token-file PATH")
        #expect(ServerReset.enrolCommands(user: "alice", oauth: true).hasSuffix("--dir DIR --refresh-token-file PATH"))
        #expect(ServerReset.pendingResult(connection: nil) == "no connection to delete")
        #expect(ServerReset.pendingResult(connection: "c") == "pending")
        #expect(ServerReset.result(deleteFailure: nil) == "deleted")
        #expect(ServerReset.result(deleteFailure: "HTTP 500") == "not deleted: HTTP 500")
    }

    /// Settings without blockWipingPolicy: said (status) while missing, journalled once when it goes missing.
    @Test func policyAbsence() throws {
        func settings(_ json: String) throws -> ServerSettings { try ServerSettings.decode(Data(json.utf8)) }
        let none = try settings("{}")
        let with = try settings(#"{"blockWipingPolicy": {"blockWipeEnabled": "true", "blockDisconnectedPeriod": "3"}}"#)
        let off = try settings(#"{"blockWipingPolicy": {"blockWipeEnabled": false}}"#)
        let broken = try settings(#"{"blockWipingPolicy": 3}"#)
        let absent: [(ServerProtocol, ServerSettings?, Bool)] = [
            (.sapMobileServices, none, true), (.sapMobileServices, with, false), (.sapMobileServices, off, false),
            (.sapMobileServices, broken, false), (.sapMobileServices, nil, false), (.lockwipe, none, false),
        ]
        for (proto, s, expected) in absent {
            #expect(ServerPolicyAbsence.isAbsent(protocol: proto, s) == expected, "\(proto) \(String(describing: s))")
        }
        let journal: [(ServerSettings?, ServerSettings, Bool)] = [
            (nil, none, true), (with, none, true), (none, none, false), (none, with, false), (off, none, true), (broken, none, true),
        ]
        for (before, new, expected) in journal {
            #expect(ServerPolicyAbsence.shouldJournal(protocol: .sapMobileServices, before: before, new: new) == expected)
            #expect(!ServerPolicyAbsence.shouldJournal(protocol: .lockwipe, before: before, new: new))
        }
    }
}
