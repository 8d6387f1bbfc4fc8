import Foundation
import LockwipeCore
import LockwipeProtocol
import Testing

@Suite struct VarlinkMessageTests {
    @Test func callsUseSnakeCaseAndDecodeBack() throws {
        let data = try VarlinkMessage.encodeCall(method: ManagerMethods.register.name, parameters: RegisterRequest(user: "alice", directories: ["/srv/a"]))
        let text = String(decoding: data, as: UTF8.self)
        #expect(text == #"{"method":"io.lockwipe.Manager.Register","parameters":{"directories":["/srv/a"],"user":"alice"}}"#)
        #expect(try VarlinkMessage.decodeHeader(data).method == "io.lockwipe.Manager.Register")
        #expect(try VarlinkMessage.decodeParameters(RegisterRequest.self, from: data) == RegisterRequest(user: "alice", directories: ["/srv/a"]))
    }

    @Test func missingParametersDecodeAsEmpty() throws {
        let data = Data(#"{"method":"io.lockwipe.Manager.GetStatus"}"#.utf8)
        #expect(try VarlinkMessage.decodeParameters(UserFilter.self, from: data) == UserFilter(user: nil))
    }

    @Test func wrongParameterTypesAreDecodingErrors() {
        let data = Data(#"{"method":"io.lockwipe.Manager.Register","parameters":{"user":5,"directories":"x"}}"#.utf8)
        #expect(throws: DecodingError.self) { try VarlinkMessage.decodeParameters(RegisterRequest.self, from: data) }
    }

    @Test func errorRepliesAreThrownWithTheirParameters() throws {
        let reply = VarlinkMessage.encodeError(.notPermitted("only root"))
        #expect(throws: VarlinkError.notPermitted("only root")) { try VarlinkMessage.decodeReply(StatusReport.self, from: reply) }
    }

    @Test func statusReportKeepsTheStableContractKeys() throws {
        let report = StatusReport(
            version: "1", server: ServerInfo(configured: false, url: nil),
            policy: PolicyInfo(policy: Policy(offlineDaysBeforeLock: 7, offlineDaysBeforeWipe: 30), source: "local"),
            registrations: [
                RegistrationInfo(
                    user: "alice", uid: 1001, state: .wipePending, protection: .permissions,
                    directories: ["/srv/a"], blocked: false, lastContact: "2026-11-20T08:00:00Z",
                    offlineSeconds: 172_800, nextAction: nil)
            ],
            warnings: [])
        let json = try JSONSerialization.jsonObject(with: try VarlinkMessage.encodeReply(report)) as! [String: Any]
        let p = json["parameters"] as! [String: Any]
        #expect((p["server"] as! [String: Any])["url"] is NSNull)
        #expect((p["policy"] as! [String: Any])["offline_days_before_lock"] as? Int == 7)
        let r = (p["registrations"] as! [[String: Any]])[0]
        #expect(Set(r.keys).isSuperset(of: ["user", "uid", "state", "protection", "directories", "blocked", "last_contact", "offline_seconds", "next_action"]))
        #expect(r["state"] as? String == "wipe-pending")
        #expect(r["next_action"] is NSNull)
        #expect(try VarlinkMessage.decodeReply(StatusReport.self, from: try VarlinkMessage.encodeReply(report)) == report)
    }

    @Test func aPendingLockOnLogoutReachesTheWire() throws {
        var info = RegistrationInfo(
            user: "carol", uid: 1003, state: .active, protection: .permissions, directories: ["/srv/c"], blocked: false,
            lastContact: "2026-11-20T08:00:00Z", offlineSeconds: 0, nextAction: nil)
        info.logoutLockAt = "2026-11-20T08:05:00Z"
        let report = StatusReport(
            version: "1", server: ServerInfo(configured: false, url: nil),
            policy: PolicyInfo(policy: Policy(offlineDaysBeforeLock: 7, offlineDaysBeforeWipe: 30), source: "local"),
            registrations: [info], warnings: [])
        let data = try VarlinkMessage.encodeReply(report)
        #expect(String(decoding: data, as: UTF8.self).contains("\"logout_lock_at\":\"2026-11-20T08:05:00Z\""))
        #expect(try VarlinkMessage.decodeReply(StatusReport.self, from: data).registrations[0].logoutLockAt == "2026-11-20T08:05:00Z")
    }

    @Test func interfaceDescriptionNamesEveryMethod() {
        for method in ManagerMethods.all {
            #expect(InterfaceDescription.manager.contains("method \(method.member)("))
        }
    }

    @Test func theStartUpPassIsADeclaredErrorAndAnOptionalStatusField() throws {
        let error = VarlinkError.startingUp("wait")
        #expect(error.name == "io.lockwipe.Manager.StartingUp" && error.message == "wait")
        #expect(InterfaceDescription.manager.contains("error StartingUp (reason: string)"))
        let stopping = VarlinkError.stopping("again")
        #expect(stopping.name == "io.lockwipe.Manager.Stopping" && stopping.message == "again")
        #expect(InterfaceDescription.manager.contains("error Stopping (reason: string)"))
        #expect(InterfaceDescription.manager.contains("method GetStatus(user: ?string, login_gate: ?bool)"))
        // The login gate's request, and a plain status request from an older client.
        let gate = try VarlinkMessage.encodeCall(method: ManagerMethods.getStatus.name, parameters: StatusRequest(loginGate: true))
        #expect(String(decoding: gate, as: UTF8.self).contains("\"login_gate\":true"))
        #expect(try VarlinkMessage.decodeParameters(StatusRequest.self, from: gate) == StatusRequest(loginGate: true))
        let plain = try VarlinkMessage.encodeCall(method: ManagerMethods.getStatus.name, parameters: UserFilter(user: "alice"))
        #expect(try VarlinkMessage.decodeParameters(StatusRequest.self, from: plain) == StatusRequest(user: "alice"))
    }

    @Test func interfaceDescriptionNamesEveryCaveatKind() throws {
        let line = try #require(InterfaceDescription.manager.split(separator: "\n").first { $0.contains("# kind: copy-on-write") })
        for kind in WipeCaveat.Kind.allCases { #expect(line.contains(" \(kind.rawValue)")) }
    }
}
