import NIOCore
import NIOEmbedded
import Testing

@testable import LockwipeDaemon

/// The control socket's idle rule (issue 12): idle time counts from the opening of the
/// connection or the answer to its last request; bytes that never complete a request do
/// not reset it, and a request waiting for its answer is never idle. Time is the
/// embedded event loop's, moved by the test.
@Suite struct ConnectionGuardTests {
    func connection(idle: Int64 = 3) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(NULFrameDecoder(maxMessageBytes: 1024)))
        try channel.pipeline.syncOperations.addHandler(ConnectionGuard(idleTimeout: .seconds(idle)))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return channel
    }

    @Test func tricklingBytesWithoutARequestDoesNotKeepTheConnection() throws {
        let channel = try connection()
        for byte in "{\"method\":" {
            try channel.writeInbound(ByteBuffer(string: String(byte)))
            channel.embeddedEventLoop.advanceTime(by: .milliseconds(500))
            if !channel.isActive { break }
        }
        // Ten bytes over five seconds, none completing a request: closed at three.
        #expect(!channel.isActive)
    }

    @Test func aRequestIsNotIdleUntilAnsweredAndTheTimerRestartsThen() throws {
        let channel = try connection()
        channel.embeddedEventLoop.advanceTime(by: .seconds(2))
        try channel.writeInbound(ByteBuffer(string: "{}\0"))
        #expect(try channel.readInbound(as: ByteBuffer.self) != nil)
        channel.embeddedEventLoop.advanceTime(by: .seconds(60))  // a long wipe
        #expect(channel.isActive)
        try channel.writeOutbound(ByteBuffer(string: "{\"parameters\":{}}\0"))
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(2900))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(200))
        #expect(!channel.isActive)
    }

    /// While the daemon stops (`ControlServer.drain`): a connection that has been quiet
    /// for a second closes at once, one just made gets that second to send its request,
    /// and a request read is answered before its connection closes.
    @Test func whileStoppingAQuietConnectionClosesAndARequestReadIsAnsweredFirst() throws {
        let quiet = try connection(idle: 30)
        quiet.embeddedEventLoop.advanceTime(by: .seconds(5))
        quiet.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        quiet.embeddedEventLoop.run()
        #expect(!quiet.isActive)

        let fresh = try connection(idle: 30)
        fresh.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        fresh.embeddedEventLoop.advanceTime(by: .milliseconds(500))
        #expect(fresh.isActive)
        try fresh.writeInbound(ByteBuffer(string: "{}\0"))
        #expect(try fresh.readInbound(as: ByteBuffer.self) != nil)
        fresh.embeddedEventLoop.advanceTime(by: .seconds(10))  // answering takes long
        #expect(fresh.isActive)
        try fresh.writeOutbound(ByteBuffer(string: "{\"parameters\":{}}\0"))
        fresh.embeddedEventLoop.advanceTime(by: .milliseconds(900))
        #expect(fresh.isActive)
        fresh.embeddedEventLoop.advanceTime(by: .milliseconds(200))
        #expect(!fresh.isActive)
    }

    /// A connection set up after the daemon began to stop is quiescing from the start.
    @Test func aConnectionSetUpWhileStoppingGetsTheShortLimit() throws {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(ConnectionGuard(idleTimeout: .seconds(30)) { true })
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1100))
        #expect(!channel.isActive)
    }
}
