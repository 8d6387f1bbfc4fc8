import LockwipeProtocol
import NIOCore

/// Splits the byte stream into NUL-terminated varlink messages, refusing any message larger
/// than the configured limit (the client is told, then disconnected).
struct NULFrameDecoder: ByteToMessageDecoder {
    typealias InboundOut = ByteBuffer
    let maxMessageBytes: Int

    struct TooLarge: Error { var limit: Int }

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        switch VarlinkFraming.next(in: buffer.readableBytesView, maxMessageBytes: maxMessageBytes) {
        case .needMore:
            return .needMoreData
        case .tooLarge:
            throw TooLarge(limit: maxMessageBytes)
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
