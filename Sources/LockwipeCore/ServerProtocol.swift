#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The wire protocol spoken with the policy server (`[server] protocol`). Everything that
/// differs between the two is here, without I/O: the requests (`ServerRequests`), how a
/// settings answer is read (`interpret`), and the SAP application connection's answer
/// (`SAPConnectionAnswer`). The HTTP client only sends what these build.
public enum ServerProtocol: String, Sendable, CaseIterable, Codable {
    /// lockwipe's own protocol: `GET {url}/mobileservices/settingsExchange/v1/registrations/{user}`.
    case lockwipe
    /// SAP Mobile Services: application connections and the Storage service's runtime
    /// settings (docs/server-protocol.md).
    case sapMobileServices = "sap-mobile-services"

    /// A settings answer as this protocol means it.
    ///
    /// `sap-mobile-services`: `passwordPolicyLockTimeout` (SAP: ask for the passcode again
    /// after N seconds in the background) is not lockwipe's lock-on-logout, so it is moved
    /// out of the passcode policy into `sapLockTimeout` (shown, never enforced) and only
    /// `[passcode] lock_timeout` applies. An answer without `blockWipingPolicy` keeps the
    /// policy in force, as with `lockwipe` (`ServerPolicyAbsence` says why).
    /// `offlineLease` is lockwipe's own and is dropped from an SAP answer.
    /// `lockwipe`: the answer as it is.
    public func interpret(_ settings: ServerSettings) -> ServerSettings {
        switch self {
        case .lockwipe:
            return settings
        case .sapMobileServices:
            var s = settings
            s.sapLockTimeout = s.passcode?.lockTimeout
            s.passcode?.lockTimeout = nil
            // `offlineLease` is lockwipe's own field, not SAP's: never read from an SAP answer.
            s.offlineLeaseUntil = nil
            s.problems.removeAll { $0.key.hasPrefix("offlineLease") }
            return s
        }
    }
}

/// What identifies this machine to SAP Mobile Services (`X-SMP-APPID`, `X-SMP-DEVICEID`),
/// and the application version it sends (`X-APP-VERSION`, `[server] application_version`).
public struct SAPIdentity: Sendable, Equatable {
    public var applicationID: String
    public var deviceID: String
    /// Sent as `X-APP-VERSION` on every request when set: with Application Versioning on,
    /// SAP Mobile Services answers 403 to a request without an active version.
    public var applicationVersion: String?
    public init(applicationID: String, deviceID: String, applicationVersion: String? = nil) {
        self.applicationID = applicationID
        self.deviceID = deviceID
        self.applicationVersion = applicationVersion
    }
}

/// One HTTP request to the policy server, built without I/O. `Authorization` is never
/// in `headers`: the client adds the registration's credentials in one place.
public struct ServerRequest: Sendable, Equatable {
    public enum Method: String, Sendable { case get = "GET", post = "POST", put = "PUT", delete = "DELETE" }
    public struct Header: Sendable, Equatable {
        public var name: String
        public var value: String
        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }
    public var method: Method
    public var url: String
    public var headers: [Header]
    public var body: [UInt8]?

    public init(method: Method, url: String, headers: [Header], body: [UInt8]? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }
}

/// Builds every request of one protocol to one server.
public struct ServerRequests: Sendable, Equatable {
    public var base: String
    public var serverProtocol: ServerProtocol
    /// Required with `sap-mobile-services` (the configuration loader sees to it).
    public var sap: SAPIdentity?
    /// lockwiped's version, for `User-Agent`.
    public var version: String

    public init(base: String, serverProtocol: ServerProtocol, sap: SAPIdentity?, version: String) {
        self.base = base
        self.serverProtocol = serverProtocol
        self.sap = sap
        self.version = version
    }

    private var trimmedBase: String {
        var b = base
        while b.hasSuffix("/") { b.removeLast() }
        return b
    }

