import Foundation
import LockwipeCore
import Testing

@testable import LockwipeDaemon

/// `[server.oauth]`: every problem names the file, the line and the key.
@Suite struct ConfigurationOAuthTests {
    func withFiles(_ files: [String: String], secret: (String, Int)? = nil, _ body: (String, String) throws -> Void) throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lwoauth-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir + "/lockwiped.toml.d", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        if let secret {
            try secret.0.write(toFile: dir + "/secret", atomically: false, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: secret.1], ofItemAtPath: dir + "/secret")
        }
        for (name, text) in files {
            try text.replacingOccurrences(of: "DIR", with: dir).write(toFile: dir + "/" + name, atomically: true, encoding: .utf8)
        }
        try body(dir + "/lockwiped.toml", dir)
    }

    @Test func aCompleteTableIsLoadedWithItsSecret() throws {
        let text = """
            [server]
            url = "https://mdm.example.com"

            [server.oauth]
            token_url = "https://idp.example.com/oauth/token"
            client_id = "field app"
            client_secret_file = "DIR/secret"
            """
        try withFiles(["lockwiped.toml": text], secret: ("  s3cret\n", 0o600)) { path, dir in
            let oauth = try #require(try ConfigurationLoader.load(path: path).configuration.server.oauth)
            #expect(
                oauth == OAuthConfiguration(tokenURL: "https://idp.example.com/oauth/token", clientID: "field app", clientSecretFile: dir + "/secret", clientSecret: "s3cret"))
            #expect(!"\(oauth)".contains("s3cret") && !String(reflecting: oauth).contains("s3cret"))
        }
        try withFiles(["lockwiped.toml": "[server]\nurl = \"https://mdm.example.com\"\n"]) { path, _ in
            let loaded = try ConfigurationLoader.load(path: path)
            #expect(loaded.configuration.server.oauth == nil)
        }
    }

    /// SAP Mobile Services: `[server] application_version` goes to the token endpoint too
    /// (from a drop-in as well); with the lockwipe protocol it is not sent anywhere.
    @Test func theApplicationVersionGoesToTheTokenEndpointWithSAP() throws {
        let base = """
            [server]
            url = "https://tenant.example.com"
            device_id = "dev"
            application_id = "app"
            application_version = "2.1.0"

            [server.oauth]
            token_url = "https://tenant.example.com/oauth2/api/v1/token"
            client_id = "c"

            """
        try withFiles(["lockwiped.toml": base, "lockwiped.toml.d/50-sap.toml": "[server]\nprotocol = \"sap-mobile-services\"\n"]) { path, _ in
            let oauth = try #require(try ConfigurationLoader.load(path: path).configuration.server.oauth)
            #expect(oauth.applicationVersion == "2.1.0")
            #expect(oauth.extraHeaders.map { "\($0.0): \($0.1)" } == ["X-APP-VERSION: 2.1.0"])
        }
        try withFiles(["lockwiped.toml": base]) { path, _ in
            let oauth = try #require(try ConfigurationLoader.load(path: path).configuration.server.oauth)
            #expect(oauth.applicationVersion == nil && oauth.extraHeaders.isEmpty)
        }
    }

    @Test func dropInsMaySetTheKeysApart() throws {
        try withFiles([
            "lockwiped.toml": "[server.oauth]\ntoken_url = \"https://idp.example.com/t\"\n",
            "lockwiped.toml.d/50-client.toml": "[server.oauth]\nclient_id = \"app\"\n",
        ]) { path, _ in
            let oauth = try ConfigurationLoader.load(path: path).configuration.server.oauth
            #expect(oauth == OAuthConfiguration(tokenURL: "https://idp.example.com/t", clientID: "app"))
        }
    }

    @Test func missingKeysAreNamedAtTheTableLine() throws {
        try withFiles(["lockwiped.toml": "# site\n[server]\nurl = \"https://a.example\"\n\n[server.oauth]\nclient_secret_file = \"DIR/secret\"\n"], secret: ("x", 0o600)) {
            path, _ in
            let found = problems(path)
            #expect(found.map(\.key) == ["server.oauth.token_url", "server.oauth.client_id"], "\(found)")
            #expect(found.allSatisfy { $0.line == 5 && $0.file == path && $0.message.hasPrefix("missing") }, "\(found)")
        }
    }

    @Test func badValuesAreNamedWithFileLineAndKey() throws {
        let cases: [(String, (String, Int)?, String, String)] = [
            ("token_url = \"ftp://idp.example.com/t\"\nclient_id = \"a\"", nil, "server.oauth.token_url", "must start with https://"),
            ("token_url = \"http://idp.example.com/t\"\nclient_id = \"a\"", nil, "server.oauth.token_url", "loopback"),
            ("token_url = \"http://127.0.0.1:8080/t\"\nclient_id = \"a\"", nil, "server.oauth.token_url", "allow_insecure_http"),
            ("token_url = 3\nclient_id = \"a\"", nil, "server.oauth.token_url", "must be a string"),
            ("client_id = \"\"\ntoken_url = \"https://i.example/t\"", nil, "server.oauth.client_id", "must not be empty"),
            ("client_secret_file = \"DIR/nope\"\ntoken_url = \"https://i.example/t\"\nclient_id = \"a\"", nil, "server.oauth.client_secret_file", "cannot be read"),
            ("client_secret_file = \"secret\"\ntoken_url = \"https://i.example/t\"\nclient_id = \"a\"", nil, "server.oauth.client_secret_file", "absolute path"),
            (
                "client_secret_file = \"DIR/secret\"\ntoken_url = \"https://i.example/t\"\nclient_id = \"a\"", ("x", 0o644), "server.oauth.client_secret_file",
                "readable or writable by every user"
            ),
            ("client_secret_file = \"DIR/secret\"\ntoken_url = \"https://i.example/t\"\nclient_id = \"a\"", ("\n \n", 0o600), "server.oauth.client_secret_file", "empty"),
            ("client_secret_file = \"DIR\"\ntoken_url = \"https://i.example/t\"\nclient_id = \"a\"", nil, "server.oauth.client_secret_file", "not a regular file"),
            ("scope = \"x\"\ntoken_url = \"https://i.example/t\"\nclient_id = \"a\"", nil, "server.oauth.scope", "unknown key"),
        ]
        for (body, secret, key, phrase) in cases {
            try withFiles(["lockwiped.toml": "[server]\nurl = \"https://a.example\"\n[server.oauth]\n" + body + "\n"], secret: secret) { path, _ in
                let found = problems(path)
                #expect(found.count == 1, "\(body): \(found)")
                #expect(found.first?.key == key && found.first?.line == 4 && found.first?.file == path, "\(body): \(found)")
                #expect(found.first?.message.contains(phrase) == true, "\(body): \(found)")
            }
        }
    }

    @Test(.enabled(if: geteuid() == 0, "chown needs root")) func aSecretFileOwnedByAnotherUserIsRefused() throws {
        let text = "[server]\nurl = \"https://a.example\"\n[server.oauth]\nclient_secret_file = \"DIR/secret\"\ntoken_url = \"https://i.example/t\"\nclient_id = \"a\"\n"
        try withFiles(["lockwiped.toml": text], secret: ("s3cret", 0o600)) { path, dir in
            #expect(problems(path).isEmpty, "a root-owned 0600 secret was refused: \(problems(path))")
            #expect(chown(dir + "/secret", 65534, 65534) == 0)
            let found = problems(path)
            #expect(found.map(\.key) == ["server.oauth.client_secret_file"] && found.first?.line == 4, "\(found)")
            #expect(found.first?.message.contains("owned by uid 65534") == true, "\(found)")
        }
    }

    @Test func plainHTTPToLoopbackNeedsAllowInsecureHTTP() throws {
        let text = "[server]\nurl = \"http://127.0.0.1:1\"\nallow_insecure_http = true\n[server.oauth]\ntoken_url = \"http://127.0.0.1:1/oauth/token\"\nclient_id = \"a\"\n"
        try withFiles(["lockwiped.toml": text]) { path, _ in
            let loaded = try ConfigurationLoader.load(path: path)
            #expect(loaded.configuration.server.oauth?.tokenURL == "http://127.0.0.1:1/oauth/token")
        }
    }
}
