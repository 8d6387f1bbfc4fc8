#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The rule for `[server] url`: HTTPS anywhere, plain HTTP only to this machine (a demo or
/// a local proxy) and only when the operator says so (`allow_insecure_http`, checked by the
/// configuration loader), and nothing that would put a secret where it gets logged or shown.
public enum ServerURL {
    /// Why `text` cannot be the policy server's URL, or nil when it can.
    public static func problem(_ text: String) -> String? {
        guard let c = URLComponents(string: text), let scheme = c.scheme?.lowercased() else {
            return "must be an absolute URL such as https://mdm.example.com, not \"\(text)\""
        }
        guard let host = c.host, !host.isEmpty else { return "must name a host (https://HOST[:PORT][/PATH]), not \"\(text)\"" }
        if c.user != nil || c.password != nil {
            return "must not carry credentials (user:password@); give a token per registration with lockwipectl register --token-file"
        }
        if c.query != nil || c.fragment != nil { return "must not have a query (?...) or fragment (#...)" }
        switch scheme {
        case "https": return nil
        case "http":
            return isLoopback(host)
                ? nil
                : "plain http:// is allowed only to a loopback host (localhost, 127.0.0.0/8, [::1]), not \(host); use https://"
        default:
            return "must start with https:// (or http:// to a loopback host, with allow_insecure_http = true), not \(scheme)://"
        }
    }

    /// True when `text` is a plain http:// URL: anyone on this machine who binds the port
    /// first is the "server", so it is allowed only with `[server] allow_insecure_http`.
    public static func isPlainHTTP(_ text: String) -> Bool {
        URLComponents(string: text)?.scheme?.lowercased() == "http"
    }

    /// localhost, 127.0.0.0/8 and ::1 (with or without brackets).
    public static func isLoopback(_ host: String) -> Bool {
        let h = host.lowercased().trimming { $0 == "[" || $0 == "]" }
        if h == "localhost" || h == "::1" || h == "0:0:0:0:0:0:0:1" { return true }
        let parts = h.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "127" else { return false }
        return parts.allSatisfy { p in !p.isEmpty && p.count <= 3 && p.allSatisfy(\.isASCII) && UInt8(p) != nil }
    }

    /// The settings URL of one registration: `{base}/mobileservices/settingsExchange/v1/registrations/{user}`.
    public static func settings(base: String, user: String) -> String {
        var trimmed = base
        while trimmed.hasSuffix("/") { trimmed.removeLast() }
        let escaped = percentEncoded(user)
        return "\(trimmed)/mobileservices/settingsExchange/v1/registrations/\(escaped)"
    }

    /// `text` with every byte but ASCII letters, digits and `-._~` (RFC 3986's unreserved
    /// characters) percent-encoded as UTF-8: what
    /// `addingPercentEncoding(withAllowedCharacters: .alphanumerics ∪ "-._~")` gave on
    /// Linux, which encodes every non-ASCII character whatever the set says.
    static func percentEncoded(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            if isUnreserved(byte) {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                let hex = String(byte, radix: 16, uppercase: true)
                out += byte < 16 ? "%0\(hex)" : "%\(hex)"
            }
        }
        return out
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }
}
