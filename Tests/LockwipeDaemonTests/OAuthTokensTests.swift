import Foundation
import LockwipeCore
import Logging
import NIOCore
import Synchronization
import Testing

@testable import LockwipeCheckIn
@testable import LockwipeDaemon

/// The token cache and refresh logic with an injected clock. The token endpoint here is a
/// closure (the HTTP side is covered by IntegrationTests/system/test_oauth.py against the stand-in
/// server); the store is an in-memory dictionary with the same compare-and-swap.
@Suite struct OAuthTokensTests {
    final class Fake: Sendable {
        /// user -> refresh token (the "database").
        let stored = Mutex<[String: String]>([:])
        /// What happened, in order: "post r1", "rotate r1->r2", "answer".
        let log = Mutex<[String]>([])
        let clock = Mutex<Int64>(0)
        /// The next answers of the endpoint, in order.
        let answers = Mutex<[OAuthTokens.Reply]>([])
        let gate = Mutex<CheckedContinuation<Void, Never>?>(nil)
        let holdPosts = Mutex(false)

        func tokens() -> OAuthTokens {
            OAuthTokens(
                storage: .init(
                    load: { user in self.stored.withLock { $0[user] } },
                    rotate: { user, old, new in
                        self.stored.withLock { s in
                            guard s[user] == old else { return false }
                            s[user] = new
                            self.log.withLock { $0.append("rotate \(old)->\(new)") }
                            return true
                        }
                    }),
                transport: { _, _, body, _ in
                    let token = body.split(separator: "&").first { $0.hasPrefix("refresh_token=") }.map { String($0.dropFirst(14)) } ?? "?"
                    self.log.withLock { $0.append("post \(token)") }
                    if self.holdPosts.withLock({ $0 }) { await withCheckedContinuation { c in self.gate.withLock { $0 = c } } }
                    return self.answers.withLock { $0.isEmpty ? .failure("no answer scripted") : $0.removeFirst() }
                },
                logger: Logger(label: "test"), now: { self.clock.withLock { $0 } })
        }

