import Foundation
import LockwipeCore
import Testing

@Suite struct ServerProtocolTests {
    let sap = ServerRequests(
        base: "https://tenant.example.com/prefix/", serverProtocol: .sapMobileServices,
        sap: SAPIdentity(applicationID: "com.example.fieldapp", deviceID: "00a6c677e7b941f7815d67575a4d941a"), version: "1.2.3")
    let own = ServerRequests(base: "https://mdm.example.com", serverProtocol: .lockwipe, sap: nil, version: "1.2.3")

    func pairs(_ r: ServerRequest) -> [String] { r.headers.map { "\($0.name): \($0.value)" } }

    /// Each request: method, exact URL (path and query) and exact headers, in order.
    @Test func requestsAreBuiltExactly() {
        let table: [(ServerRequest, String, String, [String])] = [
            (
                own.checkIn(user: "alice", connection: "ignored"), "GET",
                "https://mdm.example.com/mobileservices/settingsExchange/v1/registrations/alice",
                ["Accept: application/json", "User-Agent: lockwiped/1.2.3"]
            ),
            (
                sap.checkIn(user: "alice", connection: nil), "GET",
                "https://tenant.example.com/prefix/mobileservices/application/com.example.fieldapp/Storage/v1/runtime/application/com.example.fieldapp/currentuser/mobileservices/settingsExchange?overwrite=true",
                [
                    "Accept: application/json", "User-Agent: lockwiped/1.2.3", "X-SMP-APPID: com.example.fieldapp",
                    "X-SMP-DEVICEID: 00a6c677e7b941f7815d67575a4d941a",
                ]
            ),
            (
                sap.checkIn(user: "alice", connection: "c-1"), "GET",
                "https://tenant.example.com/prefix/mobileservices/application/com.example.fieldapp/Storage/v1/runtime/application/com.example.fieldapp/currentuser/mobileservices/settingsExchange?overwrite=true",
                [
                    "Accept: application/json", "User-Agent: lockwiped/1.2.3", "X-SMP-APPID: com.example.fieldapp",
                    "X-SMP-DEVICEID: 00a6c677e7b941f7815d67575a4d941a", "X-SMP-APPCID: c-1",
                ]
            ),
            (
                sap.createConnection(deviceModel: "Think\"Pad"), "POST",
                "https://tenant.example.com/prefix/odata/applications/latest/com.example.fieldapp/Connections",
                [
                    "Accept: application/json", "User-Agent: lockwiped/1.2.3", "X-SMP-APPID: com.example.fieldapp",
                    "X-SMP-DEVICEID: 00a6c677e7b941f7815d67575a4d941a", "Content-Type: application/json",
                ]
            ),
            (
                sap.deleteConnection("it's"), "DELETE",
                "https://tenant.example.com/prefix/odata/applications/latest/com.example.fieldapp/Connections('it%27%27s')",
                [
                    "Accept: application/json", "User-Agent: lockwiped/1.2.3", "X-SMP-APPID: com.example.fieldapp",
                    "X-SMP-DEVICEID: 00a6c677e7b941f7815d67575a4d941a", "X-SMP-APPCID: it's",
                ]
            ),
            (
                sap.probeConnection("c-1"), "GET",
                "https://tenant.example.com/prefix/odata/applications/latest/com.example.fieldapp/Connections('c-1')",
                [
                    "Accept: application/json", "User-Agent: lockwiped/1.2.3", "X-SMP-APPID: com.example.fieldapp",
                    "X-SMP-DEVICEID: 00a6c677e7b941f7815d67575a4d941a", "X-SMP-APPCID: c-1",
                ]
            ),
        ]
        for (request, method, url, headers) in table {
            #expect(request.method.rawValue == method)
            #expect(request.url == url)
            #expect(pairs(request) == headers)
            #expect(!request.headers.contains { $0.name.lowercased() == "authorization" })
        }
        let body = sap.createConnection(deviceModel: "Think\"Pad").body.map { String(decoding: $0, as: UTF8.self) }
        #expect(body == #"{"DeviceType": "Linux", "DeviceModel": "Think\"Pad"}"#)
    }

