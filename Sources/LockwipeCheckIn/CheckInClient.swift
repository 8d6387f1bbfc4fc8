import AsyncHTTPClient
import Foundation
import LockwipeCore
import LockwipeProtocol
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix

/// The check-in client on AsyncHTTPClient: one `HTTPClient` for the daemon's life, at most
/// `maxConcurrent` requests in flight (and so at most that many connections per host, the
/// pool's limit too), every request bounded by one deadline from connect to the last body
/// byte, bodies bounded by `ServerSettings.maxBodyBytes`, redirects not followed.
///
/// The deadline: AsyncHTTPClient's `execute(_:deadline:)` bounds only the wait for the
/// response head, connecting and the TLS handshake included (its deadline timer is
/// cancelled when `execute` returns), and its `readTimeout` only the gap between two
/// reads, which a server sending a byte now and then never exceeds. So the body is read
/// in a task group against a timer at the same deadline: when the timer wins, the
/// reading task is cancelled, which makes AsyncHTTPClient cancel the request and close
/// its connection (the body iterator honours cancellation), and the request slot is free
/// again. A stalled server costs one slot for `[server] timeout`, never more.
///
/// Timeouts are measured on the monotonic clock, so they hold when the wall clock jumps.
public final class CheckInClient: SettingsFetching {
    public static let maxConcurrent = 8

    private let client: HTTPClient
    private let limiter = AsyncLimiter(limit: CheckInClient.maxConcurrent)
    /// Access tokens of registrations with a refresh token (`[server.oauth]`); nil without
    /// a store to keep rotated refresh tokens in.
    let tokens: OAuthTokens?

