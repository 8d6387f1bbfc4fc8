import CSystemd
import Foundation
import LockwipeCore
import LockwipeProtocol
import LockwipeSystemd
import Logging
import NIOCore
import NIOPosix
import Synchronization

/// Splits the byte stream into NUL-terminated varlink messages, refusing any message larger
/// than the configured limit (the client is told, then disconnected).
struct NULFrameDecoder: ByteToMessageDecoder {
    typealias InboundOut = ByteBuffer
    let maxMessageBytes: Int

    struct TooLarge: Error {}

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        switch VarlinkFraming.next(in: buffer.readableBytesView, maxMessageBytes: maxMessageBytes) {
        case .needMore:
            return .needMoreData
        case .tooLarge:
            throw TooLarge()
        case .message(let range):
            let message = buffer.readSlice(length: range.count)!
            buffer.moveReaderIndex(forwardBy: 1)
            context.fireChannelRead(Self.wrapInboundOut(message))
            return .continue
        }
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        // An unterminated message at EOF is dropped: it was never complete.
        buffer.moveReaderIndex(to: buffer.writerIndex)
        return .needMoreData
    }
}

/// Closes a connection that stays idle past the limit, and one whose framing failed
/// (after telling it why).
///
/// Idle means: no complete request for `idleTimeout`. The timer starts when the
/// connection opens and again when the last request in flight is answered; only a whole
/// message (this handler sits behind the NUL decoder) stops it. A byte now and then that
/// never completes a request keeps nothing open: otherwise a few users trickling bytes
/// would hold every connection slot. A connection waiting for the answer to a long request
/// (a wipe of many GiB) is not idle: every request read is counted until its reply (an
/// empty one for a oneway call) is written.
final class ConnectionGuard: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let idleTimeout: TimeAmount
    /// Requests read and not yet answered; touched on the channel's event loop only.
    private var inFlight = 0
    /// The pending idle close, while no request is in flight.
    private var idleTimer: Scheduled<Void>?

    init(idleTimeout: TimeAmount) { self.idleTimeout = idleTimeout }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { startIdleTimer(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        startIdleTimer(context: context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        stopIdleTimer()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stopIdleTimer()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        inFlight += 1
        stopIdleTimer()
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        inFlight = max(0, inFlight - 1)
        if inFlight == 0 { startIdleTimer(context: context) }
        if unwrapOutboundIn(data).readableBytes == 0 {
            promise?.succeed(())  // the marker of an answered oneway call: nothing to send
            return
        }
        context.write(data, promise: promise)
    }

    private func startIdleTimer(context: ChannelHandlerContext) {
        stopIdleTimer()
        // Cancelled whenever the handler leaves the pipeline, so holding both is fine.
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        idleTimer = context.eventLoop.scheduleTask(in: idleTimeout) {
            let (handler, context) = bound.value
            if handler.inFlight == 0 { context.close(promise: nil) }
        }
    }

    private func stopIdleTimer() {
        idleTimer?.cancel()
        idleTimer = nil
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if error is NULFrameDecoder.TooLarge {
            var out = context.channel.allocator.buffer(capacity: 128)
            out.writeBytes(VarlinkMessage.encodeError(.invalidParameter("message", reason: "message larger than the limit")))
            out.writeInteger(UInt8(0))
            context.writeAndFlush(NIOAny(out), promise: nil)
            context.close(promise: nil)
            return
        }
        context.close(promise: nil)
    }
}

/// Who may hold how many control connections. Each user but root at most a quarter of
/// `max_connections`, so one user cannot take them all; all of them together at most
/// `max_connections`; root as many again of its own, so an operator always gets through.
/// A peer whose credentials could not be read counts as one more non-root user.
struct ConnectionAdmission: Sendable {
    enum Refusal: Equatable, CustomStringConvertible {
        case perUser(Int), nonRootTotal(Int), root(Int)
        var description: String {
            switch self {
            case .perUser(let n): return "this user already has \(n)"
            case .nonRootTotal(let n): return "users other than root already have \(n)"
            case .root(let n): return "root already has \(n)"
            }
        }
    }

    let maxConnections: Int
    var perUser: Int { max(1, maxConnections / 4) }
    private(set) var byUser: [UInt32?: Int] = [:]
    private(set) var nonRoot = 0

    init(maxConnections: Int) { self.maxConnections = maxConnections }

    /// Counts the connection in and returns nil, or returns why it is refused.
    mutating func admit(uid: UInt32?) -> Refusal? {
        let mine = byUser[uid, default: 0]
        if uid == 0 {
            if mine >= maxConnections { return .root(mine) }
        } else {
            if mine >= perUser { return .perUser(mine) }
            if nonRoot >= maxConnections { return .nonRootTotal(nonRoot) }
            nonRoot += 1
        }
        byUser[uid] = mine + 1
        return nil
    }

    mutating func release(uid: UInt32?) {
        guard let mine = byUser[uid], mine > 0 else { return }
        byUser[uid] = mine == 1 ? nil : mine - 1
        if uid != 0 { nonRoot -= 1 }
    }
}

/// A flood of refused connections is logged once per 10 s, with how many went unlogged.
struct RefusalLogThrottle: Sendable {
    private var last: ContinuousClock.Instant?
    private var unlogged = 0

    /// The number refused without a log line since the last one, when this one is to be logged.
    mutating func shouldLog(now: ContinuousClock.Instant) -> Int? {
        if let last, now - last < .seconds(10) {
            unlogged += 1
            return nil
        }
        defer { unlogged = 0 }
        last = now
        return unlogged
    }
}

/// The varlink server on the control socket. Authorization comes from the peer's
/// credentials (SO_PEERCRED) only; a connection whose credentials cannot be read may do
/// nothing that needs them (fail closed).
public final class ControlServer: Sendable {
    private let manager: Manager
    private let logger: Logger
    private let limits: Limits
    private let admission: Mutex<ConnectionAdmission>
    private let refusalLog = Mutex(RefusalLogThrottle())

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

    public typealias ServerChannel = NIOAsyncChannel<NIOAsyncChannel<ByteBuffer, ByteBuffer>, Never>

    /// Binds the socket (or adopts the socket-activated fd) and returns the server channel.
    public func bind(path: String, activatedFD: CInt?, group: MultiThreadedEventLoopGroup) async throws -> ServerChannel {
        let limits = self.limits
        let bootstrap = ServerBootstrap(group: group).serverChannelOption(.backlog, value: 128)
        let initializer: @Sendable (Channel) -> EventLoopFuture<NIOAsyncChannel<ByteBuffer, ByteBuffer>> = { channel in
            channel.eventLoop.makeCompletedFuture {
                let ops = channel.pipeline.syncOperations
                try ops.addHandler(ByteToMessageHandler(NULFrameDecoder(maxMessageBytes: limits.maxMessageBytes)))
                try ops.addHandler(ConnectionGuard(idleTimeout: limits.idleTimeout))
                return try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
            }
        }
        if let fd = activatedFD {
            return try await bootstrap.bind(fd, cleanupExistingSocketFile: false, childChannelInitializer: initializer)
        }
        let directory = (path as NSString).deletingLastPathComponent
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        let channel = try await bootstrap.bind(unixDomainSocketPath: path, cleanupExistingSocketFile: true, childChannelInitializer: initializer)
        // Anyone may connect; what they may do is decided per request from SO_PEERCRED.
        guard chmod(path, 0o666) == 0 else { throw FileSystemError("chmod 0666", path) }
        return channel
    }

    /// Accepts connections until the server channel closes; one child task per connection.
    /// Admission is per peer (`ConnectionAdmission`): one user holding connections open
    /// cannot lock out another, nor root.
    public func serve(_ server: ServerChannel) async throws {
        try await withThrowingDiscardingTaskGroup { group in
            try await server.executeThenClose { inbound in
                for try await connection in inbound {
                    let credentials = await Self.credentials(of: connection.channel)
                    let uid = credentials?.uid
                    if let refusal = admission.withLock({ $0.admit(uid: uid) }) {
                        if let suppressed = refusalLog.withLock({ $0.shouldLog(now: .now) }) {
                            logger.warning("connection refused: too many connections (\(refusal))", metadata: [
                                "peer_uid": .string(uid.map { "\($0)" } ?? "unknown"),
                                "peer_pid": .string(credentials.map { "\($0.pid)" } ?? "unknown"),
                                "max_connections": "\(limits.maxConnections)", "refused_unlogged": "\(suppressed)",
                            ])
                        }
                        // Through executeThenClose: an NIOAsyncChannel dropped unclosed traps.
                        group.addTask { try? await connection.executeThenClose { _, _ in } }
                        continue
                    }
                    group.addTask {
                        defer { self.admission.withLock { $0.release(uid: uid) } }
                        await self.handle(connection, credentials: credentials)
                    }
                }
            }
        }
    }

    /// The peer's SO_PEERCRED; nil when it cannot be read (then it may do nothing that needs them).
    private static func credentials(of channel: Channel) async -> PeerCredentials? {
        // NIO owns the descriptor, so SO_PEERCRED is read through it into the C layout.
        let raw: lockwipe_ucred? = try? await (channel as? SocketOptionProvider)?
            .unsafeGetSocketOption(level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED)).get()
        return raw.map(PeerCredentials.init)
    }

    private func handle(_ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>, credentials: PeerCredentials?) async {
        let peer = Peer(credentials)
        do {
            try await connection.executeThenClose { inbound, outbound in
                for try await message in inbound {
                    let data = Data(message.readableBytesView)
                    guard let reply = await self.respond(to: data, peer: peer) else {
                        try await outbound.write(ByteBuffer())  // answered (oneway): no longer in flight
                        continue
                    }
                    var out = ByteBuffer(bytes: reply.data)
                    out.writeInteger(UInt8(0))
                    try await outbound.write(out)
                    if reply.close { break }
                }
            }
        } catch {
            logger.debug("connection ended", metadata: ["error": .string("\(error)")])
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
    final class Peer {
        let credentials: PeerCredentials?
        private var known: Caller?

        init(_ credentials: PeerCredentials?) { self.credentials = credentials }

        func caller(_ lookUp: (PeerCredentials) async -> Caller) async throws -> Caller {
            if let known { return known }
            guard let credentials else { throw VarlinkError.notPermitted("the caller's credentials could not be read") }
            let found = await lookUp(credentials)
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
            do {
                result = try await dispatch(header.method, data, peer: peer)
            } catch let error as ManagerError {
                throw Self.wireError(error)
            }
            return oneway ? nil : Reply(data: result)
        } catch let error as VarlinkError {
            if error.name == VarlinkError.notPermittedName {
                logger.warning("request refused: \(error.message)", metadata: [
                    "message_id": MessageID.accessDenied.metadata, "method": .string(header.method),
                    "peer_uid": .string(credentials.map { "\($0.uid)" } ?? "unknown"),
                    "peer_pid": .string(credentials.map { "\($0.pid)" } ?? "unknown"),
                ])
            }
            return oneway ? nil : Reply(data: VarlinkMessage.encodeError(error))
        } catch is DecodingError {
            return oneway ? nil : Reply(data: VarlinkMessage.encodeError(.invalidParameter("parameters", reason: "the parameters do not match the method's signature")))
        } catch {
            return oneway ? nil : Reply(data: VarlinkMessage.encodeError(.actionFailed("\(error)")))
        }
    }

    /// The one place a domain error becomes a varlink error.
    static func wireError(_ error: ManagerError) -> VarlinkError {
        switch error {
        case .notPermitted(let reason): return .notPermitted(reason)
        case .noSuchRegistration(let user): return .noSuchRegistration(user)
        case .registrationRefused(let reason): return .registrationRefused(reason)
        case .invalidParameter(let parameter, let reason): return .invalidParameter(parameter, reason: reason)
        case .actionFailed(let reason): return .actionFailed(reason)
        case .passcodeRequired(let user, let reason): return .passcodeRequired(user: user, reason: reason)
        case .passcodeExpired(let user, let reason): return .passcodeExpired(user: user, reason: reason)
        }
    }

    private func dispatch(_ method: String, _ data: Data, peer: Peer) async throws -> Data {
        switch method {
        case "org.varlink.service.GetInfo":
            return try VarlinkMessage.encodeReply(ServiceInfo(
                vendor: "lockwipe", product: "lockwiped", version: LockwipeVersion.current, url: "https://lockwipe.invalid/",
                interfaces: [InterfaceDescription.serviceName, InterfaceDescription.managerName]))
        case "org.varlink.service.GetInterfaceDescription":
            let p = try VarlinkMessage.decodeParameters(InterfaceDescriptionRequest.self, from: data)
            switch p.interface {
            case InterfaceDescription.managerName: return try VarlinkMessage.encodeReply(InterfaceDescriptionReply(description: InterfaceDescription.manager))
            case InterfaceDescription.serviceName: return try VarlinkMessage.encodeReply(InterfaceDescriptionReply(description: InterfaceDescription.service))
            default: throw VarlinkError.interfaceNotFound(p.interface)
            }
        default: break
        }
        guard let m = ManagerMethod(rawValue: method) else {
            if method.hasPrefix(InterfaceDescription.managerName + ".") || method.hasPrefix(InterfaceDescription.serviceName + ".") {
                throw VarlinkError.methodNotFound(method)
            }
            let interface = method.split(separator: ".").dropLast().joined(separator: ".")
            throw VarlinkError.interfaceNotFound(interface)
        }
        let caller = try await peer.caller { await manager.caller($0) }

        switch m {
        case .getStatus:
            let p = try VarlinkMessage.decodeParameters(UserFilter.self, from: data)
            return try VarlinkMessage.encodeReply(try await manager.status(for: caller, user: p.user))
        case .getPolicy:
            return try VarlinkMessage.encodeReply(await manager.policyInfo())
        case .getHistory:
            let p = try VarlinkMessage.decodeParameters(HistoryRequest.self, from: data)
            return try VarlinkMessage.encodeReply(try await manager.history(for: caller, user: p.user, limit: p.limit ?? 1000))
        case .lock:
            let p = try VarlinkMessage.decodeParameters(TargetSelection.self, from: data)
            let users = try await selection(p, caller: caller, verb: "lock", userMayTargetSelf: true)
            var results: [ActionResult] = []
            for user in users {
                let trigger: Trigger = caller.isAdmin ? .admin : .user
                let reason = caller.isAdmin ? "locked by administrator uid \(caller.credentials.uid)" : "locked by the user"
                results.append(try await manager.lock(user: user, trigger: trigger, reason: reason))
            }
            return try VarlinkMessage.encodeReply(ActionReply(results: results))
        case .unlock:
            // Users may unlock their own encrypted vault with its passcode; the Manager
            // decides what each lock needs (SPEC, lockwipectl(1)).
            let p = try VarlinkMessage.decodeParameters(UnlockRequest.self, from: data)
            try await requireSelfOrAdmin(caller, p.user, "unlock")
            return try VarlinkMessage.encodeReply(ActionReply(results: [
                try await manager.unlock(user: p.user, by: caller, passcode: p.passcode, newPasscode: p.newPasscode)]))
        case .setPasscode:
            let p = try VarlinkMessage.decodeParameters(PasscodeRequest.self, from: data)
            try await requireSelfOrAdmin(caller, p.user, "set the passcode of")
            return try VarlinkMessage.encodeReply(ActionReply(results: [
                try await manager.setPasscode(user: p.user, current: p.current, new: p.new, by: caller)]))
        case .wipe:
            let p = try VarlinkMessage.decodeParameters(TargetSelection.self, from: data)
            // "Forgot passcode": a user may wipe their own encrypted vault; anything else is
            // for administrators.
            var own = false
            if !caller.isAdmin, p.all != true, let user = p.user, user == caller.userName,
               let r = try await manager.registration(user), r.protection == .encrypted {
                own = true
            }
            let users = try await selection(p, caller: caller, verb: "wipe", userMayTargetSelf: own)
            var results: [ActionResult] = []
            for user in users {
                results.append(caller.isAdmin
                    ? try await manager.wipe(user: user, trigger: .admin, reason: "wiped by administrator uid \(caller.credentials.uid)")
                    : try await manager.wipe(user: user, trigger: .user, reason: "wiped by the user (forgotten passcode or their own choice)"))
            }
            return try VarlinkMessage.encodeReply(ActionReply(results: results))
        case .register:
            let p = try VarlinkMessage.decodeParameters(RegisterRequest.self, from: data)
            try requireAdmin(caller, "register users")
            let credentials = ServerCredentials(token: p.token, clientCertificate: p.clientCertificate, clientKey: p.clientKey)
            return try VarlinkMessage.encodeReply(ActionReply(results: [try await manager.register(
                user: p.user, directories: p.directories, credentials: p.token == nil && p.clientCertificate == nil && p.clientKey == nil ? nil : credentials,
                requireEncryption: p.requireEncryption ?? false, passcode: p.passcode, by: caller)]))
        case .setCredentials:
            let p = try VarlinkMessage.decodeParameters(CredentialsRequest.self, from: data)
            try requireAdmin(caller, "set credentials")
            let credentials = ServerCredentials(token: p.token, clientCertificate: p.clientCertificate, clientKey: p.clientKey)
            return try VarlinkMessage.encodeReply(ActionReply(results: [try await manager.setCredentials(user: p.user, credentials, by: caller)]))
        case .unregister:
            let p = try VarlinkMessage.decodeParameters(UserParameter.self, from: data)
            try requireAdmin(caller, "unregister users")
            return try VarlinkMessage.encodeReply(ActionReply(results: [try await manager.unregister(user: p.user, by: caller)]))
        case .checkIn:
            let p = try VarlinkMessage.decodeParameters(UserFilter.self, from: data)
            if !caller.isAdmin {
                guard let user = p.user, user == caller.userName, try await manager.registrationUID(user) == caller.credentials.uid else {
                    throw VarlinkError.notPermitted("only administrators may check in for other users")
                }
            }
            let users = try await manager.targets(user: p.user, all: p.user == nil)
            return try VarlinkMessage.encodeReply(ActionReply(results: try await manager.checkIn(users: users)))
        }
    }

    private func requireSelfOrAdmin(_ caller: Caller, _ user: String, _ verb: String) async throws {
        if caller.isAdmin { return }
        guard user == caller.userName, try await manager.registrationUID(user) == caller.credentials.uid else {
            throw VarlinkError.notPermitted("you may only \(verb) your own registration")
        }
    }

    private func requireAdmin(_ caller: Caller, _ what: String) throws {
        guard caller.isAdmin else { throw VarlinkError.notPermitted("only root and members of the admin group may \(what)") }
    }

    private func selection(_ p: TargetSelection, caller: Caller, verb: String, userMayTargetSelf: Bool) async throws -> [String] {
        let all = p.all ?? false
        if all == (p.user != nil) { throw VarlinkError.invalidParameter("user", reason: "give exactly one of user or all") }
        if !caller.isAdmin {
            guard userMayTargetSelf, !all, let user = p.user, user == caller.userName,
                  try await manager.registrationUID(user) == caller.credentials.uid
            else {
                throw VarlinkError.notPermitted(userMayTargetSelf
                    ? "you may only \(verb) your own registration"
                    : "only root and members of the admin group may \(verb)")
            }
        }
        return try await manager.targets(user: p.user, all: all)
    }
}
