/// A registration's credentials for the policy server: a domain value, not a database
/// record: the control socket builds it from a `Register`/`SetCredentials` request, the
/// check-in client sends it, the state store keeps it. Secret: stored in the state
/// database only (0600 in a 0700 directory), never logged, never shown; its description
/// says only what is present.
public struct ServerCredentials: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    public var token: String?
    /// PEM certificate chain and PEM private key for TLS client authentication.
    public var clientCertificate: String?
    public var clientKey: String?
    /// OAuth 2.0 refresh token (`[server.oauth]`): lockwiped trades it for access tokens
    /// and stores the new one when the server rotates it (`StateStore.rotateRefreshToken`).
    public var refreshToken: String?

    public init(token: String? = nil, clientCertificate: String? = nil, clientKey: String? = nil, refreshToken: String? = nil) {
        self.token = token
        self.clientCertificate = clientCertificate
        self.clientKey = clientKey
        self.refreshToken = refreshToken
    }

    /// What is stored: "none", or the kinds present joined by "+" ("token",
    /// "refresh-token", "certificate", e.g. "refresh-token+certificate").
    public var kind: String {
        let kinds = [(token, "token"), (refreshToken, "refresh-token"), (clientCertificate, "certificate")].compactMap { $0.0 == nil ? nil : $0.1 }
        return kinds.isEmpty ? "none" : kinds.joined(separator: "+")
    }

    public var description: String { "ServerCredentials(\(kind))" }
    public var debugDescription: String { description }
}
