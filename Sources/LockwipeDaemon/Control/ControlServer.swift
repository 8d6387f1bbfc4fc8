import CLockwipeFS
import CSystemd
import Foundation
import LockwipeBase
import LockwipeCore
import LockwipeProtocol
import LockwipeSystemd
import Logging
import NIOCore
import NIOExtras
import NIOPosix
import Synchronization

/// The varlink server on the control socket. Authorization comes from the peer's
/// credentials (SO_PEERCRED) only; a connection whose credentials cannot be read may do
/// nothing that needs them (fail closed).
public final class ControlServer: Sendable {
    let manager: Manager
    private let logger: Logger
    private let limits: Limits
    private let admission: Mutex<ConnectionAdmission>
    private let refusalLog = Mutex(RefusalLogThrottle())
    /// A report's times are whole seconds: an entry older than a second is seldom asked for
    /// again, and one for 1,000 registrations holds about 1 MiB (the report and its bytes),
    /// given back to the kernel when it goes.
    let statusReplies = ReplyMemo<StatusReport>(keep: .seconds(1), dropped: { BlockingPool.post { _ = lockwipe_malloc_trim() } }) {
        try VarlinkMessage.encodeReply($0)
    }
    /// The uids with a wipe dry-run running now: one at a time per caller.
    let dryRuns = Mutex(Set<UInt32>())
    /// True from creation until `startUpEnded()`: the socket answers status only.
    private let startingUp = Atomic<Bool>(true)

    /// True once `drain` has begun.
    private let stopping = Atomic<Bool>(false)

    var isStartingUp: Bool { startingUp.load(ordering: .acquiring) }

    /// The start-up pass has ended: every request is served from now on.
    public func startUpEnded() { startingUp.store(false, ordering: .releasing) }

    public struct Limits: Sendable {
        public var maxConnections: Int
        public var maxMessageBytes: Int
        public var idleTimeout: TimeAmount
    }

    public init(manager: Manager, logger: Logger, limits: Limits) {
        self.manager = manager
        self.logger = logger
        self.limits = limits
        self.admission = Mutex(ConnectionAdmission(maxConnections: limits.maxConnections))
    }

    /// The listening socket: the channel that yields each accepted connection, and what
    /// stops it gracefully (`drain`).
    public struct ServerChannel: Sendable {
        let channel: NIOAsyncChannel<Accepted?, Never>
        let quiescing: ServerQuiescingHelper
    }

    /// How long a stopping daemon goes on answering the requests it has accepted.
    static let drainLimit: TimeAmount = .seconds(5)

    /// A connection as it was accepted: its channel, its peer's SO_PEERCRED (nil when it
    /// cannot be read), and for a root peer the lookup of who that is, already started
    /// (`Peer.lookUpRootEarly`).
    public struct Accepted: Sendable {
        let channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>
        let credentials: PeerCredentials?
        let rootLookup: Task<Caller, Never>?
    }