    /// `[server] application_version`: `X-APP-VERSION` on every SAP request (settings,
    /// Connections POST and DELETE); never with the lockwipe protocol, never without a version.
    @Test func theApplicationVersionIsOnEverySAPRequest() {
        var versioned = sap
        versioned.sap?.applicationVersion = "2.1.0"
        for request in [
            versioned.checkIn(user: "alice", connection: nil), versioned.checkIn(user: "alice", connection: "c-1"),
            versioned.createConnection(deviceModel: "m"), versioned.deleteConnection("c-1"),
        ] {
            #expect(request.headers.filter { $0.name == "X-APP-VERSION" }.map(\.value) == ["2.1.0"], "\(request.method) \(request.url)")
        }
        for request in [sap.checkIn(user: "alice", connection: "c-1"), sap.createConnection(deviceModel: "m"), own.checkIn(user: "alice", connection: nil)] {
            #expect(!request.headers.contains { $0.name == "X-APP-VERSION" })
        }
        let config = ServerConfiguration(
            url: "https://t.example.com", serverProtocol: .sapMobileServices, applicationID: "app", deviceID: "dev")
        var withVersion = config
        withVersion.applicationVersion = "3"
        #expect(config.sapIdentity?.applicationVersion == nil)
        #expect(withVersion.sapIdentity?.applicationVersion == "3")
    }

