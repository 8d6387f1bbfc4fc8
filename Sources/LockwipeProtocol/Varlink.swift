#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// JSON coding shared by both ends: snake_case keys on the wire, as varlink interfaces use.
/// Every type that crosses the wire spells its snake-case keys in its `CodingKeys`, so both
/// coders use the default key strategy: with any other, the decoder checks every decoded
/// type against a protocol (a dynamic cast that scans the binary's conformance records the
/// first time for each type), which cost `lockwipectl status` about 8% (docs/benchmarks.md).
public enum VarlinkCoding {
    public static func encoder() -> JSONEncoder {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return e
    }

    public static func decoder() -> JSONDecoder {
        JSONDecoder()
    }
}

/// The envelope of a varlink call: `{"method": ..., "parameters": {...}, "oneway": ..., "more": ...}`.
public struct VarlinkCallHeader: Codable, Sendable, Equatable {
    public var method: String
    public var oneway: Bool?
    public var more: Bool?
    public var upgrade: Bool?
}

struct VarlinkCall<Parameters: Encodable>: Encodable {
    var method: String
    var parameters: Parameters
}

struct VarlinkParametersEnvelope<Parameters: Decodable>: Decodable {
    var parameters: Parameters?
}

/// The envelope of a reply: `{"parameters": {...}}` or `{"error": "...", "parameters": {...}}`.
struct VarlinkReplyEnvelope<Parameters: Codable>: Codable {
    var parameters: Parameters?
    var error: String?
}

/// A reply's `error` alone: whether it is an error reply, without decoding its parameters.
struct VarlinkReplyHead: Decodable {
    var error: String?
}

/// A varlink error reply. `parameters` carries the details a client shows, e.g. the
/// offending parameter's name or the reason an action was refused.
public struct VarlinkError: Error, Codable, Sendable, Equatable, CustomStringConvertible {
    public var name: String
    public var parameters: [String: String]

    public init(_ name: String, _ parameters: [String: String] = [:]) {
        self.name = name
        self.parameters = parameters
    }

    public var description: String {
        let detail = parameters.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: "; ")
        return detail.isEmpty ? name : "\(name) (\(detail))"
    }

    /// The one human sentence a CLI prints: the reason/user/parameter when there is one.
    public var message: String {
        if let reason = parameters["reason"] { return reason }
        switch name {
        case Self.noSuchRegistrationName: return "no registration for user \(parameters["user"] ?? "?")"
        case Self.invalidParameterName: return "invalid parameter '\(parameters["parameter"] ?? "?")'"
        case Self.methodNotFoundName: return "the daemon does not know the method \(parameters["method"] ?? "?")"
        default: return description
        }
    }

    // Standard org.varlink.service errors.
    public static let invalidParameterName = "org.varlink.service.InvalidParameter"
    public static let methodNotFoundName = "org.varlink.service.MethodNotFound"
    public static let interfaceNotFoundName = "org.varlink.service.InterfaceNotFound"
    // io.lockwipe.Manager errors.
    public static let notPermittedName = "io.lockwipe.Manager.NotPermitted"
    public static let noSuchRegistrationName = "io.lockwipe.Manager.NoSuchRegistration"
    public static let noSuchCertificateName = "io.lockwipe.Manager.NoSuchCertificate"
    public static let registrationRefusedName = "io.lockwipe.Manager.RegistrationRefused"
    public static let actionFailedName = "io.lockwipe.Manager.ActionFailed"
    public static let passcodeRequiredName = "io.lockwipe.Manager.PasscodeRequired"
    public static let passcodeExpiredName = "io.lockwipe.Manager.PasscodeExpired"
    /// The daemon is in its start-up pass: only `GetStatus` and `GetInfo` are answered.
    public static let startingUpName = "io.lockwipe.Manager.StartingUp"
    /// The daemon is stopping and did not read the request: asking again is safe.
    public static let stoppingName = "io.lockwipe.Manager.Stopping"

    public static func invalidParameter(_ parameter: String, reason: String? = nil) -> VarlinkError {
        var p = ["parameter": parameter]
        if let reason { p["reason"] = reason }
        return VarlinkError(invalidParameterName, p)
    }
    public static func methodNotFound(_ method: String) -> VarlinkError { VarlinkError(methodNotFoundName, ["method": method]) }
    public static func interfaceNotFound(_ interface: String) -> VarlinkError { VarlinkError(interfaceNotFoundName, ["interface": interface]) }
    public static func notPermitted(_ reason: String) -> VarlinkError { VarlinkError(notPermittedName, ["reason": reason]) }
    public static func noSuchRegistration(_ user: String) -> VarlinkError { VarlinkError(noSuchRegistrationName, ["user": user]) }
    public static func noSuchCertificate(user: String, reason: String) -> VarlinkError {
        VarlinkError(noSuchCertificateName, ["user": user, "reason": reason])
    }
    public static func registrationRefused(_ reason: String) -> VarlinkError { VarlinkError(registrationRefusedName, ["reason": reason]) }
    public static func actionFailed(_ reason: String) -> VarlinkError { VarlinkError(actionFailedName, ["reason": reason]) }
    public static func passcodeRequired(user: String, reason: String) -> VarlinkError {
        VarlinkError(passcodeRequiredName, ["user": user, "reason": reason])
    }
    public static func startingUp(_ reason: String) -> VarlinkError { VarlinkError(startingUpName, ["reason": reason]) }
    public static func stopping(_ reason: String) -> VarlinkError { VarlinkError(stoppingName, ["reason": reason]) }
    public static func passcodeExpired(user: String, reason: String) -> VarlinkError {
        VarlinkError(passcodeExpiredName, ["user": user, "reason": reason])
    }
}

