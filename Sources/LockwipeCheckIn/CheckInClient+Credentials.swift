import AsyncHTTPClient
import LockwipeCore
import NIOSSL

extension CheckInClient {
    /// The registration's credentials on a request (its token, or an OAuth access token):
    /// the one place `Authorization` is set.
    static func authorize(_ request: inout HTTPClientRequest, _ authorization: String?) {
        if let authorization { request.headers.replaceOrAdd(name: "Authorization", value: authorization) }
    }

    /// nil (the client's default: the system trust store) unless a CA file or a client
    /// certificate is configured. Requests with the same configuration share a pool.
    static func tlsConfiguration(server: ServerConfiguration, credentials: ServerCredentials?) throws -> TLSConfiguration? {
        let cert = credentials?.clientCertificate
        guard server.caFile != nil || cert != nil else { return nil }
        var tls = TLSConfiguration.makeClientConfiguration()
        if let ca = server.caFile { tls.additionalTrustRoots = [.file(ca)] }
        if let cert, let key = credentials?.clientKey {
            tls.certificateChain = try NIOSSLCertificate.fromPEMBytes(Array(cert.utf8)).map { .certificate($0) }
            tls.privateKey = .privateKey(try NIOSSLPrivateKey(bytes: Array(key.utf8), format: .pem))
        }
        return tls
    }

    /// Why credentials cannot be used, one line each; empty when they can.
    public static func credentialProblems(_ c: ServerCredentials) -> [String] {
        var problems: [String] = []
        if let refresh = c.refreshToken, let problem = TokenResponse.tokenProblem(refresh) {
            problems.append("the refresh token is \(problem) (it must be 1 to \(TokenResponse.maxTokenBytes) visible ASCII characters)")
        }
        if let token = c.token {
            if token.isEmpty { problems.append("the token is empty") }
            if token.utf8.count > 8192 { problems.append("the token is longer than 8192 bytes") }
            // A header value: visible ASCII only, so it can never split the request.
            if !token.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) {
                problems.append("the token may only contain visible ASCII characters (no spaces, control characters or non-ASCII)")
            }
        }
        switch (c.clientCertificate, c.clientKey) {
        case (nil, nil): break
        case (.some, nil), (nil, .some): problems.append("a client certificate needs its private key and the other way round")
        case let (cert?, key?):
            do {
                let chain = try NIOSSLCertificate.fromPEMBytes(Array(cert.utf8))
                if chain.isEmpty { problems.append("the client certificate file holds no PEM certificate") }
            } catch {
                problems.append("the client certificate is not a PEM certificate")
            }
            if (try? NIOSSLPrivateKey(bytes: Array(key.utf8), format: .pem)) == nil {
                problems.append("the client key is not an unencrypted PEM private key")
            }
        }
        return problems
    }
}
