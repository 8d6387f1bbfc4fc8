import AsyncHTTPClient
import Foundation
import LockwipeCore
import LockwipeProtocol
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// Fetches one registration's settings from the policy server. A seam for tests: the
/// daemon uses `CheckInClient`.
public protocol SettingsFetching: Sendable {
    /// One bounded attempt; never throws: anything that is not an answer is `.failure`.
    func fetch(user: String, credentials: ServerCredentials?, server: ServerConfiguration) async -> CheckInOutcome
    func shutdown() async
}

/// The check-in client on AsyncHTTPClient: one `HTTPClient` for the daemon's life, at most
/// `maxConcurrent` requests in flight (and so at most that many connections per host, the
/// pool's limit too), every request bounded by `[server] timeout` from connect to the last
/// body byte, bodies bounded by `ServerSettings.maxBodyBytes`, redirects not followed.
///
/// Timeouts are NIO deadlines on CLOCK_MONOTONIC, so they hold when the wall clock jumps.
public final class CheckInClient: SettingsFetching {
    public static let maxConcurrent = 8

    private let client: HTTPClient
    private let limiter = AsyncLimiter(limit: CheckInClient.maxConcurrent)

    public init() {
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            connectionPool: .init(idleTimeout: .seconds(30), concurrentHTTP1ConnectionsPerHostSoftLimit: Self.maxConcurrent))
        configuration.httpVersion = .http1Only
        client = HTTPClient(eventLoopGroupProvider: .shared(MultiThreadedEventLoopGroup.singleton), configuration: configuration)
    }

    public func shutdown() async {
        try? await client.shutdown()
    }

    public func fetch(user: String, credentials: ServerCredentials?, server: ServerConfiguration) async -> CheckInOutcome {
        guard let base = server.url else { return .failure("no server configured") }
        await limiter.acquire()
        let outcome = await attempt(base: base, user: user, credentials: credentials, server: server)
        await limiter.release()
        return outcome
    }

    private func attempt(base: String, user: String, credentials: ServerCredentials?, server: ServerConfiguration) async -> CheckInOutcome {
        let timeout = TimeAmount.seconds(Int64(server.timeoutSeconds))
        var request = HTTPClientRequest(url: ServerURL.settings(base: base, user: user))
        request.method = .GET
        request.headers.add(name: "Accept", value: "application/json")
        request.headers.add(name: "User-Agent", value: "lockwiped/\(LockwipeVersion.current)")
        if let token = credentials?.token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        do {
            request.tlsConfiguration = try Self.tlsConfiguration(server: server, credentials: credentials)
        } catch {
            return .failure("TLS setup failed: \(Self.describe(error, timeout: server.timeoutSeconds))")
        }
        do {
            let response = try await client.execute(request, deadline: .now() + timeout)
            let contentType = response.headers.first(name: "Content-Type")
            let messageCode = response.headers.first(name: "x-message-code")
            var body: Data?
            let declared = response.headers.first(name: "Content-Length").flatMap(Int.init)
            if let declared, declared > ServerSettings.maxBodyBytes {
                body = nil  // not read: the connection is dropped with the response
            } else {
                do {
                    body = Data((try await response.body.collect(upTo: ServerSettings.maxBodyBytes)).readableBytesView)
                } catch is NIOTooManyBytesError {
                    body = nil
                }
            }
            return CheckInResponse.classify(status: Int(response.status.code), messageCode: messageCode, contentType: contentType, body: body)
        } catch {
            return .failure(Self.describe(error, timeout: server.timeoutSeconds))
        }
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

    /// A one-line reason an operator can act on (never containing request headers).
    static func describe(_ error: any Error, timeout: Int) -> String {
        if let e = error as? HTTPClientError {
            switch e {
            case .deadlineExceeded, .readTimeout, .connectTimeout, .writeTimeout:
                return "timed out after \(timeout) s"
            case .remoteConnectionClosed: return "the server closed the connection before the answer was complete"
            default: return "HTTP client error: \(e)"
            }
        }
        if error is NIOSSLError || error is BoringSSLError || error is NIOSSLExtraError {
            return "TLS failure: \(String(describing: error).prefix(300))"
        }
        if let e = error as? NIOConnectionError {
            let reasons = (e.connectionErrors.map { "\($0.error)" } + (e.dnsAError.map { ["\($0)"] } ?? []))
            return "cannot connect to \(e.host):\(e.port): \(reasons.first.map { String($0.prefix(200)) } ?? "unknown error")"
        }
        if let e = error as? IOError { return "cannot connect: \(String(describing: e).prefix(200))" }
        if error is ChannelError { return "connection failed: \(String(describing: error).prefix(200))" }
        return String(String(describing: error).prefix(300))
    }
}

/// At most `limit` holders at once; the others wait in order.
actor AsyncLimiter {
    private let limit: Int
    private var active = 0
    private var waiters: [CheckedContinuation<Void, Never>] = []

    init(limit: Int) { self.limit = limit }

    func acquire() async {
        if active < limit {
            active += 1
            return
        }
        await withCheckedContinuation { waiters.append($0) }  // the releaser hands its slot over
    }

    func release() {
        if waiters.isEmpty {
            active -= 1
        } else {
            waiters.removeFirst().resume()
        }
    }
}