    /// `tokenStorage`: where refresh tokens are read and rotated ones committed (OAuth; the
    /// daemon's state store, each rotation timed by the Manager's clock). `sharedRefresh`:
    /// how a refresh shared by several requests runs (`OAuthTokens.init`).
    public init(
        tokenStorage: OAuthTokens.Storage? = nil, sharedRefresh: @escaping OAuthTokens.Shared = { await $0() },
        logger: Logger = Logger(label: "lockwiped.oauth")
    ) {
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            connectionPool: .init(idleTimeout: .seconds(30), concurrentHTTP1ConnectionsPerHostSoftLimit: Self.maxConcurrent))
        configuration.httpVersion = .http1Only
        // A connection that cannot be made (refused, no route, a name that does not
        // resolve) ends the attempt at once: the scheduler's retry and back-off are the
        // retry, and `timeout` bounds a server that accepts and then stalls. With the
        // pool's own retry a refusal known at once cost the whole `timeout` (issue 42).
        configuration.connectionPool.retryConnectionEstablishment = false
        let client = HTTPClient(eventLoopGroupProvider: .shared(MultiThreadedEventLoopGroup.singleton), configuration: configuration)
        self.client = client
        tokens = tokenStorage.map { storage in
            OAuthTokens(
                storage: storage,
                transport: { url, headers, body, deadline in await CheckInClient.postForm(client, url: url, headers: headers, body: body, deadline: deadline) },
                logger: logger, shared: sharedRefresh)
        }
    }

    public func shutdown() async {
        try? await client.shutdown()
    }

    /// Why an attempt ended when its task was cancelled (the registration was unregistered,
    /// the daemon is stopping).
    public static let cancelledReason = "cancelled before the server answered"

    public func fetch(
        user: String, credentials: ServerCredentials?, connection: String?, server: ServerConfiguration, deadline: NIODeadline?
    ) async -> CheckInOutcome {
        await fetchAnswer(user: user, credentials: credentials, connection: connection, server: server, deadline: deadline).outcome
    }

    public func fetchAnswer(
        user: String, credentials: ServerCredentials?, connection: String?, server: ServerConfiguration, deadline: NIODeadline?
    ) async -> (outcome: CheckInOutcome, status: Int?) {
        guard let requests = Self.requests(server) else { return (.failure("no server configured"), nil) }
        let request = requests.checkIn(user: user, connection: connection)
        return await exchange(request, user: user, credentials: credentials, server: server, deadline: deadline, failure: { (.failure($0), nil) }) {
            (
                CheckInResponse.classify(status: $0.status, messageCode: $0.header("x-message-code"), contentType: $0.header("Content-Type"), body: $0.body),
                $0.status
            )
        }
    }

    public func probeConnection(
        _ id: String, user: String, credentials: ServerCredentials?, server: ServerConfiguration, deadline: NIODeadline?
    ) async -> StaleConnection.Probe {
        guard let requests = Self.requests(server), server.sapIdentity != nil else { return .unknown("no SAP Mobile Services server configured") }
        return await exchange(
            requests.probeConnection(id), user: user, credentials: credentials, server: server, deadline: deadline, failure: { .unknown($0) }
        ) { StaleConnection.probe(status: $0.status) }
    }

    public func createConnection(user: String, credentials: ServerCredentials?, server: ServerConfiguration, deadline: NIODeadline?) async -> SAPConnectionAnswer {
        guard let requests = Self.requests(server), server.sapIdentity != nil else {
            return .refused(.failure("application connection: no SAP Mobile Services server configured"))
        }
        let request = requests.createConnection(deviceModel: Self.deviceModel)
        return await exchange(
            request, user: user, credentials: credentials, server: server, deadline: deadline, failure: { .refused(.failure("application connection: \($0)")) }
        ) {
            SAPConnectionAnswer.classify(
                status: $0.status, messageCode: $0.header("x-message-code"), contentType: $0.header("Content-Type"), body: $0.body,
                appcidHeader: $0.header("X-SMP-APPCID"), setCookies: $0.headers["Set-Cookie"], location: $0.header("Location"))
        }
    }

    public func deleteConnection(_ id: String, user: String, credentials: ServerCredentials?, server: ServerConfiguration) async -> String? {
        guard let requests = Self.requests(server), server.sapIdentity != nil else { return "no SAP Mobile Services server configured" }
        return await exchange(requests.deleteConnection(id), user: user, removing: true, credentials: credentials, server: server, deadline: nil, failure: { Optional($0) }) {
            (200..<300).contains($0.status) || $0.status == 404 ? nil : "HTTP \($0.status)"
        }
    }

    public func uploadOutbox(
        user: String, name: String, body: [UInt8], credentials: ServerCredentials?, server: ServerConfiguration, timeoutSeconds: Int
    ) async -> OutboxUploadAnswer {
        guard let request = Self.requests(server)?.uploadOutbox(user: user, name: name, body: body) else {
            return .notUploaded("SAP Mobile Services has no outbox upload endpoint: the sealed outbox is kept on the machine")
        }
        // An upload may take longer than a check-in: its own bound, one deadline for all.
        var bounded = server
        bounded.timeoutSeconds = max(server.timeoutSeconds, timeoutSeconds)
        let deadline = NIODeadline.now() + .seconds(Int64(bounded.timeoutSeconds))
        return await exchange(request, user: user, credentials: credentials, server: bounded, deadline: deadline, failure: { .notUploaded($0) }) {
            OutboxUploadAnswer.classify(status: $0.status, receipt: $0.header("X-Lockwipe-Receipt"))
        }
    }

    /// The request builder for `server` (nil without a URL).
    static func requests(_ server: ServerConfiguration) -> ServerRequests? {
        guard let base = server.url else { return nil }
        return ServerRequests(base: base, serverProtocol: server.serverProtocol, sap: server.sapIdentity, version: LockwipeVersion.current)
    }

    /// `DeviceModel` of the Connections request: the DMI product name, or "Linux".
    static let deviceModel: String = {
        let raw = (try? String(contentsOfFile: "/sys/class/dmi/id/product_name", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        let clean = String(raw.unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7F }.prefix(100).map(Character.init))
        return clean.isEmpty ? "Linux" : clean
    }()

    /// What the server answered: status, headers, and the body (nil when it was larger
    /// than `ServerSettings.maxBodyBytes` and was not read).
    struct Answer: Sendable {
        var status: Int
        var headers: HTTPHeaders
        var body: Data?
        func header(_ name: String) -> String? { headers.first(name: name) }
    }

    /// One request in a request slot, bounded by `deadline` (or `[server] timeout`), with
    /// the registration's credentials: its token, or an OAuth access token from its refresh
    /// token (`withOAuth`).
    private func exchange<T: Sendable>(
        _ request: ServerRequest, user: String, removing: Bool = false, credentials: ServerCredentials?, server: ServerConfiguration,
        deadline: NIODeadline?,
        failure: @escaping @Sendable (String) -> T, classify: @escaping @Sendable (Answer) -> T
    ) async -> T {
        guard await limiter.acquire(until: deadline) else {
            if Task.isCancelled { return failure(Self.cancelledReason) }
            return failure("timed out after \(server.timeoutSeconds) s waiting for one of the \(Self.maxConcurrent) check-in connections")
        }
        let ownDeadline = NIODeadline.now() + .seconds(Int64(server.timeoutSeconds))
        let end = deadline.map { min($0, ownDeadline) } ?? ownDeadline
        let result: T
        if let refreshToken = credentials?.refreshToken {
            result = await withOAuth(user: user, removing: removing ? refreshToken : nil, server: server, deadline: end, failure: failure) { authorization in
                await self.attempt(request, credentials: credentials, authorization: authorization, server: server, deadline: end, failure: failure, classify: classify)
            }
        } else {
            let authorization = credentials?.token.map { "Bearer \($0)" }
            result = await attempt(request, credentials: credentials, authorization: authorization, server: server, deadline: end, failure: failure, classify: classify)
                .value
        }
        await limiter.release()
        return Task.isCancelled ? failure(Self.cancelledReason) : result
    }

    /// A request with an OAuth access token (RFC 6750): from the cache or a refresh; on a
    /// 401 the token is dropped, refreshed once and the request sent once more. A token
    /// that cannot be had is a failed request saying why (`last_error`). `removing`: the
    /// refresh token of a registration already removed (`OAuthTokens.accessToken(removing:)`).
    private func withOAuth<T: Sendable>(
        user: String, removing: String? = nil, server: ServerConfiguration, deadline: NIODeadline, failure: (String) -> T,
        _ request: (String) async -> (value: T, unauthorized: Bool)
    ) async -> T {
        guard let oauth = server.oauth else {
            return failure("a refresh token is stored but [server.oauth] is not configured: there is no token endpoint to use it with")
        }
        guard let tokens else { return failure("OAuth is not available (no state store)") }
        var retried = false
        while true {
            let token: String
            let got =
                if let removing {
                    await tokens.accessToken(removing: user, refreshToken: removing, oauth: oauth, deadline: deadline)
                } else {
                    await tokens.accessToken(user: user, oauth: oauth, deadline: deadline)
                }
            switch got {
            case .success(let t): token = t
            case .failure(let f): return failure(f.message)
            }
            let (value, unauthorized) = await request("Bearer \(token)")
            guard unauthorized, !retried, !Task.isCancelled else { return value }
            await tokens.invalidate(user: user, accessToken: token)
            retried = true
        }
    }

    /// POSTs a form to a token endpoint: no redirects, the body bounded by
    /// `TokenResponse.maxBodyBytes`, everything by `deadline`. Its certificate is checked
    /// against the system trust store (`[server] ca_file` is for the policy server).
    static func postForm(_ client: HTTPClient, url: String, headers: [(String, String)], body: String, deadline: NIODeadline) async -> OAuthTokens.Reply {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        request.headers.add(name: "User-Agent", value: "lockwiped/\(LockwipeVersion.current)")
        request.body = .bytes(ByteBuffer(string: body))
        let timeout = max(1, Int((deadline - .now()).nanoseconds / 1_000_000_000))
        let response: HTTPClientResponse
        do {
            response = try await client.execute(request, deadline: deadline)
        } catch {
            return .failure(describe(error, timeout: timeout, url: url))
        }
        let status = Int(response.status.code)
        let contentType = response.headers.first(name: "Content-Type")
        if let declared = response.headers.first(name: "Content-Length").flatMap(Int.init), declared > TokenResponse.maxBodyBytes {
            return .answer(status: status, contentType: contentType, body: nil)
        }
        return await bounded(by: deadline, timeoutSeconds: timeout, failure: { .failure($0) }) {
            do {
                let bytes = try await response.body.collect(upTo: TokenResponse.maxBodyBytes)
                return .answer(status: status, contentType: contentType, body: Data(bytes.readableBytesView))
            } catch is NIOTooManyBytesError {
                return .answer(status: status, contentType: contentType, body: nil)
            } catch {
                return .failure(describe(error, timeout: timeout, url: url))
            }
        }
    }

    /// `operation`'s outcome, or a timeout failure once `deadline` passes; in that case
    /// `operation` is cancelled and awaited (its outcome discarded), so nothing it holds
    /// outlives this call.
    static func bounded<T: Sendable>(
        by deadline: NIODeadline, timeoutSeconds: Int, failure: @escaping @Sendable (String) -> T, _ operation: @escaping @Sendable () async -> T
    ) async -> T {
        await withTaskGroup(of: T?.self) { group in
            group.addTask { await operation() }
            group.addTask {
                // An event-loop timer, as everywhere in the daemon: Task.sleep's Dispatch
                // timers do not fire under libfaketime, which the time-travel tests use.
                let timer = MultiThreadedEventLoopGroup.singleton.any().scheduleTask(deadline: deadline) {}
                await withTaskCancellationHandler {
                    _ = try? await timer.futureResult.get()
                } onCancel: {
                    timer.cancel()
                }
                return Task.isCancelled ? nil : failure("timed out after \(timeoutSeconds) s")
            }
            var outcome: T = failure(Self.cancelledReason)
            while let next = await group.next() {
                guard let next else { continue }  // the timer, cancelled
                outcome = next
                break
            }
            group.cancelAll()
            if Task.isCancelled { return failure(Self.cancelledReason) }
            return outcome
        }
    }

    /// One request; `unauthorized`: the server answered 401 (an OAuth access token it no
    /// longer accepts).
    private func attempt<T: Sendable>(
        _ built: ServerRequest, credentials: ServerCredentials?, authorization: String?, server: ServerConfiguration, deadline: NIODeadline,
        failure: @escaping @Sendable (String) -> T, classify: @escaping @Sendable (Answer) -> T
    ) async -> (value: T, unauthorized: Bool) {
        var request = HTTPClientRequest(url: built.url)
        request.method = HTTPMethod(rawValue: built.method.rawValue)
        for h in built.headers { request.headers.add(name: h.name, value: h.value) }
        Self.authorize(&request, authorization)
        if let body = built.body { request.body = .bytes(ByteBuffer(bytes: body)) }
        do {
            request.tlsConfiguration = try Self.tlsConfiguration(server: server, credentials: credentials)
        } catch {
            return (failure("TLS setup failed: \(Self.describe(error, timeout: server.timeoutSeconds, url: built.url))"), false)
        }
        let response: HTTPClientResponse
        do {
            // Up to the head: AsyncHTTPClient's own deadline, which also reports why a
            // connection could not be made (refused, TLS) when that is what ran out the time.
            response = try await client.execute(request, deadline: deadline)
        } catch {
            return (failure(Self.describe(error, timeout: server.timeoutSeconds, url: built.url)), false)
        }
        let unauthorized = response.status.code == 401
        let head = Answer(status: Int(response.status.code), headers: response.headers, body: nil)
        let declared = response.headers.first(name: "Content-Length").flatMap(Int.init)
        if let declared, declared > ServerSettings.maxBodyBytes {
            // Not read: the connection is dropped with the response.
            return (classify(head), unauthorized)
        }
        // The body: the same deadline, on a timer of our own (see the type's comment).
        let timeout = server.timeoutSeconds
        let value = await Self.bounded(by: deadline, timeoutSeconds: timeout, failure: failure) {
            var answer = head
            do {
                answer.body = Data((try await response.body.collect(upTo: ServerSettings.maxBodyBytes)).readableBytesView)
            } catch is NIOTooManyBytesError {
                answer.body = nil
            } catch {
                return failure(Self.describe(error, timeout: timeout, url: built.url))
            }
            return classify(answer)
        }
        return (value, unauthorized)
    }
}