    /// The headers every request carries: `Accept`, `User-Agent` and, with SAP, the
    /// `X-SMP-*` identity (`X-SMP-APPCID` once the connection is known) and `X-APP-VERSION`
    /// when `[server] application_version` is set.
    public func commonHeaders(connection: String?) -> [ServerRequest.Header] {
        var h = [ServerRequest.Header("Accept", "application/json"), ServerRequest.Header("User-Agent", "lockwiped/\(version)")]
        if serverProtocol == .sapMobileServices, let sap {
            h.append(ServerRequest.Header("X-SMP-APPID", sap.applicationID))
            h.append(ServerRequest.Header("X-SMP-DEVICEID", sap.deviceID))
            if let connection { h.append(ServerRequest.Header("X-SMP-APPCID", connection)) }
            if let version = sap.applicationVersion { h.append(ServerRequest.Header("X-APP-VERSION", version)) }
        }
        return h
    }

    /// The check-in of `user`'s registration.
    public func checkIn(user: String, connection: String?) -> ServerRequest {
        switch serverProtocol {
        case .lockwipe:
            return ServerRequest(method: .get, url: ServerURL.settings(base: base, user: user), headers: commonHeaders(connection: nil))
        case .sapMobileServices:
            // The user is the one the credentials authenticate ("currentuser").
            let app = ServerURL.percentEncoded(sap?.applicationID ?? "")
            let url =
                "\(trimmedBase)/mobileservices/application/\(app)/Storage/v1/runtime/application/\(app)"
                + "/currentuser/mobileservices/settingsExchange?overwrite=true"
            return ServerRequest(method: .get, url: url, headers: commonHeaders(connection: connection))
        }
    }

    /// `PUT {url}/lockwipe/v1/registrations/{user}/outbox/{name}`: a sealed outbox
    /// uploaded (docs/server-protocol.md, "Outbox upload"); nil with SAP Mobile Services,
    /// which has no such endpoint (the outbox is kept on the machine).
    public func uploadOutbox(user: String, name: String, body: [UInt8]) -> ServerRequest? {
        guard serverProtocol == .lockwipe else { return nil }
        var headers = commonHeaders(connection: nil)
        headers.append(ServerRequest.Header("Content-Type", "application/octet-stream"))
        let url = "\(trimmedBase)/lockwipe/v1/registrations/\(ServerURL.percentEncoded(user))/outbox/\(ServerURL.percentEncoded(name))"
        return ServerRequest(method: .put, url: url, headers: headers, body: body)
    }

    /// `POST .../Connections`: creates this registration's application connection.
    public func createConnection(deviceModel: String) -> ServerRequest {
        let app = ServerURL.percentEncoded(sap?.applicationID ?? "")
        var headers = commonHeaders(connection: nil)
        headers.append(ServerRequest.Header("Content-Type", "application/json"))
        let body = Self.jsonObject([("DeviceType", "Linux"), ("DeviceModel", deviceModel)])
        return ServerRequest(
            method: .post, url: "\(trimmedBase)/odata/applications/latest/\(app)/Connections", headers: headers, body: Array(body.utf8))
    }

    /// `DELETE .../Connections('{id}')`: the connection is given up (unregister, and the
    /// full reset after a wipe).
    public func deleteConnection(_ id: String) -> ServerRequest {
        ServerRequest(method: .delete, url: connectionURL(id), headers: commonHeaders(connection: id))
    }

    /// `GET .../Connections('{id}')` (SMP 3.0 "Get Application Settings"): whether the
    /// server still knows the connection (`StaleConnection`).
    public func probeConnection(_ id: String) -> ServerRequest {
        ServerRequest(method: .get, url: connectionURL(id), headers: commonHeaders(connection: id))
    }

    /// `.../Connections('{id}')`: the id as an OData string literal (a quote is doubled),
    /// then percent-encoded for the path.
    func connectionURL(_ id: String) -> String {
        let app = ServerURL.percentEncoded(sap?.applicationID ?? "")
        let key = ServerURL.percentEncoded(id.replacing("'", with: "''"))
        return "\(trimmedBase)/odata/applications/latest/\(app)/Connections('\(key)')"
    }

    /// A flat JSON object of strings, in the given order.
    static func jsonObject(_ pairs: [(String, String)]) -> String {
        "{" + pairs.map { "\(jsonString($0.0)): \(jsonString($0.1))" }.joined(separator: ", ") + "}"
    }

    static func jsonString(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }
}

/// What the server answered to `POST .../Connections`.
public enum SAPConnectionAnswer: Sendable, Equatable {
    /// Created, with its id.
    case created(String)
    /// A success without a usable id: the registration stands, the connection is tried
    /// again at the next check-in (`why` says what was missing).
    case createdWithoutID(String)
    /// Not created: a 403 order or block (as on a check-in), or a failure.
    case refused(CheckInOutcome)

