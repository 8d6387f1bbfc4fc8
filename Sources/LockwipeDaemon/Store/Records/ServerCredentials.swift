/// A registration's credentials for the policy server. Secret: stored in the state
/// database only (0600 in a 0700 directory), never logged, never shown; its description
/// says only what is present.
public struct ServerCredentials: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    public var token: String?
    /// PEM certificate chain and PEM private key for TLS client authentication.
    public var clientCertificate: String?
    public var clientKey: String?

    public init(token: String? = nil, clientCertificate: String? = nil, clientKey: String? = nil) {
        self.token = token
        self.clientCertificate = clientCertificate
        self.clientKey = clientKey
    }

    public var kind: String {
        switch (token != nil, clientCertificate != nil) {
        case (false, false): return "none"
        case (true, false): return "token"
        case (false, true): return "certificate"
        case (true, true): return "token+certificate"
        }
    }

    public var description: String { "ServerCredentials(\(kind))" }
    public var debugDescription: String { description }
}
