import Foundation
import LockwipeCore

/// What a token endpoint granted (RFC 6749 section 5.1). Secret: its description names
/// no token.
public struct OAuthGrant: Sendable, Equatable, CustomStringConvertible {
    public var accessToken: String
    /// Seconds the access token lives, as sent (nil: not sent).
    public var expiresIn: Int?
    /// The new refresh token when the server rotated it (nil: keep using the old one).
    public var refreshToken: String?

    public init(accessToken: String, expiresIn: Int?, refreshToken: String?) {
        self.accessToken = accessToken
        self.expiresIn = expiresIn
        self.refreshToken = refreshToken
    }

    public var description: String {
        "OAuthGrant(expires_in: \(expiresIn.map { "\($0)" } ?? "none"), rotated: \(refreshToken != nil))"
    }
}

/// A token endpoint's answer to a `refresh_token` grant, classified.
public enum TokenAnswer: Sendable, Equatable {
    case granted(OAuthGrant)
    /// RFC 6749 section 5.2 `invalid_grant`: the refresh token is invalid, expired, revoked
    /// or was already used. Only a new one (`lockwipectl credentials`) helps.
    case invalidGrant(description: String?)
    /// Any other error answer: not a contact, tried again at the next check-in.
    /// `rotated`: a usable new refresh token the answer carried all the same (the server
    /// has consumed the old one: it must be kept, or the registration is lost).
    case failed(String, rotated: String?)

    static func plain(_ why: String) -> TokenAnswer { .failed(why, rotated: nil) }
}

/// The pure part of OAuth: the request lockwiped sends, what the answer means, and how
/// long an access token may be used. No I/O, no clock reads (times are passed in).
public enum TokenResponse {
    /// Larger token answers are not read: nothing legitimate is that large.
    public static let maxBodyBytes = 65_536
    /// Longest lifetime believed (one year); a longer `expires_in` is a broken answer.
    public static let maxExpiresIn = 31_536_000
    /// How long an access token without `expires_in` is used (RFC 6749 leaves it to the
    /// server's documentation); a 401 before then refreshes it anyway.
    public static let defaultLifetime = 60
    /// At most this much before its end a cached access token is refreshed, so that a
    /// request never starts with one about to run out (a quarter of shorter lifetimes).
    public static let maxEarlyRefresh = 30.0
    /// Tokens are sent in headers and forms: visible ASCII only, bounded.
    public static let maxTokenBytes = 8192

    // MARK: The request

