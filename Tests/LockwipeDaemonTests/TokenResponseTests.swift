import Foundation
import LockwipeCore
import Testing

@testable import LockwipeCheckIn
@testable import LockwipeDaemon

/// The pure OAuth parts: the refresh request (RFC 6749 sections 2.3.1, 6), what a token
/// endpoint's answer means (5.1, 5.2), and how long an access token is used.
@Suite struct TokenResponseTests {
    func answer(_ status: Int, _ body: String?, _ type: String? = "application/json") -> TokenAnswer {
        TokenResponse.classify(status: status, contentType: type, body: body.map { Data($0.utf8) })
    }

    @Test func grantsAreParsedWithTheirLifetimeAndRotation() {
        let table: [(String, OAuthGrant)] = [
            (#"{"access_token":"a1","token_type":"Bearer","expires_in":2}"#, OAuthGrant(accessToken: "a1", expiresIn: 2, refreshToken: nil)),
            (#"{"access_token":"a1","token_type":"bearer","expires_in":"3600","refresh_token":"r2"}"#, OAuthGrant(accessToken: "a1", expiresIn: 3600, refreshToken: "r2")),
            (#"{"access_token":"a1"}"#, OAuthGrant(accessToken: "a1", expiresIn: nil, refreshToken: nil)),
            (#"{"access_token":"a1","expires_in":null,"refresh_token":null,"scope":"x y"}"#, OAuthGrant(accessToken: "a1", expiresIn: nil, refreshToken: nil)),
            (#"{"access_token":"a1","expires_in":31536000}"#, OAuthGrant(accessToken: "a1", expiresIn: 31_536_000, refreshToken: nil)),
        ]
        for (body, grant) in table {
            #expect(answer(200, body) == .granted(grant), "\(body)")
        }
    }

    @Test func badAnswersAreFailuresNamingWhatWasWrong() {
        let table: [(Int, String?, String?, String)] = [
            (200, "<html><body>Sign in</body></html>", "text/html", "an HTML page"),
            (200, "garbage", "application/json", "not JSON"),
            (200, "", "application/json", "an empty body"),
            (200, "[1,2]", "application/json", "not a JSON object"),
            (200, nil, "application/json", "larger than 65536 bytes"),
            (200, #"{"token_type":"Bearer","expires_in":60}"#, "application/json", "without an access_token"),
            (200, #"{"access_token":""}"#, "application/json", "unusable access_token (empty)"),
            (200, #"{"access_token":"a b"}"#, "application/json", "unusable access_token (not visible ASCII)"),
            (200, #"{"access_token":42}"#, "application/json", "access_token that is not a string"),
            (200, #"{"access_token":"a","token_type":"mac"}"#, "application/json", "token_type mac"),
            (200, #"{"access_token":"a","expires_in":-5}"#, "application/json", "expires_in -5 (must be 1 to 31536000 seconds)"),
            (200, #"{"access_token":"a","expires_in":0}"#, "application/json", "expires_in 0"),
            (200, #"{"access_token":"a","expires_in":99999999999}"#, "application/json", "expires_in 99999999999"),
            (200, #"{"access_token":"a","expires_in":1e300}"#, "application/json", "expires_in out of range"),
            (200, #"{"access_token":"a","expires_in":1.5}"#, "application/json", "not a whole number"),
            (200, #"{"access_token":"a","expires_in":"soon"}"#, "application/json", "not a number"),
            (200, #"{"access_token":"a","expires_in":true}"#, "application/json", "not a number"),
            (200, #"{"access_token":"a","refresh_token":""}"#, "application/json", "unusable refresh_token (empty)"),
            (400, #"{"error":"invalid_client","error_description":"bad secret"}"#, "application/json", "HTTP 400 invalid_client: bad secret"),
            (500, "<!DOCTYPE html><p>oops", "text/html", "HTTP 500 with an HTML page"),
            (400, #"{"message":"no"}"#, "application/json", "HTTP 400 without an OAuth error code"),
        ]
        for (status, body, type, phrase) in table {
            guard case .failed(let why, _) = answer(status, body, type) else {
                Issue.record("\(status) \(body ?? "nil") was not a failure")
                continue
            }
            #expect(why.contains(phrase), "\(why)")
            #expect(why.hasPrefix("the token endpoint answered HTTP \(status)"), "\(why)")
        }
    }

    @Test func aRotatedRefreshTokenInAnOtherwiseBadAnswerIsKept() {
        #expect(
            answer(200, #"{"access_token":"a","expires_in":-1,"refresh_token":"r2"}"#)
                == .failed(
                    "the token endpoint answered HTTP 200 with expires_in -1 (must be 1 to 31536000 seconds)", rotated: "r2"))
        #expect(answer(200, #"{"refresh_token":"r2"}"#) == .failed("the token endpoint answered HTTP 200 without an access_token", rotated: "r2"))
        #expect(
            answer(200, #"{"access_token":"a","refresh_token":" "}"#)
                == .failed(
                    "the token endpoint answered HTTP 200 with an unusable refresh_token (not visible ASCII)", rotated: nil))
    }

    @Test func invalidGrantIsItsOwnAnswerWithAReEnrolHint() {
        #expect(answer(400, #"{"error":"invalid_grant","error_description":"used\ntwice"}"#) == .invalidGrant(description: "used?twice"))
        #expect(answer(401, #"{"error":"invalid_grant"}"#) == .invalidGrant(description: nil))
        let message = TokenResponse.invalidGrantMessage(user: "alice", description: "revoked")
        #expect(message == "the token endpoint refused the refresh token (invalid_grant: revoked); re-enrol with: lockwipectl credentials --user alice --refresh-token-file PATH")
    }

    @Test func theRequestIsAFormWithBasicAuthOrAClientIDField() {
        let confidential = TokenResponse.refreshRequest(refreshToken: "r/1+x", clientID: "my app", clientSecret: "s:é")
        #expect(confidential.body == "grant_type=refresh_token&refresh_token=r%2F1%2Bx")
        let headers = Dictionary(uniqueKeysWithValues: confidential.headers)
        #expect(headers["Content-Type"] == "application/x-www-form-urlencoded")
        #expect(headers["Accept"] == "application/json")
        // Section 2.3.1: id and secret form-encoded, then "id:secret" in Basic.
        #expect(headers["Authorization"] == "Basic " + Data("my+app:s%3A%C3%A9".utf8).base64EncodedString())

        let publicClient = TokenResponse.refreshRequest(refreshToken: "r1", clientID: "app", clientSecret: nil)
        #expect(publicClient.body == "grant_type=refresh_token&refresh_token=r1&client_id=app")
        #expect(!publicClient.headers.contains { $0.0 == "Authorization" })
    }

    @Test func aCachedTokenIsUsedUntilShortlyBeforeItExpires() {
        let s: Int64 = 1_000_000_000
        // (expires_in, age in seconds, usable)
        let table: [(Int?, Double, Bool)] = [
            (2, 0, true), (2, 1.4, true), (2, 1.5, false), (2, 3, false),
            (3600, 3569, true), (3600, 3570, false),  // 30 s early at most
            (nil, 44, true), (nil, 45, false),  // 60 s without expires_in, a quarter early
            (1, 0.74, true), (1, 0.75, false),
        ]
        for (expiresIn, age, usable) in table {
            let until = TokenResponse.useUntil(issued: 5 * s, expiresIn: expiresIn)
            let now = 5 * s + Int64(age * 1e9)
            #expect(TokenResponse.isUsable(cachedFrom: "r", useUntil: until, storedRefreshToken: "r", now: now) == usable, "\(String(describing: expiresIn)) \(age)")
        }
        let until = TokenResponse.useUntil(issued: 0, expiresIn: 3600)
        #expect(!TokenResponse.isUsable(cachedFrom: "r1", useUntil: until, storedRefreshToken: "r2", now: 0), "credentials replaced")
        #expect(!TokenResponse.isUsable(cachedFrom: "r1", useUntil: until, storedRefreshToken: nil, now: 0), "credentials removed")
    }

    @Test func formEncodingFollowsAppendixB() {
        #expect(TokenResponse.formEncoded("a Z-._~*") == "a+Z-._~*")
        #expect(TokenResponse.formEncoded("&=+/%\n") == "%26%3D%2B%2F%25%0A")
        #expect(TokenResponse.formEncoded("ü") == "%C3%BC")
    }
}
