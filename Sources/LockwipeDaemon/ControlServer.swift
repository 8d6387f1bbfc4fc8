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
        guard let end = buffer.readableBytesView.firstIndex(of: 0) else {
            if buffer.readableBytes > maxMessageBytes { throw TooLarge() }
            return .needMoreData
        }
        let length = end - buffer.readerIndex
        if length > maxMessageBytes { throw TooLarge() }
        let message = buffer.readSlice(length: length)!
        buffer.moveReaderIndex(forwardBy: 1)
        context.fireChannelRead(Self.wrapInboundOut(message))
        return .continue
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        // An unterminated message at EOF is dropped: it was never complete.
        buffer.moveReaderIndex(to: buffer.writerIndex)
        return .needMoreData
    }
}

/// Closes a connection that stays idle past the limit, and one whose framing failed
/// (after telling it why). A connection waiting for the answer to a long request (a
/// wipe of many GiB) is not idle: every request read is counted until its reply (an
/// empty one for a oneway call) is written.
final class ConnectionGuard: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// Requests read and not yet answered; touched on the channel's event loop only.
    private var inFlight = 0

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        inFlight += 1
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        inFlight = max(0, inFlight - 1)
        if unwrapOutboundIn(data).readableBytes == 0 {
            promise?.succeed(())  // the marker of an answered oneway call: nothing to send
            return
        }
        context.write(data, promise: promise)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent {
            if inFlight == 0 { context.close(promise: nil) }
            return
        }
        context.fireUserInboundEventTriggered(event)
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

/// The varlink server on the control socket. Authorization comes from the peer's
/// credentials (SO_PEERCRED) only; a connection whose credentials cannot be read may do
/// nothing that needs them (fail closed).
public final class ControlServer: Sendable {
    private let manager: Manager
    private let logger: Logger
    private let limits: Limits
    private let active = Atomic<Int>(0)

    public struct Limits: Sendable {
        public var maxConnections: Int
        public var maxMessageBytes: Int
        public var idleTimeout: TimeAmount
    }

    public init(manager: Manager, logger: Logger, limits: Limits) {
        self.manager = manager
        self.logger = logger
        self.limits = limits
    }

    public typealias ServerChannel = NIOAsyncChannel<NIOAsyncChannel<ByteBuffer, ByteBuffer>, Never>

    /// Binds the socket (or adopts the socket-activated fd) and returns the server channel.
    public func bind(path: String, activatedFD: CInt?, group: MultiThreadedEventLoopGroup) async throws -> ServerChannel {
        let limits = self.limits
        let bootstrap = ServerBootstrap(group: group).serverChannelOption(.backlog, value: 128)
        let initializer: @Sendable (Channel) -> EventLoopFuture<NIOAsyncChannel<ByteBuffer, ByteBuffer>> = { channel in
            channel.eventLoop.makeCompletedFuture {
                let ops = channel.pipeline.syncOperations
                try ops.addHandler(IdleStateHandler(readTimeout: limits.idleTimeout))
                try ops.addHandler(ByteToMessageHandler(NULFrameDecoder(maxMessageBytes: limits.maxMessageBytes)))
                try ops.addHandler(ConnectionGuard())
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
    public func serve(_ server: ServerChannel) async throws {
        try await withThrowingDiscardingTaskGroup { group in
            try await server.executeThenClose { inbound in
                for try await connection in inbound {
                    let count = active.add(1, ordering: .relaxed).newValue
                    if count > limits.maxConnections {
                        active.subtract(1, ordering: .relaxed)
                        logger.warning("connection refused: too many connections", metadata: ["max_connections": "\(limits.maxConnections)"])
                        connection.channel.close(promise: nil)
                        continue
                    }
                    group.addTask {
                        defer { self.active.subtract(1, ordering: .relaxed) }
                        await self.handle(connection)
                    }
                }
            }
        }
    }

    private func handle(_ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>) async {
        let provider = connection.channel as? SocketOptionProvider
        // NIO owns the descriptor, so SO_PEERCRED is read through it into the C layout.
        let raw: lockwipe_ucred? = try? await provider?.unsafeGetSocketOption(level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED)).get()
        let credentials = raw.map(PeerCredentials.init)
        do {
            try await connection.executeThenClose { inbound, outbound in
                for try await message in inbound {
                    let data = Data(message.readableBytesView)
                    guard let reply = await self.respond(to: data, credentials: credentials) else {
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

    /// Answers one message; nil for a oneway call.
    func respond(to data: Data, credentials: PeerCredentials?) async -> Reply? {
        let header: VarlinkCallHeader
        do {
            header = try VarlinkMessage.decodeHeader(data)
        } catch {
            return Reply(data: VarlinkMessage.encodeError(.invalidParameter("method", reason: "not a varlink call (JSON object with a string 'method')")), close: true)
        }
        let oneway = header.oneway ?? false
        do {
            let result = try await dispatch(header.method, data, credentials: credentials)
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

    private func dispatch(_ method: String, _ data: Data, credentials: PeerCredentials?) async throws -> Data {
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
        guard let credentials else { throw VarlinkError.notPermitted("the caller's credentials could not be read") }
        let caller = await manager.caller(credentials)

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
