/// A registration the policy server rejects: reached, but refusing the machine (HTTP 403
/// without a known message code, or 401 a token refresh did not cure). Its check-ins are
/// no contact, so the offline clock runs on; the next contact clears it.
public struct RejectionInfo: Codable, Sendable, Equatable {
    /// The answer's HTTP status (403 or 401).
    public var httpStatus: Int
    /// What the answer said: its message code, when it had one, and the start of its body.
    public var text: String
    /// ISO 8601, UTC: the first rejected check-in of this run.
    public var since: String?
    /// What an administrator should check.
    public var check: String

    public init(httpStatus: Int, text: String, since: String?, check: String) {
        self.httpStatus = httpStatus
        self.text = text
        self.since = since
        self.check = check
    }

    // The wire's snake-case keys, explicit: decoding with the default key strategy is cheaper.
    enum CodingKeys: String, CodingKey {
        case httpStatus = "http_status"
        case text, since, check
    }
}
