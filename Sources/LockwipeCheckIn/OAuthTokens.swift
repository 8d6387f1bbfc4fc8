import Foundation
import LockwipeBase
import LockwipeCore
import Logging
import NIOCore

/// Access tokens for registrations that hold an OAuth refresh token (`[server.oauth]`).
///
/// Per registration (by user name): the access token in use, kept until shortly before it
/// expires (`TokenResponse.useUntil`), and at most one refresh in flight, which every
/// caller that needs a token meanwhile awaits. The refresh token is always read from the
/// store, so credentials replaced by `lockwipectl credentials` take effect at once and a
/// cached access token of the old ones is never sent.
///
/// Rotation: when the token endpoint answers with a new refresh token, the old one is
/// consumed on the server. The new one is committed to the state database
/// (`StateStore.rotateRefreshToken`) before the access token that came with it is handed
/// to anyone; if that fails, the access token is not used. So a daemon killed at any point
/// restarts holding a refresh token the server still accepts (or, killed between the
/// server's answer and the commit, the consumed one: the same as an answer that never
/// arrived, which nothing on this side can avoid).
public actor OAuthTokens {
    /// What the transport brought back from one POST.
    public enum Reply: Sendable {
        case answer(status: Int, contentType: String?, body: Data?)
        /// No answer: connection, TLS, timeout (the reason, one line).
        case failure(String)
    }

    /// POSTs a form to the token endpoint, bounded by the deadline.
    public typealias Transport = @Sendable (_ url: String, _ headers: [(String, String)], _ body: String, _ deadline: NIODeadline) async -> Reply

    /// Runs a refresh shared by several requests (see `init`).
    public typealias Shared = @Sendable (_ refresh: @escaping @Sendable () async -> Result<String, Failure>) async -> Result<String, Failure>

    /// Where refresh tokens live (the state database in the daemon).
    public struct Storage: Sendable {
        public var load: @Sendable (_ user: String) async throws -> String?
        /// Compare-and-swap, durable before it returns; false: no longer `old`.
        public var rotate: @Sendable (_ user: String, _ old: String, _ new: String) async throws -> Bool

        public init(
            load: @escaping @Sendable (String) async throws -> String?, rotate: @escaping @Sendable (String, String, String) async throws -> Bool
        ) {
            self.load = load
            self.rotate = rotate
        }
    }

    public enum Failure: Error, Sendable, Equatable {
        /// `invalid_grant`: the message tells the operator to re-enrol.
        case invalidGrant(String)
        /// Anything else (tried again at the next check-in).
        case failed(String)

        public var message: String {
            switch self {
            case .invalidGrant(let m), .failed(let m): return m
            }
        }
    }

    private struct Cached {
        var from: String
        var accessToken: String
        var useUntil: Int64
    }

    private let storage: Storage
    private let transport: Transport
    private let logger: Logger
    private let now: @Sendable () -> Int64
    private let shared: Shared
    private var cache: [String: Cached] = [:]
    private var inFlight: [String: (from: String, task: Task<Result<String, Failure>, Never>)] = [:]
    /// The refresh token a refresh in flight is storing (the store is written off this
    /// actor): a caller that already reads it waits for that refresh instead of spending it.
    private var rotatingTo: [String: String] = [:]
    /// Refresh tokens refused with `invalid_grant`: not sent again (each try would be
    /// refused the same way); replacing the credentials clears this.
    private var refused: [String: (token: String, message: String)] = [:]
    /// How many refresh requests were sent (for tests).
    public private(set) var refreshes = 0

    /// `now`: monotonic nanoseconds (injected in tests). `shared`: runs a refresh, which
    /// every check-in of the user that asks meanwhile shares, as no one request's work
    /// (the daemon runs it without the requesting client: `RequestingClient.$current`).
    public init(
        storage: Storage, transport: @escaping Transport, logger: Logger,
        now: @escaping @Sendable () -> Int64 = { Int64(NIODeadline.now().uptimeNanoseconds) },
        shared: @escaping Shared = { await $0() }
    ) {
        self.storage = storage
        self.transport = transport
        self.logger = logger
        self.now = now
        self.shared = shared
    }

    /// An access token for `user`: the cached one while usable, else from one refresh
    /// (shared with concurrent callers), bounded by `deadline`.
    public func accessToken(user: String, oauth: OAuthConfiguration, deadline: NIODeadline) async -> Result<String, Failure> {
        let stored: String?
        do {
            stored = try await storage.load(user)
        } catch {
            return .failure(.failed("cannot read the refresh token from the state database: \(error)"))
        }
        guard let stored else { return .failure(.failed("no refresh token is stored for \(user)")) }
        if let r = refused[user] {
            if r.token == stored { return .failure(.invalidGrant(r.message)) }
            refused[user] = nil
        }
        if let c = cache[user], TokenResponse.isUsable(cachedFrom: c.from, useUntil: c.useUntil, storedRefreshToken: stored, now: now()) {
            return .success(c.accessToken)
        }
        if let f = inFlight[user], f.from == stored || rotatingTo[user] == stored { return await f.task.value }
        // Shared by every check-in of the user that asks meanwhile: no one request's work.
        let task = Task { await shared { await self.refresh(user: user, from: stored, oauth: oauth, deadline: deadline) } }
        inFlight[user] = (stored, task)
        return await task.value
    }

    /// An access token for a registration that is being removed (the DELETE of its SAP
    /// application connection, sent after its credentials are gone from the store): the
    /// cached one while its time is not up, else one refresh with `refreshToken`, the token
    /// it had. Nothing is stored: a refresh token the server rotates now is of no use to a
    /// registration that no longer exists. The cache entry is dropped afterwards.
    public func accessToken(removing user: String, refreshToken: String, oauth: OAuthConfiguration, deadline: NIODeadline) async -> Result<String, Failure> {
        defer { cache[user] = nil }
        if let c = cache[user], now() < c.useUntil { return .success(c.accessToken) }
        refreshes += 1
        let request = TokenResponse.refreshRequest(refreshToken: refreshToken, clientID: oauth.clientID, clientSecret: oauth.clientSecret)
        switch await transport(oauth.tokenURL, request.headers + oauth.extraHeaders, request.body, deadline) {
        case .failure(let why): return .failure(.failed("token endpoint: \(why)"))
        case .answer(let status, let contentType, let body):
            switch TokenResponse.classify(status: status, contentType: contentType, body: body) {
            case .granted(let grant): return .success(grant.accessToken)
            case .invalidGrant(let description): return .failure(.invalidGrant(TokenResponse.invalidGrantMessage(user: user, description: description)))
            case .failed(let why, _): return .failure(.failed(why))
            }
        }
    }

    /// The server refused `accessToken` (401): it is not used again; the next
    /// `accessToken` refreshes (unless another caller already did).
    public func invalidate(user: String, accessToken: String) {
        if cache[user]?.accessToken == accessToken { cache[user] = nil }
    }

    private func refresh(user: String, from old: String, oauth: OAuthConfiguration, deadline: NIODeadline) async -> Result<String, Failure> {
        defer {
            if inFlight[user]?.from == old {
                inFlight[user] = nil
                rotatingTo[user] = nil
            }
        }
        refreshes += 1
        let request = TokenResponse.refreshRequest(refreshToken: old, clientID: oauth.clientID, clientSecret: oauth.clientSecret)
        let issued = now()
        let reply = await transport(oauth.tokenURL, request.headers + oauth.extraHeaders, request.body, deadline)
        let answer: TokenAnswer
        switch reply {
        case .failure(let why): return .failure(.failed("token endpoint: \(why)"))
        case .answer(let status, let contentType, let body): answer = TokenResponse.classify(status: status, contentType: contentType, body: body)
        }
        switch answer {
        case .failed(let why, let rotated):
            // The server consumed the old refresh token all the same: keep the new one.
            if let rotated, rotated != old {
                rotatingTo[user] = rotated
                do {
                    if try await storage.rotate(user, old, rotated) { cache[user] = nil }
                } catch {
                    // The old token is spent: the next check-in is likely refused (invalid_grant).
                    logger.error(
                        "the token endpoint rotated the refresh token of \(user) but it could not be stored: \(ErrorWords.of(error))",
                        metadata: ["user": .string(user), "error": .string(ErrorWords.of(error)), "message_id": .string(MessageID.stateUnavailable.rawValue)])
                    return .failure(.failed("\(why); the refresh token it rotated could not be stored (\(ErrorWords.of(error)))"))
                }
            }
            return .failure(.failed(why))
        case .invalidGrant(let description):
            let message = TokenResponse.invalidGrantMessage(user: user, description: description)
            cache[user] = nil
            refused[user] = (old, message)
            logger.warning(
                "\(message)",
                metadata: [
                    "message_id": .string(MessageID.oauthRefreshRefused.rawValue), "user": .string(user), "action": "check-in",
                    "token_url": .string(oauth.tokenURL),
                ])
            return .failure(.invalidGrant(message))
        case .granted(let grant):
            var current = old
            if let new = grant.refreshToken, new != old {
                rotatingTo[user] = new
                do {
                    guard try await storage.rotate(user, old, new) else {
                        return .failure(.failed("the credentials of \(user) were replaced while a token was fetched; the next check-in uses the new ones"))
                    }
                } catch {
                    return .failure(
                        .failed("the token endpoint rotated the refresh token but it could not be stored (\(error)); the access token was not used"))
                }
                current = new
            }
            cache[user] = Cached(from: current, accessToken: grant.accessToken, useUntil: TokenResponse.useUntil(issued: issued, expiresIn: grant.expiresIn))
            return .success(grant.accessToken)
        }
    }
}
