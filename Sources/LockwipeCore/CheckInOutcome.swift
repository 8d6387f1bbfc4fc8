#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What one check-in attempt came to. Only `.contact` is a successful server contact (it
/// restarts the offline clock); the 403 commands act on the registration without being a
/// contact; everything else changes no data.
public enum CheckInOutcome: Sendable, Equatable {
    /// A 2xx with a settings document.
    case contact(ServerSettings)
    /// 403 `TRAFFIC_REG_LOCKED`.
    case lock
    /// 403 `TRAFFIC_REG_WIPED`.
    case wipe
    /// 403 `TRAFFIC_BLOCKED`, `REG_BLOCKED` or `TRAFFIC_REG_BLOCKED` (the code as sent).
    case blocked(String)
    /// Not a contact: timeout, TLS or connection failure, any other status, a bad body.
    case failure(String)

    public var isContact: Bool {
        if case .contact = self { return true }
        return false
    }
}

/// The pure part of a check-in: from what the server answered to an outcome.
public enum CheckInResponse {
    public static let lockCodes: Set<String> = ["TRAFFIC_REG_LOCKED"]
    public static let wipeCodes: Set<String> = ["TRAFFIC_REG_WIPED"]
    public static let blockCodes: Set<String> = ["TRAFFIC_BLOCKED", "REG_BLOCKED", "TRAFFIC_REG_BLOCKED"]

    /// Classifies an answer. `body` is nil when it was larger than
    /// `ServerSettings.maxBodyBytes` (and was not read further).
    public static func classify(status: Int, messageCode: String?, contentType: String?, body: Data?) -> CheckInOutcome {
        let code = messageCode?.trimmingBlanks().uppercased()
        switch status {
        case 200..<300:
            guard isJSON(contentType) else {
                return .failure("HTTP \(status) with content type \(contentType.map { "'\($0.prefix(60))'" } ?? "(none)"), not application/json")
            }
            guard let body else { return .failure("HTTP \(status) with a body larger than \(ServerSettings.maxBodyBytes) bytes") }
            do {
                return .contact(try ServerSettings.decode(body))
            } catch {
                return .failure("HTTP \(status) with a malformed settings document: \(error)")
            }
        case 403:
            guard let code, !code.isEmpty else { return .failure("HTTP 403 without x-message-code") }
            if lockCodes.contains(code) { return .lock }
            if wipeCodes.contains(code) { return .wipe }
            if blockCodes.contains(code) { return .blocked(code) }
            return .failure("HTTP 403 with unknown x-message-code '\(code.prefix(60))'")
        default:
            return .failure("HTTP \(status)" + (code.map { " (x-message-code \($0.prefix(60)))" } ?? ""))
        }
    }

    /// `application/json` or any `+json` type, parameters (charset) ignored.
    public static func isJSON(_ contentType: String?) -> Bool {
        guard let contentType else { return false }
        let type = contentType.split(separator: ";", maxSplits: 1).first.map { $0.trimmingBlanks().lowercased() } ?? ""
        return type == "application/json" || (type.hasPrefix("application/") && type.hasSuffix("+json"))
    }
}
