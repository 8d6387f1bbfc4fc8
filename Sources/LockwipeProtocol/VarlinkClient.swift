#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// A small blocking varlink client over a Unix socket: what `lockwipectl` and the tests use.
/// One call at a time; each message is JSON terminated by a NUL byte.
public final class VarlinkClient {
    public enum ConnectionError: Error, CustomStringConvertible {
        case unreachable(path: String, reason: String)
        case broken(String)
        /// lockwiped closed the connection with the request unread (it was stopping, or
        /// refused one connection too many): nothing was done, and asking again is safe.
        /// On Linux a Unix socket closed with unread data resets its peer; one closed after
        /// reading ends it (`broken`).
        case notRead
        case replyTooLarge(Int)

        public var description: String {
            switch self {
            case .unreachable(let path, let reason): return "cannot reach lockwiped at \(path): \(reason)"
            case .broken(let reason): return "the connection to lockwiped broke: \(reason)"
            case .notRead: return "lockwiped closed the connection before it read the request (it was stopping, or has too many connections); nothing was done"
            case .replyTooLarge(let limit): return "the reply of lockwiped is larger than \(limit) bytes"
            }
        }
    }

    public static let defaultSocketPath = "/run/lockwipe/io.lockwipe.Manager"
    public static let maxReplyBytes = 64 << 20

    private let fd: Int32
    private var buffer: [UInt8] = []

    /// The longest path a Unix socket can have (`sun_path` less its terminating NUL): 107
    /// bytes on Linux.
    public static let maxSocketPathBytes = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    /// Connects to `path`; `timeout` bounds every later read and write (nil: wait as long
    /// as the daemon works, for actions whose length depends on the data, like a wipe).
    public init(path: String, timeout: TimeInterval? = 120) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ConnectionError.unreachable(path: path, reason: String(cString: strerror(errno))) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count <= Self.maxSocketPathBytes else {
            close(fd)
            throw ConnectionError.unreachable(path: path, reason: "socket path longer than \(Self.maxSocketPathBytes) bytes")
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        var tv = timeval(tv_sec: Int(timeout ?? 0), tv_usec: 0)  // 0: no timeout
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        if rc != 0 {
            let reason = Self.connectFailure(errno)
            close(fd)
            throw ConnectionError.unreachable(path: path, reason: reason)
        }
    }

    deinit { close(fd) }

    /// Why `connect` failed, in the operator's words (and what to check).
    static func connectFailure(_ code: Int32) -> String {
        switch code {
        case ENOENT: return "there is no socket there (is lockwiped running? systemctl status lockwiped)"
        case ECONNREFUSED: return "nothing answers on the socket (lockwiped is not running: systemctl status lockwiped)"
        case EACCES, EPERM: return "no permission to open the socket"
        case ENOTDIR: return "a part of the path is not a directory"
        case ENOTSOCK, EPROTOTYPE: return "that is not lockwiped's socket"
        default: return String(cString: strerror(code))
        }
    }

    /// Calls `method` and decodes its reply; a varlink error reply is thrown as `VarlinkError`.
    public func call<P: Encodable, R: Codable>(_ method: String, _ parameters: P, returning: R.Type) throws -> R {
        let reply = try callRaw(try VarlinkMessage.encodeCall(method: method, parameters: parameters))
        return try VarlinkMessage.decodeReply(R.self, from: reply)
    }

    /// Calls a declared method (`ManagerMethods`): its name and the types of its parameters
    /// and reply come from the one declaration the daemon binds too.
    public func call<P, R>(_ method: VarlinkMethod<P, R>, _ parameters: P) throws -> R {
        try call(method.name, parameters, returning: R.self)
    }

    /// Sends one message (without terminator) and returns the reply message.
    public func callRaw(_ message: Data) throws -> Data {
        try sendRaw(message)
        return try readMessage()
    }

    /// The connection's socket, to wait on with `poll` for the reply to a call made with
    /// `send` (`lockwipectl wipe` shows the progress meanwhile).
    public var descriptor: Int32 { fd }

    /// Sends a call without waiting for its reply: `receive` reads it.
    public func send<P: Encodable>(_ method: String, _ parameters: P) throws {
        try sendRaw(try VarlinkMessage.encodeCall(method: method, parameters: parameters))
    }

    /// Sends a call of a declared method without waiting for its reply: `receive` reads it.
    public func send<P, R>(_ method: VarlinkMethod<P, R>, _ parameters: P) throws {
        try send(method.name, parameters)
    }

    /// Reads and decodes the reply to the call made with `send`.
    public func receive<R: Codable>(_ returning: R.Type) throws -> R {
        try VarlinkMessage.decodeReply(R.self, from: try readMessage())
    }

    private func sendRaw(_ message: Data) throws {
        var out = [UInt8](message)
        out.append(0)
        var sent = 0
        while sent < out.count {
            let n = out[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EPIPE || errno == ECONNRESET { throw ConnectionError.notRead }
                throw ConnectionError.broken(String(cString: strerror(errno)))
            }
            sent += n
        }
    }

    private func readMessage() throws -> Data {
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            if let end = buffer.firstIndex(of: 0) {
                let message = Data(buffer[..<end])
                buffer.removeSubrange(...end)
                return message
            }
            guard buffer.count <= Self.maxReplyBytes else { throw ConnectionError.replyTooLarge(Self.maxReplyBytes) }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { throw ConnectionError.broken("timed out waiting for the reply") }
                if errno == ECONNRESET && buffer.isEmpty { throw ConnectionError.notRead }
                throw ConnectionError.broken(String(cString: strerror(errno)))
            }
            if n == 0 { throw ConnectionError.broken("lockwiped closed the connection without a reply") }
            buffer.append(contentsOf: chunk[..<n])
        }
    }
}