    /// `application/x-www-form-urlencoded` (RFC 6749 appendix B): every byte but ASCII
    /// letters, digits and `-._~*` percent-encoded as UTF-8, a space as `+`.
    public static func formEncoded(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "*"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            case UInt8(ascii: " "):
                out += "+"
            default:
                let hex = String(byte, radix: 16, uppercase: true)
                out += byte < 16 ? "%0\(hex)" : "%\(hex)"
            }
        }
        return out
    }

    /// The `refresh_token` grant (RFC 6749 section 6): headers and form body. With a
    /// client secret the client authenticates with HTTP Basic, its id and secret each
    /// form-encoded first (section 2.3.1); without one, as a public client, it sends
    /// `client_id` in the body (sections 2.3.1 and 3.2.1).
    public static func refreshRequest(refreshToken: String, clientID: String, clientSecret: String?) -> (headers: [(String, String)], body: String) {
        var headers = [("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json")]
        var fields = [("grant_type", "refresh_token"), ("refresh_token", refreshToken)]
        if let clientSecret {
            let pair = formEncoded(clientID) + ":" + formEncoded(clientSecret)
            headers.append(("Authorization", "Basic " + Data(pair.utf8).base64EncodedString()))
        } else {
            fields.append(("client_id", clientID))
        }
        return (headers, fields.map { formEncoded($0.0) + "=" + formEncoded($0.1) }.joined(separator: "&"))
    }

    // MARK: The answer

    /// Classifies an answer; `body` is nil when it was larger than `maxBodyBytes`.
    public static func classify(status: Int, contentType: String?, body: Data?) -> TokenAnswer {
        let answered = "the token endpoint answered HTTP \(status)"
        guard let body else { return .plain("\(answered) with a body larger than \(maxBodyBytes) bytes") }
        guard let object = try? JSONDecoder().decode([String: JSONValue].self, from: body) else {
            return .plain("\(answered) with \(describeNonJSON(contentType: contentType, body: body)), not a JSON object")
        }
        guard (200..<300).contains(status) else {
            // Section 5.2: 400 (or 401 for a failed client authentication) with "error".
            guard case .string(let code)? = object["error"], !code.isEmpty else { return .plain("\(answered) without an OAuth error code") }
            var description: String?
            if case .string(let d)? = object["error_description"] { description = printable(d, limit: 200) }
            if code == "invalid_grant" { return .invalidGrant(description: description) }
            return .plain("\(answered) \(printable(code, limit: 60))" + (description.map { ": \($0)" } ?? ""))
        }
        // Read first: a rotated refresh token is kept even when the rest is unusable.
        var rotated: String?
        switch object["refresh_token"] {
        case nil, .null?: break
        case .string(let r)?:
            if let problem = tokenProblem(r) { return .plain("\(answered) with an unusable refresh_token (\(problem))") }
            rotated = r
        default: return .plain("\(answered) with a refresh_token that is not a string")
        }
        let failed = { (why: String) in TokenAnswer.failed("\(answered) \(why)", rotated: rotated) }
        let token: String
        switch object["access_token"] {
        case nil, .null?: return failed("without an access_token")
        case .string(let t)?:
            if let problem = tokenProblem(t) { return failed("with an unusable access_token (\(problem))") }
            token = t
        default: return failed("with an access_token that is not a string")
        }
        switch object["token_type"] {
        case nil, .null?: break  // required by section 5.1, but its absence leaves nothing in doubt
        case .string(let type)? where type.lowercased() == "bearer": break
        case .string(let type)?:
            return failed("with token_type \(printable(type, limit: 40)); lockwiped uses only Bearer tokens (RFC 6750)")
        default: return failed("with a token_type that is not a string")
        }
        var expiresIn: Int?
        var seconds: Double?
        switch object["expires_in"] {
        case nil, .null?: break
        case .number(let n)?: seconds = n
        case .string(let s)?:  // some servers send the number as a string
            guard let n = Double(s.trimmingCharacters(in: .whitespaces)) else {
                return failed("with an expires_in that is not a number")
            }
            seconds = n
        default: return failed("with an expires_in that is not a number")
        }
        if let seconds {
            guard seconds.isFinite, seconds == seconds.rounded() else {
                return failed("with an expires_in that is not a whole number of seconds")
            }
            guard seconds >= 1, seconds <= Double(maxExpiresIn) else {
                let shown = abs(seconds) < 1e15 ? String(Int64(seconds)) : "out of range"
                return failed("with expires_in \(shown) (must be 1 to \(maxExpiresIn) seconds)")
            }
            expiresIn = Int(seconds)
        }
        return .granted(OAuthGrant(accessToken: token, expiresIn: expiresIn, refreshToken: rotated))
    }

    /// Why `token` cannot be sent (in a header or a form), or nil.
    public static func tokenProblem(_ token: String) -> String? {
        if token.isEmpty { return "empty" }
        if token.utf8.count > maxTokenBytes { return "longer than \(maxTokenBytes) bytes" }
        if !token.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) { return "not visible ASCII" }
        return nil
    }

    /// The message of an `invalid_grant`, for `last_error` and the journal.
    public static func invalidGrantMessage(user: String, description: String?) -> String {
        "the token endpoint refused the refresh token (invalid_grant"
            + (description.map { ": \($0)" } ?? "")
            + "); re-enrol with: lockwipectl credentials --user \(user) --refresh-token-file PATH"
    }

    // MARK: The cache

    /// When an access token granted at `issued` (monotonic nanoseconds) stops being used:
    /// `maxEarlyRefresh` seconds, or a quarter of its lifetime if that is less, before it
    /// runs out.
    public static func useUntil(issued: Int64, expiresIn: Int?) -> Int64 {
        let lifetime = Double(expiresIn ?? defaultLifetime)
        let early = min(maxEarlyRefresh, lifetime / 4)
        return issued + Int64((lifetime - early) * 1e9)
    }

    /// A cached access token may be sent at `now` when it came from the refresh token
    /// stored now (not one replaced since) and its time is not up.
    public static func isUsable(cachedFrom: String, useUntil: Int64, storedRefreshToken: String?, now: Int64) -> Bool {
        cachedFrom == storedRefreshToken && now < useUntil
    }

    // MARK: Helpers

    private static func describeNonJSON(contentType: String?, body: Data) -> String {
        let type = contentType.map { printable($0, limit: 60) } ?? "no content type"
        if body.isEmpty { return "an empty body (\(type))" }
        let head = String(decoding: body.prefix(64), as: UTF8.self).lowercased()
        if head.contains("<html") || head.contains("<!doctype") { return "an HTML page (\(type))" }
        return "a body that is not JSON (\(type))"
    }

    /// `text` cut to `limit` characters with anything but visible ASCII replaced: server
    /// text goes into logs and `last_error`.
    static func printable(_ text: String, limit: Int) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.prefix(limit).map { $0.value >= 0x20 && $0.value < 0x7F ? $0 : "?" }))
    }
}