        func grant(_ access: String, expiresIn: Int, rotate: String? = nil) -> OAuthTokens.Reply {
            let r = rotate.map { #","refresh_token":"\#($0)""# } ?? ""
            return .answer(status: 200, contentType: "application/json", body: Data(#"{"access_token":"\#(access)","expires_in":\#(expiresIn)\#(r)}"#.utf8))
        }
    }

    let oauth = OAuthConfiguration(tokenURL: "https://idp.example/token", clientID: "app")
    let deadline = NIODeadline.now() + .seconds(60)

    @Test func aTokenIsCachedUntilShortlyBeforeItExpiresThenRefreshed() async throws {
        let f = Fake()
        f.stored.withLock { $0["alice"] = "r1" }
        f.answers.withLock { $0 = [f.grant("a1", expiresIn: 2), f.grant("a2", expiresIn: 2)] }
        let t = f.tokens()
        #expect(try await t.accessToken(user: "alice", oauth: oauth, deadline: deadline).get() == "a1")
        f.clock.withLock { $0 = 1_400_000_000 }
        #expect(try await t.accessToken(user: "alice", oauth: oauth, deadline: deadline).get() == "a1")
        f.clock.withLock { $0 = 1_500_000_000 }
        #expect(try await t.accessToken(user: "alice", oauth: oauth, deadline: deadline).get() == "a2")
        #expect(f.log.withLock { $0 } == ["post r1", "post r1"])
    }

    /// Unregister deletes the SAP connection after the credentials are gone: the cached
    /// access token while its time is not up, else one refresh with the token it had, and
    /// nothing is stored (there is no registration to store it for).
    @Test func aRemovedRegistrationUsesItsCachedTokenOrOneRefreshAndStoresNothing() async throws {
        let f = Fake()
        f.stored.withLock { $0["alice"] = "r1" }
        f.answers.withLock { $0 = [f.grant("a1", expiresIn: 100), f.grant("a2", expiresIn: 100, rotate: "r9")] }
        let t = f.tokens()
        #expect(try await t.accessToken(user: "alice", oauth: oauth, deadline: deadline).get() == "a1")
        f.stored.withLock { $0["alice"] = nil }  // unregistered
        #expect(try await t.accessToken(removing: "alice", refreshToken: "r1", oauth: oauth, deadline: deadline).get() == "a1")
        // The cache entry went with it: the next one refreshes, and the rotation is not stored.
        #expect(try await t.accessToken(removing: "alice", refreshToken: "r1", oauth: oauth, deadline: deadline).get() == "a2")
        #expect(f.log.withLock { $0 } == ["post r1", "post r1"])
        #expect(f.stored.withLock { $0["alice"] } == nil)
    }

    @Test func aRotatedRefreshTokenIsStoredBeforeItsAccessTokenIsHandedOut() async throws {
        let f = Fake()
        f.stored.withLock { $0["alice"] = "r1" }
        f.answers.withLock { $0 = [f.grant("a1", expiresIn: 2, rotate: "r2"), f.grant("a2", expiresIn: 2, rotate: "r3")] }
        let t = f.tokens()
        let a1 = try await t.accessToken(user: "alice", oauth: oauth, deadline: deadline).get()
        f.log.withLock { $0.append("answer \(a1)") }
        #expect(f.stored.withLock { $0["alice"] } == "r2")
        f.clock.withLock { $0 = 10_000_000_000 }
        #expect(try await t.accessToken(user: "alice", oauth: oauth, deadline: deadline).get() == "a2")
        #expect(f.log.withLock { $0 } == ["post r1", "rotate r1->r2", "answer a1", "post r2", "rotate r2->r3"])
    }

    @Test func concurrentCallersShareOneRefresh() async throws {
        let f = Fake()
        f.stored.withLock { $0["alice"] = "r1" }
        f.holdPosts.withLock { $0 = true }
        f.answers.withLock { $0 = [f.grant("a1", expiresIn: 60, rotate: "r2")] }
        let t = f.tokens()
        let oauth = self.oauth
        let deadline = self.deadline
        async let one = t.accessToken(user: "alice", oauth: oauth, deadline: deadline)
        async let two = t.accessToken(user: "alice", oauth: oauth, deadline: deadline)
        async let three = t.accessToken(user: "alice", oauth: oauth, deadline: deadline)
        // Let all three arrive while the one POST is held.
        while f.gate.withLock({ $0 == nil }) { await Task.yield() }
        try await Task.sleep(for: .milliseconds(100))
        f.gate.withLock { $0!.resume() }
        let results = try await [one.get(), two.get(), three.get()]
        #expect(results == ["a1", "a1", "a1"])
        #expect(f.log.withLock { $0 } == ["post r1", "rotate r1->r2"])
        #expect(await t.refreshes == 1)
    }

    @Test func invalidGrantFailsWithTheReEnrolHintAndIsNotSentAgainUntilReplaced() async throws {
        let f = Fake()
        f.stored.withLock { $0["bob"] = "old" }
        f.answers.withLock {
            $0 = [.answer(status: 400, contentType: "application/json", body: Data(#"{"error":"invalid_grant"}"#.utf8)), f.grant("a9", expiresIn: 60)]
        }
        let t = f.tokens()
        let expected = OAuthTokens.Failure.invalidGrant(TokenResponse.invalidGrantMessage(user: "bob", description: nil))
        #expect(await t.accessToken(user: "bob", oauth: oauth, deadline: deadline) == .failure(expected))
        #expect(await t.accessToken(user: "bob", oauth: oauth, deadline: deadline) == .failure(expected))
        #expect(f.log.withLock { $0 } == ["post old"])
        f.stored.withLock { $0["bob"] = "new" }  // lockwipectl credentials --refresh-token-file
        #expect(try await t.accessToken(user: "bob", oauth: oauth, deadline: deadline).get() == "a9")
        #expect(f.log.withLock { $0 } == ["post old", "post new"])
    }

    @Test func badAnswersAndTimeoutsFailAndLoseNoRefreshToken() async throws {
        let f = Fake()
        f.stored.withLock { $0["carol"] = "r1" }
        f.answers.withLock {
            $0 = [
                .answer(status: 200, contentType: "text/html", body: Data("<html>login</html>".utf8)),
                .answer(status: 200, contentType: "application/json", body: Data(#"{"access_token":"x","expires_in":-1,"refresh_token":"r2"}"#.utf8)),
                .failure("timed out after 10 s"),
                f.grant("ok", expiresIn: 60),
            ]
        }
        let t = f.tokens()
        for _ in 0..<3 {
            guard case .failure(.failed) = await t.accessToken(user: "carol", oauth: oauth, deadline: deadline) else {
                Issue.record("not a failure")
                continue
            }
        }
        // The answer with the bad expires_in still rotated the refresh token: kept.
        #expect(f.stored.withLock { $0["carol"] } == "r2")
        #expect(try await t.accessToken(user: "carol", oauth: oauth, deadline: deadline).get() == "ok")
        #expect(f.log.withLock { $0 } == ["post r1", "post r1", "rotate r1->r2", "post r2", "post r2"])
    }

    @Test func replacedCredentialsDropTheCachedTokenAndA401InvalidatesIt() async throws {
        let f = Fake()
        f.stored.withLock { $0["dave"] = "r1" }
        f.answers.withLock { $0 = [f.grant("a1", expiresIn: 3600), f.grant("b1", expiresIn: 3600), f.grant("b2", expiresIn: 3600)] }
        let t = f.tokens()
        #expect(try await t.accessToken(user: "dave", oauth: oauth, deadline: deadline).get() == "a1")
        f.stored.withLock { $0["dave"] = "s1" }
        #expect(try await t.accessToken(user: "dave", oauth: oauth, deadline: deadline).get() == "b1")
        await t.invalidate(user: "dave", accessToken: "stale")  // another caller's old token: no effect
        #expect(try await t.accessToken(user: "dave", oauth: oauth, deadline: deadline).get() == "b1")
        await t.invalidate(user: "dave", accessToken: "b1")
        #expect(try await t.accessToken(user: "dave", oauth: oauth, deadline: deadline).get() == "b2")
        #expect(f.log.withLock { $0 } == ["post r1", "post s1", "post s1"])
    }

    @Test func aRotationThatCannotBeStoredIsNotUsed() async throws {
        let f = Fake()
        f.stored.withLock { $0["erin"] = "r1" }
        f.holdPosts.withLock { $0 = true }
        f.answers.withLock { $0 = [f.grant("a1", expiresIn: 60, rotate: "r2")] }
        let t = f.tokens()
        let oauth = self.oauth
        let deadline = self.deadline
        async let result = t.accessToken(user: "erin", oauth: oauth, deadline: deadline)
        while f.gate.withLock({ $0 == nil }) { await Task.yield() }
        f.stored.withLock { $0["erin"] = "replaced" }  // credentials replaced during the refresh
        f.gate.withLock { $0!.resume() }
        guard case .failure(.failed(let why)) = await result else {
            Issue.record("the access token of replaced credentials was used")
            return
        }
        #expect(why.contains("were replaced"))
        #expect(f.stored.withLock { $0["erin"] } == "replaced")
    }
}
