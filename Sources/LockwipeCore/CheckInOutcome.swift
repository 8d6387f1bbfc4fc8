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
    /// The server is reached but refuses the machine: a 403 without a known message code
    /// (SAP's application versioning answers so when `X-APP-VERSION` is missing or
    /// inactive, a role check too), or a 401 the token refresh did not cure (the client
    /// refreshes an OAuth token and asks once more before it classifies). `text`: what the
    /// answer said (its message code, an excerpt of its body), for status and the journal.
    case rejected(status: Int, text: String)
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
            guard let code, !code.isEmpty else { return .rejected(status: 403, text: rejectionText(code: nil, body: body)) }
            if lockCodes.contains(code) { return .lock }
            if wipeCodes.contains(code) { return .wipe }
            if blockCodes.contains(code) { return .blocked(code) }
            return .rejected(status: 403, text: rejectionText(code: code, body: body))
        case 401:
            return .rejected(status: 401, text: rejectionText(code: code, body: body))
        default:
            return .failure("HTTP \(status)" + (code.map { " (x-message-code \($0.prefix(60)))" } ?? ""))
        }
    }

    /// Longest body excerpt kept in a rejection's text.
    public static let rejectionExcerptLength = 200

    /// What a refusing answer said, for people: its message code (when it has one) and the
    /// start of its body, control characters and runs of blanks made one space.
    public static func rejectionText(code: String?, body: Data?) -> String {
        var parts: [String] = []
        if let code, !code.isEmpty { parts.append("x-message-code \(code.prefix(60))") }
        if let body, !body.isEmpty {
            let text = String(decoding: body.prefix(4 * rejectionExcerptLength), as: UTF8.self)
            var excerpt = ""
            var blank = false
            for scalar in text.unicodeScalars {
                let isBlank = scalar.properties.isWhitespace || scalar.value < 0x20 || scalar.value == 0x7F || scalar == "\u{FFFD}"
                if isBlank {
                    if !excerpt.isEmpty { blank = true }
                    continue
                }
                if blank { excerpt.unicodeScalars.append(" ") }
                blank = false
                excerpt.unicodeScalars.append(scalar)
                if excerpt.unicodeScalars.count >= rejectionExcerptLength { break }
            }
            if !excerpt.isEmpty { parts.append("\"\(excerpt)\"") }
        }
        return parts.isEmpty ? "no message code, empty body" : (code == nil ? ["no message code"] + parts : parts).joined(separator: "; ")
    }

    /// `application/json` or any `+json` type, parameters (charset) ignored.
    public static func isJSON(_ contentType: String?) -> Bool {
        guard let contentType else { return false }
        let type = contentType.split(separator: ";", maxSplits: 1).first.map { $0.trimmingBlanks().lowercased() } ?? ""
        return type == "application/json" || (type.hasPrefix("application/") && type.hasSuffix("+json"))
    }
}