/// Encoding and decoding of single messages (without the NUL terminator).
public enum VarlinkMessage {
    public static func encodeCall<P: Encodable>(method: String, parameters: P) throws -> Data {
        try VarlinkCoding.encoder().encode(VarlinkCall(method: method, parameters: parameters))
    }

    /// The header's keys are single words: no snake-case conversion to pay for.
    public static func decodeHeader(_ data: Data) throws -> VarlinkCallHeader {
        try JSONDecoder().decode(VarlinkCallHeader.self, from: data)
    }

    /// The call's parameters as `P`; a missing `parameters` object decodes as `{}`.
    public static func decodeParameters<P: Decodable>(_ type: P.Type, from data: Data) throws -> P {
        let decoder = VarlinkCoding.decoder()
        if let p = try decoder.decode(VarlinkParametersEnvelope<P>.self, from: data).parameters { return p }
        return try decoder.decode(P.self, from: Data("{}".utf8))
    }

    public static func encodeReply<P: Codable>(_ parameters: P) throws -> Data {
        try VarlinkCoding.encoder().encode(VarlinkReplyEnvelope(parameters: parameters, error: nil))
    }

    public static func encodeError(_ error: VarlinkError) -> Data {
        // A [String: String] always encodes.
        (try? VarlinkCoding.encoder().encode(VarlinkReplyEnvelope(parameters: error.parameters, error: error.name))) ?? Data()
    }

    /// Decodes a reply: the parameters, or throws the `VarlinkError` the peer sent.
    public static func decodeReply<P: Codable>(_ type: P.Type, from data: Data) throws -> P {
        let decoder = JSONDecoder()  // error parameters keep their keys as sent
        // The error's parameters are decoded only for an error reply: as [String: String],
        // the parameters of an answer fail to decode, and that failure costs the CLI more
        // than the look at `error` does.
        if (try? decoder.decode(VarlinkReplyHead.self, from: data))?.error != nil,
            let failure = try? decoder.decode(VarlinkReplyEnvelope<[String: String]>.self, from: data), let name = failure.error
        {
            throw VarlinkError(name, failure.parameters ?? [:])
        }
        if let p = try VarlinkCoding.decoder().decode(VarlinkReplyEnvelope<P>.self, from: data).parameters { return p }
        return try VarlinkCoding.decoder().decode(P.self, from: Data("{}".utf8))
    }
}
