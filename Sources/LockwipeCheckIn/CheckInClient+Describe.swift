import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix
import NIOSSL

extension CheckInClient {
    /// A one-line reason an operator can act on (never containing request headers): what
    /// failed, where (`url`, without its query or user info), and why in plain words; no
    /// type names, error domains or errno numbers.
    static func describe(_ error: any Error, timeout: Int, url: String? = nil) -> String {
        let at = url.map { " " + shown($0) } ?? ""
        if let e = error as? HTTPClientError {
            switch e {
            case .deadlineExceeded, .readTimeout, .connectTimeout, .writeTimeout:
                return url.map { "timed out after \(timeout) s waiting for \(shown($0))" } ?? "timed out after \(timeout) s"
            case .remoteConnectionClosed: return "the server\(at) closed the connection before the answer was complete"
            case .invalidURL, .emptyHost, .emptyScheme: return "the server URL\(at) is not a valid http(s) URL"
            case .cancelled: return cancelledReason
            default:
                let name = String(describing: e).split(separator: ".").last.map(String.init) ?? "unknown"
                return "the request to\(at.isEmpty ? " the server" : at) failed (\(name))"
            }
        }
        if error is NIOSSLError || error is BoringSSLError || error is NIOSSLExtraError {
            return "TLS failure\(url.map { " with " + shown($0) } ?? ""): \(String(describing: error).prefix(300))"
        }
        if let e = error as? NIOConnectionError {
            let target = "\(e.host):\(e.port)"
            let reason: String
            if let first = e.connectionErrors.first {
                reason = (first.error as? IOError).map { connectWords($0.errnoCode, target: target) } ?? "\(first.error)".prefix(200).description
            } else if e.dnsAError != nil || e.dnsAAAAError != nil {
                reason = "the host name \(e.host) could not be resolved (DNS)"
            } else {
                reason = "no address to connect to for \(e.host)"
            }
            return "cannot connect to\(at.isEmpty ? " " + target : at): \(reason)"
        }
        if let e = error as? IOError {
            let target = url.flatMap { URL(string: $0) }.map { "\($0.host ?? "the server"):\($0.port ?? ($0.scheme == "https" ? 443 : 80))" } ?? "the server"
            return "cannot connect to\(at.isEmpty ? " the server" : at): \(connectWords(e.errnoCode, target: target))"
        }
        if error is ChannelError { return "the connection to\(at.isEmpty ? " the server" : at) failed (\(String(describing: error).prefix(100)))" }
        if error is CancellationError { return cancelledReason }
        return String(String(describing: error).prefix(300))
    }

    /// A failed connect's errno in plain words, naming `target` (host:port).
    static func connectWords(_ code: Int32, target: String) -> String {
        switch code {
        case ECONNREFUSED: return "the connection was refused: nothing accepts connections at \(target) (is the server running, and is this its port?)"
        case ETIMEDOUT: return "the connection to \(target) timed out"
        case EHOSTUNREACH: return "there is no route to the host of \(target)"
        case ENETUNREACH, ENETDOWN: return "the network is unreachable from this machine (is it online?)"
        case ECONNRESET: return "the server at \(target) reset the connection"
        case EACCES, EPERM: return "the connection to \(target) was not permitted (a firewall, or the service's sandbox)"
        case EADDRNOTAVAIL: return "no local address can reach \(target)"
        default:
            let text = String(cString: strerror(code))
            return (text.first.map { $0.lowercased() + text.dropFirst() } ?? "error") + " (connecting to \(target))"
        }
    }

    /// `url` as shown in a message: without query, fragment or user info (they may hold secrets).
    static func shown(_ url: String) -> String {
        guard var c = URLComponents(string: url) else { return url }
        c.query = nil
        c.fragment = nil
        c.user = nil
        c.password = nil
        return c.string ?? url
    }
}
