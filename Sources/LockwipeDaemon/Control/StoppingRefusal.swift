import LockwipeProtocol
import NIOCore

/// Answers a connection that the listener accepted just as the daemon began to stop, too
/// late for the accept loop to take it (`ControlServer.bind`): every request gets
/// `io.lockwipe.Manager.Stopping`, which says nothing was done and asking again is safe,
/// and the connection closes. Dropping it unanswered would lose the request, and a client
/// cannot tell a dropped request from one that was carried out.
final class StoppingRefusal: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var out = context.channel.allocator.buffer(capacity: 128)
        out.writeBytes(VarlinkMessage.encodeError(.stopping("lockwiped is stopping and did not read the request; ask again")))
        out.writeInteger(UInt8(0))
        context.writeAndFlush(NIOAny(out)).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
    }
}
