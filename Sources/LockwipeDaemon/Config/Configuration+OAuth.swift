import Foundation
import LockwipeCore
import TOMLKit

extension ConfigurationLoader {
    /// A client secret larger than this is not a secret file but a mistake.
    static let maxClientSecretBytes = 4096

    /// The keys of `[server.oauth]`, as read from one file; the table is checked as a whole
    /// once every file is read (`oauthProblems`), since drop-ins may set its keys apart.
    struct OAuthDraft: Sendable, Equatable {
        var tokenURL: String?
        var clientID: String?
        var clientSecretFile: String?
        var clientSecret: String?
        /// Keys given, valid or not (a bad one is reported as bad, not as missing).
        var present: Set<String> = []
    }

    /// Reads the `oauth` value of a `[server]` table in `file` (the `[server.oauth]`
    /// table) into `draft`; each bad key is a problem with its line.
    static func applyOAuth(
        _ value: TOMLValue, file: String, text: String, to draft: inout OAuthDraft?,
        lastSetIn: inout [String: (file: String, line: Int?)]
    ) -> [ConfigurationProblem] {
        let tableLine = lineOf(table: "server.oauth", key: nil, in: text) ?? lineOf(table: "server", key: "oauth", in: text)
        guard let table = value.table else {
            return [
                ConfigurationProblem(
                    file: file, line: tableLine, key: "server.oauth", message: "must be a table ([server.oauth]), not \(value.type.withArticle)")
            ]
        }
        var problems: [ConfigurationProblem] = []
        var d = draft ?? OAuthDraft()
        lastSetIn["server.oauth"] = (file, tableLine)
        for (name, entry) in table {
            let key = "server.oauth." + name
            let line = lineOf(table: "server.oauth", key: name, in: text) ?? tableLine
            let v = entry.tomlValue
            d.present.insert(name)
            func problem(_ message: String) { problems.append(ConfigurationProblem(file: file, line: line, key: key, message: message)) }
            switch name {
            case "token_url":
                guard v.type == .string, let s = v.string else {
                    problem("must be a string (the token endpoint's URL), not \(v.type.withArticle)")
                    continue
                }
                if let why = ServerURL.problem(s) { problem(why) } else { d.tokenURL = s }
            case "client_id":
                guard v.type == .string, let s = v.string else {
                    problem("must be a string, not \(v.type.withArticle)")
                    continue
                }
                if let why = oauthClientIDProblem(s) { problem(why) } else { d.clientID = s }
            case "client_secret_file":
                guard v.type == .string, let s = v.string else {
                    problem("must be a string (a path), not \(v.type.withArticle)")
                    continue
                }
                switch readClientSecret(s) {
                case .success(let secret):
                    d.clientSecretFile = s
                    d.clientSecret = secret
                case .failure(let why): problem(why.message)
                }
            default:
                problem("unknown key; [server.oauth] knows token_url, client_id, client_secret_file")
                continue
            }
            lastSetIn[key] = (file, line)
        }
        draft = d
        return problems
    }

    /// Once every file is read: a `[server.oauth]` table needs `token_url` and `client_id`,
    /// and a plain http:// token endpoint needs `[server] allow_insecure_http = true`.
    static func oauthProblems(
        _ draft: OAuthDraft?, server: ServerConfiguration, lastSetIn: [String: (file: String, line: Int?)], fallbackFile: String
    ) -> (OAuthConfiguration?, [ConfigurationProblem]) {
        guard let draft else { return (nil, []) }
        let table = lastSetIn["server.oauth"] ?? (fallbackFile, nil)
        var problems: [ConfigurationProblem] = []
        if !draft.present.contains("token_url") {
            problems.append(
                ConfigurationProblem(
                    file: table.file, line: table.line, key: "server.oauth.token_url",
                    message: "missing: [server.oauth] needs the token endpoint's URL (token_url = \"https://...\")"))
        }
        if !draft.present.contains("client_id") {
            problems.append(
                ConfigurationProblem(
                    file: table.file, line: table.line, key: "server.oauth.client_id",
                    message: "missing: [server.oauth] needs the OAuth client's id (client_id = \"...\")"))
        }
        if let url = draft.tokenURL, ServerURL.isPlainHTTP(url), !server.allowInsecureHTTP {
            let place = lastSetIn["server.oauth.token_url"] ?? table
            problems.append(
                ConfigurationProblem(
                    file: place.file, line: place.line, key: "server.oauth.token_url",
                    message: "plain http:// needs allow_insecure_http = true in [server]: any local user who binds that port "
                        + "first receives every registration's refresh token; use https:// (with [server] ca_file for a private CA)"))
        }
        guard problems.isEmpty, let url = draft.tokenURL, let id = draft.clientID else { return (nil, problems) }
        return (OAuthConfiguration(tokenURL: url, clientID: id, clientSecretFile: draft.clientSecretFile, clientSecret: draft.clientSecret), [])
    }

