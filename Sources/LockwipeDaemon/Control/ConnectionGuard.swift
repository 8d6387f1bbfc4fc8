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
