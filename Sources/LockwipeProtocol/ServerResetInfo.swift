/// SAP Mobile Services: the full reset after a server or offline wipe (`status --json`,
/// `sap_reset`): the registration's token, refresh token and connection id are gone, its
/// connection was deleted on the server (or the DELETE failed), and it must be enrolled again.
public struct ServerResetInfo: Codable, Sendable, Equatable {
    /// ISO 8601, UTC: when the credentials were forgotten.
    public var at: String
    /// The connection id given up (null when the registration had none).
    public var connection: String?
    /// "deleted", "pending", "not deleted: WHY", or "no connection to delete".
    public var deleteResult: String
    /// The lockwipectl commands that enrol the user again.
    public var enrol: String
    public init(at: String, connection: String?, deleteResult: String, enrol: String) {
        self.at = at
        self.connection = connection
        self.deleteResult = deleteResult
        self.enrol = enrol
    }

    // The wire's snake-case keys, explicit: decoding with the default key strategy is cheaper.
    enum CodingKeys: String, CodingKey {
        case at, connection
        case deleteResult = "delete_result"
        case enrol
    }
}