    /// Binds the socket (or adopts the socket-activated fd) and returns the server channel.
    public func bind(path: String, activatedFD: CInt?, group: MultiThreadedEventLoopGroup) async throws -> ServerChannel {
        let limits = self.limits
        let manager = self.manager
        // One event loop accepts and carries every connection, and its requests are
        // answered on it (`serve`): NIO hands an accepted connection to another loop through
        // three cross-thread wake-ups before its first read.
        let loop = group.next()
        // Tracks the accepted connections, to stop them gracefully (`drain`).
        let quiescing = ServerQuiescingHelper(group: loop)
        let bootstrap = ServerBootstrap(group: loop, childGroup: loop).serverChannelOption(.backlog, value: 128)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(quiescing.makeServerChannelHandler(channel: channel)) }
            }
        // On the connection's event loop as it is set up: SO_PEERCRED is read there and
        // then (a completed future, no thread hop), and root's lookup starts at once, while
        // the client is still writing its request.
        //
        // A connection whose listener has closed since it was accepted (the daemon began to
        // stop in between) is no longer taken by the accept loop: wrapped, it would be
        // dropped and NIO would trap on it (apple/swift-nio#2813). It is answered
        // `Stopping` instead (nil here).
        let initializer: @Sendable (Channel) -> EventLoopFuture<Accepted?> = { channel in
            Self.credentials(of: channel).flatMapThrowing { credentials in
                let ops = channel.pipeline.syncOperations
                try ops.addHandler(ByteToMessageHandler(NULFrameDecoder(maxMessageBytes: limits.maxMessageBytes)))
                if let listener = channel.parent, !listener.isActive {
                    try ops.addHandler(StoppingRefusal())
                    return nil
                }
                try ops.addHandler(ConnectionGuard(idleTimeout: limits.idleTimeout) { [self] in stopping.load(ordering: .acquiring) })
                return Accepted(
                    channel: try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel), credentials: credentials,
                    rootLookup: Peer.lookUpRootEarly(credentials, on: EventLoopTaskExecutor(channel.eventLoop)) { await manager.caller($0) })
            }
        }
        if let fd = activatedFD {
            let channel = try await bootstrap.bind(fd, cleanupExistingSocketFile: false, childChannelInitializer: initializer)
            return ServerChannel(channel: channel, quiescing: quiescing)
        }
        let directory = (path as NSString).deletingLastPathComponent
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        } catch {
            throw SocketDirectoryUnavailable(directory: directory, reason: ErrorWords.of(error))
        }
        // Bound here, not by NIO: NIO's own Unix server socket unlinks whatever is at its
        // path when it closes, which may by then be another daemon's socket. The daemon
        // removes the file itself at exit, only if it is still the one it bound.
        let fd = try Self.bindUnixSocket(path: path)
        do {
            let channel = try await bootstrap.bind(fd, cleanupExistingSocketFile: false, childChannelInitializer: initializer)
            return ServerChannel(channel: channel, quiescing: quiescing)
        } catch {
            close(fd)
            throw error
        }
    }

    /// A stream socket bound at `path` (a stale socket file there is replaced; one that a
    /// process still listens on, another lockwiped's, and any other file are left alone
    /// and refused), mode 0666: anyone may connect, and what they may do is decided per
    /// request from SO_PEERCRED. NIO listens on it.
    static func bindUnixSocket(path: String) throws -> CInt {
        var st = stat()
        if lstat(path, &st) == 0 {
            guard st.st_mode & S_IFMT == S_IFSOCK else { throw NotASocket(path: path) }
            if let listener = listeningProcess(at: path) { throw SocketInUse(path: path, pid: listener) }
            guard unlink(path) == 0 || errno == ENOENT else { throw FileSystemError("remove the stale socket", path) }
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw FileSystemError("create a socket for", path) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count <= VarlinkClient.maxSocketPathBytes else {
            close(fd)
            throw FileSystemError("bind", path, code: ENAMETOOLONG)
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else {
            let code = errno
            close(fd)
            throw FileSystemError("bind", path, code: code)
        }
        guard chmod(path, 0o666) == 0 else {
            let code = errno
            close(fd)
            throw FileSystemError("chmod 0666", path, code: code)
        }
        return fd
    }

    /// The pid of the process listening on the socket at `path` (SO_PEERCRED of a
    /// connection to it: who called listen()), or nil when nothing accepts there: a socket
    /// left by a daemon that died is stale.
    static func listeningProcess(at path: String) -> Int32? {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else { return nil }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else { return nil }
        return (try? PeerCredentials.of(fileDescriptor: fd))?.pid ?? 0
    }

    /// Accepts connections until the server channel closes (`drain`), then returns once
    /// every connection has ended; one child task per connection. Admission is per peer
    /// (`ConnectionAdmission`): one user holding connections open cannot lock out another,
    /// nor root.
    ///
    /// The tasks run on the connections' event loop (`EventLoopTaskExecutor`), and so does
    /// the Manager while it answers them: a request is read, answered and its reply
    /// written without waking another thread. Blocking work goes to `BlockingPool`, as
    /// from anywhere else.
    ///
    /// Stopped by `drain`, never by cancelling it first: the accept loop must take every
    /// connection the listener has accepted. One left in its buffer is dropped unanswered,
    /// and NIO traps (SIGILL) on a connection dropped that way (apple/swift-nio#2813).
    public func serve(_ server: ServerChannel) async throws {
        try await withTaskExecutorPreference(EventLoopTaskExecutor(server.channel.channel.eventLoop)) { try await accept(server) }
    }

    /// Stops a serving control socket gracefully, and returns when `serving` (the task
    /// running `serve`) has ended: the listener closes, so a connection made from now on
    /// waits in the socket's backlog for the next lockwiped (with socket activation
    /// systemd holds the socket) instead of being dropped; every connection already
    /// accepted is served, each request read is answered, and a connection closes once it
    /// has been quiet for `ConnectionGuard.quietWhileStopping`. After `drainLimit` the
    /// connections still open are cancelled (the caller stops the wipes first: a request
    /// waiting for one is answered that it resumes at the next start).
    /// Waits even when the calling task is cancelled: an ending accept loop must not be cut.
    public func drain(_ server: ServerChannel, serving: Task<Void, Never>) async {
        stopping.store(true, ordering: .releasing)
        server.quiescing.initiateShutdown(promise: nil)
        let limit = server.channel.channel.eventLoop.scheduleTask(in: Self.drainLimit) { serving.cancel() }
        await serving.value
        limit.cancel()
    }

    private func accept(_ server: ServerChannel) async throws {
        try await withThrowingDiscardingTaskGroup { group in
            try await server.channel.executeThenClose { inbound in
                for try await accepted in inbound {
                    guard let accepted else { continue }
                    let credentials = accepted.credentials
                    let uid = credentials?.uid
                    if let refusal = admission.withLock({ $0.admit(uid: uid) }) {
                        if let suppressed = refusalLog.withLock({ $0.shouldLog(now: .now) }) {
                            logger.warning(
                                "connection refused: too many connections (\(refusal))",
                                metadata: [
                                    "peer_uid": .string(uid.map { "\($0)" } ?? "unknown"),
                                    "peer_pid": .string(credentials.map { "\($0.pid)" } ?? "unknown"),
                                    "max_connections": "\(limits.maxConnections)", "refused_unlogged": "\(suppressed)",
                                ])
                        }
                        // Through executeThenClose: an NIOAsyncChannel dropped unclosed traps.
                        group.addTask { try? await accepted.channel.executeThenClose { _, _ in } }
                        continue
                    }
                    group.addTask {
                        defer { self.admission.withLock { $0.release(uid: uid) } }
                        await self.handle(accepted)
                    }
                }
            }
        }
    }

    /// The peer's SO_PEERCRED; nil when it cannot be read (then it may do nothing that
    /// needs them). Completed at once when called on the channel's event loop.
    private static func credentials(of channel: Channel) -> EventLoopFuture<PeerCredentials?> {
        // NIO owns the descriptor, so SO_PEERCRED is read through it into the C layout.
        guard let provider = channel as? SocketOptionProvider else { return channel.eventLoop.makeSucceededFuture(nil) }
        let raw: EventLoopFuture<lockwipe_ucred> = provider.unsafeGetSocketOption(level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED))
        return raw.map { Optional(PeerCredentials($0)) }.recover { _ in nil }
    }

    private func handle(_ accepted: Accepted) async {
        let peer = Peer(accepted.credentials, early: accepted.rootLookup)
        do {
            try await accepted.channel.executeThenClose { inbound, outbound in
                for try await message in inbound {
                    let data = Data(message.readableBytesView)
                    guard let reply = await self.respond(to: data, peer: peer) else {
                        try await outbound.write(ByteBuffer())  // answered (oneway): no longer in flight
                        if peer.afterOwnRequest != nil { break }
                        continue
                    }
                    var out = ByteBuffer(bytes: reply.data)
                    out.writeInteger(UInt8(0))
                    try await outbound.write(out)
                    // After her own lock or wipe, nothing more from that client.
                    if reply.close || peer.afterOwnRequest != nil { break }
                }
            }
        } catch {
            logger.debug("connection ended", metadata: ["error": .string(ErrorWords.of(error))])
        }
        if let own = peer.afterOwnRequest {
            await manager.context.endClientAfterOwnRequest(user: own.user, own.client)
        }
    }

    struct Reply {
        var data: Data
        var close = false
    }

    /// One connection's peer: its SO_PEERCRED, and who that is (user name, admin or not),
    /// looked up once, at its first request that needs it. User and group lookups can
    /// cost dozens of system calls (nss-systemd searches userdb directories); a connection
    /// that sends thousands of requests pays them once. Group membership is therefore
    /// read when a connection starts to use it, not per request.
    ///
    /// Root's peer is the exception: it is an administrator by its uid, so what NSS says
    /// (its name, whether the admin group exists, for status's warning) decides nothing,
    /// and is looked up as soon as it connects, on the thread pool, while the client is
    /// still writing its request (`lookUpRootEarly`, from the connection's set-up).
    /// Another user's membership is read at her first request, never earlier.
    final class Peer {
        let credentials: PeerCredentials?
        private var known: Caller?
        /// Root's lookup, started when it connected.
        private var early: Task<Caller, Never>?
        /// Set by a request that ended the caller's own processes but hers (her own lock or
        /// wipe): the connection is closed after its answer, and then the client is ended
        /// if it has not exited.
        var afterOwnRequest: (user: String, client: RequestingClient)?
        /// The client's name (`/proc/PID/comm`), read once, for the journal and history.
        lazy var comm: String? = credentials.flatMap { RequestingClient.comm(of: $0.pid) }

        init(_ credentials: PeerCredentials?, early: Task<Caller, Never>? = nil) {
            self.credentials = credentials
            self.early = early
        }

        /// The lookup of a root peer, started now so that its first request need not wait
        /// for NSS; nil (nothing started) for any other peer. Its task prefers `executor`
        /// (the connection's event loop) when given.
        static func lookUpRootEarly(
            _ credentials: PeerCredentials?, on executor: (any TaskExecutor)? = nil,
            _ lookUp: @escaping @Sendable (PeerCredentials) async -> Caller
        ) -> Task<Caller, Never>? {
            guard let credentials, credentials.uid == 0 else { return nil }
            return Task(executorPreference: executor) { await lookUp(credentials) }
        }

        func caller(_ lookUp: (PeerCredentials) async -> Caller) async throws -> Caller {
            if let known { return known }
            guard let credentials else { throw VarlinkError.notPermitted("the caller's credentials could not be read") }
            let found: Caller
            if let early {
                found = await early.value
                self.early = nil
            } else {
                found = await lookUp(credentials)
            }
            known = found
            return found
        }
    }

    /// Answers one message; nil for a oneway call.
    func respond(to data: Data, peer: Peer) async -> Reply? {
        let credentials = peer.credentials
        let header: VarlinkCallHeader
        do {
            header = try VarlinkMessage.decodeHeader(data)
        } catch {
            return Reply(data: VarlinkMessage.encodeError(.invalidParameter("method", reason: "not a varlink call (JSON object with a string 'method')")), close: true)
        }
        let oneway = header.oneway ?? false
        do {
            let result: Data
            // The client is spared if this request ends its own user's processes.
            let comm = peer.comm
            let client = credentials.map { RequestingClient(uid: $0.uid, pid: $0.pid, comm: comm) }
            defer {
                if let client, let user = client.sparedFor { peer.afterOwnRequest = (user, client) }
            }
            do {
                result = try await RequestingClient.$current.withValue(client) { try await dispatch(header.method, data, peer: peer) }
            } catch let error as ManagerError {
                throw Self.wireError(error)
            }
            return oneway ? nil : Reply(data: result)
        } catch let error as VarlinkError {
            if error.name == VarlinkError.notPermittedName {
                logger.warning(
                    "request refused: \(error.message)",
                    metadata: [
                        "message_id": MessageID.accessDenied.metadata, "method": .string(header.method),
                        "peer_uid": .string(credentials.map { "\($0.uid)" } ?? "unknown"),
                        "peer_pid": .string(credentials.map { "\($0.pid)" } ?? "unknown"),
                    ])
            }
            return oneway ? nil : Reply(data: VarlinkMessage.encodeError(error))
        } catch is DecodingError {
            return oneway ? nil : Reply(data: VarlinkMessage.encodeError(.invalidParameter("parameters", reason: "the parameters do not match the method's signature")))
        } catch {
            return oneway ? nil : Reply(data: VarlinkMessage.encodeError(.actionFailed(ErrorWords.of(error))))
        }
    }

    /// The one place a domain error becomes a varlink error.
    static func wireError(_ error: ManagerError) -> VarlinkError {
        switch error {
        case .notPermitted(let reason): return .notPermitted(reason)
        case .noSuchRegistration(let user): return .noSuchRegistration(user)
        case .noSuchCertificate(let user, _): return .noSuchCertificate(user: user, reason: error.message)
        case .registrationRefused(let reason): return .registrationRefused(reason)
        case .invalidParameter(let parameter, let reason): return .invalidParameter(parameter, reason: reason)
        case .actionFailed(let reason): return .actionFailed(reason)
        // Like homed's HOME_LOCKED/HOME_NOT_ACTIVE, but the interface keeps its one name.
        case .wrongState(_, _, let reason): return .actionFailed(reason)
        case .passcodeRequired(let user, let reason): return .passcodeRequired(user: user, reason: reason)
        case .passcodeExpired(let user, let reason): return .passcodeExpired(user: user, reason: reason)
        }
    }
}

/// Another process listens on the control socket's path: lockwiped does not take it over.
struct SocketInUse: Error, CustomStringConvertible {
    var path: String
    var pid: Int32

    var description: String {
        "another process\(pid > 0 ? " (pid \(pid))" : "") is serving the control socket \(path): is another lockwiped running with another state directory? lockwiped does not take its socket; stop it, or give this one another --socket"
    }
}

/// Something that is not a socket is at the control socket's path: lockwiped leaves it.
struct NotASocket: Error, CustomStringConvertible {
    var path: String

    var description: String {
        "cannot bind the control socket \(path): something that is not a socket is there; lockwiped does not remove it: move it away, or give lockwiped another --socket"
    }
}

/// The control socket's directory is missing and cannot be created.
struct SocketDirectoryUnavailable: Error, CustomStringConvertible {
    var directory: String
    var reason: String

    var description: String { "cannot create the control socket's directory \(directory): \(reason)" }
}
