import NIOCore
import NIOEmbedded
import Testing

@testable import TicksServer

/// `FlushCoalescer` on an `EmbeddedChannel`, whose loop runs its queued
/// tasks only when the test says: what it flushes, and when.
@Suite("Flush coalescing")
struct FlushCoalescerTests {
    /// Counts the flushes and closes that reach the socket, in order.
    final class Socket: ChannelOutboundHandler {
        typealias OutboundIn = IOData
        var operations: [String] = []

        func flush(context: ChannelHandlerContext) {
            operations.append("flush")
            context.flush()
        }

        func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
            operations.append("close")
            context.close(mode: mode, promise: promise)
        }
    }

    static func channel() throws -> (EmbeddedChannel, Socket) {
        let socket = Socket()
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandlers([socket, FlushCoalescer()])
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return (channel, socket)
    }

    static func frame(_ text: String, to channel: EmbeddedChannel) {
        channel.writeAndFlush(ByteBuffer(string: text), promise: nil)
    }

    @Test("frames each written and flushed within one turn of the loop go out with one flush, at the turn's end")
    func oneFlushPerTurn() throws {
        let (channel, socket) = try Self.channel()
        for text in ["read", "delivered", "read by all"] { Self.frame(text, to: channel) }
        #expect(socket.operations.isEmpty)
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil, "nothing leaves before the turn ends")

        channel.embeddedEventLoop.run()
        #expect(socket.operations == ["flush"])
        var sent: [String] = []
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { sent.append(String(buffer: buffer)) }
        #expect(sent == ["read", "delivered", "read by all"])

        // The next turn's frames get a flush of their own.
        Self.frame("next", to: channel)
        channel.embeddedEventLoop.run()
        #expect(socket.operations == ["flush", "flush"])
        #expect(try channel.readOutbound(as: ByteBuffer.self).map { String(buffer: $0) } == "next")
    }

    @Test("a close flushes what is waiting first, so a close frame written just before it goes out")
    func closeFlushesFirst() throws {
        let (channel, socket) = try Self.channel()
        Self.frame("close frame", to: channel)
        _ = channel.close()
        #expect(socket.operations == ["flush", "close"])
        channel.embeddedEventLoop.run()
        #expect(socket.operations == ["flush", "close"], "the queued flush does not run again")
    }

    @Test("a write without a flush is not flushed by the coalescer")
    func writeAloneWaits() throws {
        let (channel, socket) = try Self.channel()
        channel.write(ByteBuffer(string: "unflushed"), promise: nil)
        channel.embeddedEventLoop.run()
        #expect(socket.operations.isEmpty)
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
    }
}