    public var succeeded: Bool {
        switch self {
        case .created, .createdWithoutID: return true
        case .refused: return false
        }
    }

    /// Longest connection id accepted (it is sent back as a header).
    public static let maxIDLength = 256

    /// Classifies the answer to the Connections POST. The id is `d.ApplicationConnectionId`
    /// (OData v2 JSON), else the `X-SMP-APPCID` response header, else the key of the
    /// `Location: .../Connections('{id}')` header (SMP 3.0's documented 201 answer), else
    /// the `X-SMP-APPCID` cookie; an id that is not visible ASCII (or too long) is not used.
    public static func classify(
        status: Int, messageCode: String?, contentType: String?, body: Data?, appcidHeader: String?, setCookies: [String],
        location: String? = nil
    ) -> SAPConnectionAnswer {
        guard (200..<300).contains(status) else {
            switch CheckInResponse.classify(status: status, messageCode: messageCode, contentType: contentType, body: body) {
            case .failure(let why): return .refused(.failure("application connection: \(why)"))
            case let other: return .refused(other)
            }
        }
        var candidates: [String] = []
        if let body, let id = bodyID(body) { candidates.append(id) }
        if let appcidHeader { candidates.append(appcidHeader.trimmingBlanks()) }
        if let location, let id = locationID(location) { candidates.append(id) }
        if let c = cookieID(setCookies) { candidates.append(c) }
        if let id = candidates.first(where: isUsable) { return .created(id) }
        if candidates.isEmpty {
            return .createdWithoutID(
                "HTTP \(status) without a connection id (no d.ApplicationConnectionId, X-SMP-APPCID header, Location .../Connections('ID') or cookie)")
        }
        return .createdWithoutID("HTTP \(status) with a connection id that is not visible ASCII of at most \(maxIDLength) characters")
    }

    static func isUsable(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= maxIDLength && id.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value < 0x7F }
    }

    /// `d.ApplicationConnectionId`, or a top-level `ApplicationConnectionId` (OData v4 style).
    static func bodyID(_ body: Data) -> String? {
        guard case .object(let root)? = try? JSONDecoder().decode(JSONValue.self, from: body) else { return nil }
        if case .object(let d)? = root["d"], case .string(let id)? = d["ApplicationConnectionId"] { return id }
        if case .string(let id)? = root["ApplicationConnectionId"] { return id }
        return nil
    }

    /// The key of a `Location` header ending in `Connections('{id}')` (an absolute or
    /// relative URL; SMP's own example reads `http:/smpserver:8080/applications/Connections('…')`),
    /// percent-decoded, a doubled quote read as one; nil for any other `Location`.
    static func locationID(_ location: String) -> String? {
        let trimmed = location.trimmingBlanks()
        let path = trimmed.split(separator: "?", maxSplits: 1).first.map(String.init) ?? trimmed
        guard path.hasSuffix("')"), let open = path.ranges(of: "Connections('").last else { return nil }
        let raw = String(path[open.upperBound..<path.index(path.endIndex, offsetBy: -2)])
        guard let decoded = percentDecoded(raw) else { return nil }
        guard !decoded.replacing("''", with: "").contains("'") else { return nil }
        return decoded.replacing("''", with: "'")
    }

    /// `text` with `%XX` escapes decoded; nil when an escape is broken or the bytes are not UTF-8.
    static func percentDecoded(_ text: String) -> String? {
        var bytes: [UInt8] = []
        var utf8 = text.utf8.makeIterator()
        while let b = utf8.next() {
            guard b == UInt8(ascii: "%") else {
                bytes.append(b)
                continue
            }
            guard let h = utf8.next(), let l = utf8.next(), let byte = UInt8(String(decoding: [h, l], as: UTF8.self), radix: 16) else { return nil }
            bytes.append(byte)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    /// The value of an `X-SMP-APPCID` cookie among `Set-Cookie` headers.
    static func cookieID(_ setCookies: [String]) -> String? {
        for header in setCookies {
            guard let pair = header.split(separator: ";", maxSplits: 1).first else { continue }
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, parts[0].trimmingBlanks().lowercased() == "x-smp-appcid" else { continue }
            return parts[1].trimmingBlanks()
        }
        return nil
    }
}
