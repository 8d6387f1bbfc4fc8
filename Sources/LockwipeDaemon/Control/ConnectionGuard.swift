import LockwipeProtocol
import NIOCore

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
///
/// While the daemon stops (`ChannelShouldQuiesceEvent`, from `ControlServer.drain`), idle
/// is `quietWhileStopping`: a connection just made still sends its request and is
/// answered, one that has been quiet that long closes at once.
final class ConnectionGuard: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// How long a connection may stay quiet while the daemon stops: a client writes its
    /// request as soon as it has connected.
    static let quietWhileStopping: TimeAmount = .seconds(1)

    private let idleTimeout: TimeAmount
    /// True once the daemon has begun to stop, for a connection set up after that.
    private let stopping: @Sendable () -> Bool
    /// Requests read and not yet answered; touched on the channel's event loop only.
    private var inFlight = 0
    /// Since when nothing has been in flight (the connection opened, or its last answer).
    private var quietSince = NIODeadline.uptimeNanoseconds(0)
    private var quiescing = false
    /// The pending idle close, while no request is in flight.
    private var idleTimer: Scheduled<Void>?

    init(idleTimeout: TimeAmount, stopping: @escaping @Sendable () -> Bool = { false }) {
        self.idleTimeout = idleTimeout
        self.stopping = stopping
    }

    func handlerAdded(context: ChannelHandlerContext) {
        quiescing = stopping()
        if context.channel.isActive { startIdleTimer(context: context) }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard event is ChannelShouldQuiesceEvent else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        quiescing = true
        if inFlight == 0 { armIdleTimer(context: context) }
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

    /// Nothing is in flight from now on.
    private func startIdleTimer(context: ChannelHandlerContext) {
        quietSince = context.eventLoop.now
        armIdleTimer(context: context)
    }

    /// Closes the connection once it has been quiet for its limit, counted from `quietSince`.
    private func armIdleTimer(context: ChannelHandlerContext) {
        stopIdleTimer()
        // Cancelled whenever the handler leaves the pipeline, so holding both is fine.
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        let deadline = quietSince + (quiescing ? Self.quietWhileStopping : idleTimeout)
        idleTimer = context.eventLoop.scheduleTask(deadline: deadline) {
            let (handler, context) = bound.value
            if handler.inFlight == 0 { context.close(promise: nil) }
        }
    }

    private func stopIdleTimer() {
        idleTimer?.cancel()
        idleTimer = nil
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let tooLarge = error as? NULFrameDecoder.TooLarge {
            var out = context.channel.allocator.buffer(capacity: 128)
            out.writeBytes(
                VarlinkMessage.encodeError(
                    .invalidParameter("message", reason: "the request is larger than lockwiped's limit of \(tooLarge.limit) bytes ([control] max_message_bytes)")))
            out.writeInteger(UInt8(0))
            context.writeAndFlush(NIOAny(out), promise: nil)
            context.close(promise: nil)
            return
        }
        context.close(promise: nil)
    }
}