    /// RFC 6749 appendix A.1: `client-id = *VSCHAR` (visible ASCII and space).
    static func oauthClientIDProblem(_ s: String) -> String? {
        if s.isEmpty { return "must not be empty" }
        if s.utf8.count > 1024 { return "is longer than 1024 bytes" }
        guard s.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value < 0x7F }) else {
            return "may only contain visible ASCII characters and spaces (RFC 6749 appendix A.1)"
        }
        return nil
    }

    struct SecretFileProblem: Error { var message: String }

    /// The client secret in `path`: an absolute path to a regular file that other users
    /// can neither read nor write, at most `maxClientSecretBytes`, not empty once trimmed.
    static func readClientSecret(_ path: String) -> Result<String, SecretFileProblem> {
        guard path.hasPrefix("/") else { return .failure(SecretFileProblem(message: "must be an absolute path, not \"\(path)\"")) }
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        guard fd >= 0 else {
            return .failure(SecretFileProblem(message: "\(path): cannot be read: \(String(cString: strerror(errno)))"))
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            return .failure(SecretFileProblem(message: "\(path): cannot be read: \(String(cString: strerror(errno)))"))
        }
        guard st.st_mode & S_IFMT == S_IFREG else { return .failure(SecretFileProblem(message: "\(path): not a regular file")) }
        // Whoever owns the file can read it and put another secret in it whatever its mode.
        guard st.st_uid == 0 || st.st_uid == geteuid() else {
            return .failure(
                SecretFileProblem(
                    message: "\(path): owned by uid \(st.st_uid), who can read and replace the client secret; "
                        + "it must belong to root (chown root: \(path))"))
        }
        if st.st_mode & (S_IROTH | S_IWOTH) != 0 {
            return .failure(
                SecretFileProblem(
                    message: "\(path): readable or writable by every user (mode \(String(st.st_mode & 0o7777, radix: 8))); "
                        + "make it chmod 0600 (or 0640 to a group that may see it)"))
        }
        guard st.st_size <= maxClientSecretBytes else {
            return .failure(SecretFileProblem(message: "\(path): larger than \(maxClientSecretBytes) bytes; it must hold only the client secret"))
        }
        var bytes = [UInt8](repeating: 0, count: maxClientSecretBytes + 1)
        var count = 0
        while count < bytes.count {
            let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + count, $0.count - count) }
            if n < 0 {
                if errno == EINTR { continue }
                return .failure(SecretFileProblem(message: "\(path): cannot be read: \(String(cString: strerror(errno)))"))
            }
            if n == 0 { break }
            count += n
        }
        guard count <= maxClientSecretBytes else {
            return .failure(SecretFileProblem(message: "\(path): larger than \(maxClientSecretBytes) bytes; it must hold only the client secret"))
        }
        guard let text = String(validating: bytes[..<count], as: UTF8.self) else {
            return .failure(SecretFileProblem(message: "\(path): not UTF-8 text"))
        }
        let secret = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if secret.isEmpty { return .failure(SecretFileProblem(message: "\(path): empty; it must hold the OAuth client secret")) }
        guard secret.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value < 0x7F }) else {
            return .failure(SecretFileProblem(message: "\(path): the client secret may only contain visible ASCII characters and spaces"))
        }
        return .success(secret)
    }
}
