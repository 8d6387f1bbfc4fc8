/// `[server.oauth]`: where lockwiped turns a registration's refresh token into access
/// tokens (RFC 6749 section 6), and how it authenticates itself there (section 2.3.1).
/// Without it, a stored refresh token cannot be used (the check-in fails and says so).
public struct OAuthConfiguration: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The token endpoint: https://..., or http:// to a loopback host only under `[server]
    /// allow_insecure_http = true` (the rule of `[server] url`).
    public var tokenURL: String
    public var clientID: String
    /// The path of `client_secret_file`, for messages.
    public var clientSecretFile: String?
    /// Its contents (surrounding whitespace removed), read when the configuration is
    /// loaded or reloaded. Secret: never logged nor shown (see `description`).
    public var clientSecret: String?
    /// SAP Mobile Services: `[server] application_version`, sent as `X-APP-VERSION` to the
    /// token endpoint too (SAP: "every request to mobile services"); nil: not sent.
    public var applicationVersion: String?

    /// The headers every token request carries besides the grant's own.
    public var extraHeaders: [(String, String)] { applicationVersion.map { [("X-APP-VERSION", $0)] } ?? [] }

    public init(tokenURL: String, clientID: String, clientSecretFile: String? = nil, clientSecret: String? = nil) {
        self.tokenURL = tokenURL
        self.clientID = clientID
        self.clientSecretFile = clientSecretFile
        self.clientSecret = clientSecret
    }

    public var description: String {
        "OAuthConfiguration(token_url: \(tokenURL), client_id: \(clientID), secret: \(clientSecret == nil ? "none" : "set"))"
    }
    public var debugDescription: String { description }
}
