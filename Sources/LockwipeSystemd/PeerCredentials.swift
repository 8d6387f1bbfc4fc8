import CSystemd

/// SO_PEERCRED of a connected Unix socket: who was at the other end when it connected.
///
/// The kernel fills these in at connect()/socketpair() time, so they cannot be forged by the
/// peer; they are the basis for per-connection authorization (fail closed on any error).
public struct PeerCredentials: Sendable, Equatable {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32

    public init(pid: Int32, uid: UInt32, gid: UInt32) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }

    /// From the kernel's `struct ucred` layout, as read with SO_PEERCRED by a socket
    /// library that owns the descriptor (swift-nio's `unsafeGetSocketOption`).
    public init(_ raw: lockwipe_ucred) {
        self.init(pid: raw.pid, uid: raw.uid, gid: raw.gid)
    }

    /// Throws ``SystemdError`` (e.g. ENOTSOCK, EBADF) when the descriptor has no peer credentials.
    public static func of(fileDescriptor fd: CInt) throws -> PeerCredentials {
        var pid: pid_t = 0
        var uid: uid_t = 0
        var gid: gid_t = 0
        let result = lockwipe_peer_credentials(fd, &pid, &uid, &gid)
        guard result == 0 else {
            throw SystemdError(operation: "getsockopt(SO_PEERCRED) on fd \(fd)", errno: -result)
        }
        return PeerCredentials(pid: pid, uid: uid, gid: gid)
    }
}