    /// The Connections answer: the id from the body, else the header, else the Location, else the cookie.
    @Test func connectionIDsComeFromBodyThenHeaderThenLocationThenCookie() {
        let json = "application/json"
        let table: [(Int, String?, String?, [String], SAPConnectionAnswer)] = [
            (201, #"{"d": {"__metadata": {"uri": "x"}, "ApplicationConnectionId": "body-id"}}"#, "hdr", ["X-SMP-APPCID=cookie"], .created("body-id")),
            (201, #"{"d": {}}"#, "hdr-id", ["X-SMP-APPCID=cookie"], .created("hdr-id")),
            (201, nil, nil, ["JSESSIONID=1; Path=/", "X-SMP-APPCID=cookie-id; Path=/; Secure"], .created("cookie-id")),
            (200, #"{"ApplicationConnectionId": "v4-id"}"#, nil, [], .created("v4-id")),
            (201, "not json", " bad id ", [], .createdWithoutID("HTTP 201 with a connection id that is not visible ASCII of at most 256 characters")),
            (
                201, "{}", nil, [],
                .createdWithoutID(
                    "HTTP 201 without a connection id (no d.ApplicationConnectionId, X-SMP-APPCID header, Location .../Connections('ID') or cookie)")
            ),
        ]
        for (status, body, header, cookies, expected) in table {
            let got = SAPConnectionAnswer.classify(
                status: status, messageCode: nil, contentType: json, body: body.map { Data($0.utf8) }, appcidHeader: header, setCookies: cookies)
            #expect(got == expected, "\(status) \(body ?? "-")")
        }
        // SMP 3.0's documented 201: the id in Location (and a cookie); the header wins over it.
        let smp = "http:/smpserver:8080/applications/Connections('b6d50e93-bcaa-439d-9741-660a3cb56771')"
        let locationTable: [(String?, String, [String], SAPConnectionAnswer)] = [
            (nil, smp, ["X-SMP-APPCID=cookie-id"], .created("b6d50e93-bcaa-439d-9741-660a3cb56771")),
            ("hdr-id", smp, [], .created("hdr-id")),
            (nil, "/odata/applications/latest/app/Connections('it%27%27s')", [], .created("it's")),
            (nil, "https://h/odata/applications/latest/app/Connections('a')?x=1", [], .created("a")),
            (nil, "https://h/odata/applications/latest/app/Connections", ["X-SMP-APPCID=cookie-id"], .created("cookie-id")),
            (nil, "https://h/Connections('a'b')", ["X-SMP-APPCID=cookie-id"], .created("cookie-id")),
            (nil, "https://h/Connections('%zz')", ["X-SMP-APPCID=cookie-id"], .created("cookie-id")),
        ]
        for (header, location, cookies, expected) in locationTable {
            let got = SAPConnectionAnswer.classify(
                status: 201, messageCode: nil, contentType: "application/atom+xml", body: nil, appcidHeader: header, setCookies: cookies,
                location: location)
            #expect(got == expected, "\(location)")
        }
    }

    @Test func aRefusedConnectionActsAsACheckInAnswer() {
        let table: [(Int, String?, SAPConnectionAnswer)] = [
            (403, "TRAFFIC_REG_LOCKED", .refused(.lock)),
            (403, "TRAFFIC_REG_WIPED", .refused(.wipe)),
            (403, "TRAFFIC_REG_BLOCKED", .refused(.blocked("TRAFFIC_REG_BLOCKED"))),
            (403, nil, .refused(.rejected(status: 403, text: "no message code, empty body"))),
            (500, nil, .refused(.failure("application connection: HTTP 500"))),
        ]
        for (status, code, expected) in table {
            let got = SAPConnectionAnswer.classify(status: status, messageCode: code, contentType: nil, body: nil, appcidHeader: "x", setCookies: [])
            #expect(got == expected)
        }
    }

    /// Every accepted form of the settings answer gives the same settings.
    @Test(arguments: [
        #"{"__metadata": {"type": "x"}, "blockWipingPolicy": {"__metadata": {}, "blockWipeEnabled": "true", "blockDisconnectedPeriod": "3", "wipeDisconnectedPeriod": 9}}"#,
        #"{"mobileservices": {"__metadata": {}, "settingsExchange": {"blockWipingPolicy": {"blockWipeEnabled": true, "blockDisconnectedPeriod": 3, "wipeDisconnectedPeriod": "9"}}}}"#,
        #"{"__metadata": {}, "settingsExchange": {"__metadata": {}, "blockWipingPolicy": {"blockWipeEnabled": true, "blockDisconnectedPeriod": 3, "wipeDisconnectedPeriod": 9}}}"#,
    ])
    func answersAreUnwrapped(_ json: String) throws {
        let s = try ServerSettings.decode(Data(json.utf8))
        #expect(s.problems.isEmpty)
        #expect(ServerProtocol.sapMobileServices.interpret(s).policy == Policy(offlineDaysBeforeLock: 3, offlineDaysBeforeWipe: 9))
    }

    /// SAP: a policy switched off is "no offline lock/wipe"; no blockWipingPolicy keeps the
    /// policy in force (issue 29: it may be hidden by ReadRoles), as with lockwipe; the lock
    /// timeout is not lock-on-logout (kept aside in `sapLockTimeout`).
    @Test func sapSemantics() throws {
        let table: [(String, ServerProtocol, Policy?, Int?)] = [
            (#"{"passwordPolicy": {"passwordPolicyLockTimeout": "300"}}"#, .sapMobileServices, nil, nil),
            (#"{"passwordPolicy": {"passwordPolicyLockTimeout": "300"}}"#, .lockwipe, nil, 300),
            (#"{"blockWipingPolicy": {"blockWipeEnabled": false, "blockDisconnectedPeriod": 3}}"#, .sapMobileServices, .never, nil),
            (
                #"{"blockWipingPolicy": {"blockWipeEnabled": "true", "blockDisconnectedPeriod": "3"}}"#, .sapMobileServices,
                Policy(offlineDaysBeforeLock: 3, offlineDaysBeforeWipe: 0), nil
            ),
            ("{}", .sapMobileServices, nil, nil),
            ("{}", .lockwipe, nil, nil),
        ]
        for (json, proto, policy, timeout) in table {
            let s = proto.interpret(try ServerSettings.decode(Data(json.utf8)))
            #expect(s.policy == policy, "\(proto) \(json)")
            #expect(s.passcode?.lockTimeout == timeout, "\(proto) \(json)")
        }
        let sap = ServerProtocol.sapMobileServices.interpret(
            try ServerSettings.decode(Data(#"{"passwordPolicy": {"passwordPolicyLockTimeout": "300"}}"#.utf8)))
        #expect(sap.sapLockTimeout == 300 && sap.passcode?.lockTimeout == nil)
        #expect(ServerProtocol.lockwipe.interpret(try ServerSettings.decode(Data("{}".utf8))).sapLockTimeout == nil)
        // A blockWipingPolicy that is not an object stays a rejected policy, never "off".
        let bad = ServerProtocol.sapMobileServices.interpret(try ServerSettings.decode(Data(#"{"blockWipingPolicy": 3}"#.utf8)))
        #expect(bad.lockWipe == nil && bad.policyProblems.map(\.key) == ["blockWipingPolicy"])
    }
}
