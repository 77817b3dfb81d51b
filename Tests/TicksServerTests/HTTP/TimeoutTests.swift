import Foundation
#if canImport(Glibc)
import Glibc
#endif
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@testable import TicksServer

/// A client that connects and then says nothing, or a header a byte at a
/// time, must not hold a connection forever.
///
/// The header and idle timeouts are NIO's, scheduled on the connection's
/// event loop: the header timeout's rules are tested on an `EmbeddedChannel`
/// whose loop's clock the test advances; over real sockets the tests wait
/// for the server to act with generous deadlines, and assert only that it
/// did not act too early, never how fast it was.
@Suite("HTTP timeouts")
struct TimeoutTests {
    /// A header timeout short enough for a test, and an idle timeout so much
    /// longer that a loaded machine's pauses between the test's bytes never
    /// reach it: a close within the header phase is the header timeout's.
    static var shortHeaderTimeout: ServerLimits {
        var limits = ServerLimits.patient
        limits.headerTimeout = .seconds(3)
        limits.idleTimeout = .seconds(60)
        return limits
    }

    // MARK: On the event loop's clock

    /// The pipeline's front as the server builds it: the guard, the HTTP
    /// decoder, and the responder that tells the guard a head arrived.
    static func guardedChannel(headerTimeout: TimeAmount = .seconds(10)) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandlers([
            ConnectionGuard(headerTimeout: headerTimeout),
            ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .forwardBytes)),
            MalformedRequestResponder(),
        ])
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return channel
    }

    static func write(_ text: String, to channel: EmbeddedChannel) throws {
        try channel.writeInbound(ByteBuffer(string: text))
    }

    @Test("header timeout: a connection that sends nothing is closed when it passes on the loop's clock, not before")
    func silentOnLoopClock() throws {
        let channel = try Self.guardedChannel()
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(9_999))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(!channel.isActive)
    }

    @Test("header timeout: a head sent a byte at a time is cut off when it passes; bytes do not restart it")
    func slowlorisOnLoopClock() throws {
        let channel = try Self.guardedChannel()
        for byte in "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaaaaaa".utf8 {
            guard channel.isActive else { break }
            try channel.writeInbound(ByteBuffer(bytes: [byte]))
            channel.embeddedEventLoop.advanceTime(by: .milliseconds(500))
        }
        // 51 bytes half a second apart: 25 s of a head that never ended, cut off at 10 s.
        #expect(!channel.isActive)
    }

    @Test("header timeout: once the first head has arrived it no longer applies, however slow the rest")
    func headArrivedOnLoopClock() throws {
        let channel = try Self.guardedChannel()
        channel.embeddedEventLoop.advanceTime(by: .seconds(9))
        try Self.write("POST /users HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10\r\n\r\n", to: channel)
        channel.embeddedEventLoop.advanceTime(by: .seconds(60))
        #expect(channel.isActive)
        try Self.write("0123456789", to: channel)
        channel.embeddedEventLoop.advanceTime(by: .seconds(60))
        #expect(channel.isActive)
        _ = try? channel.finish()
    }

    // MARK: Over real sockets

    @Test("a connection that never sends a request is closed after the header timeout")
    func silentConnection() async throws {
        try await TestServer.run(.standard, .live, limits: Self.shortHeaderTimeout) { server in
            let connection = try RawConnection(port: #require(server.livePort))
            defer { connection.close() }
            let started = ContinuousClock.now
            #expect(await connection.waitForClose(within: .seconds(50)))
            // Not before the timeout (how long after it, a loaded machine decides).
            #expect(ContinuousClock.now - started >= .milliseconds(2500))
        }
    }

    @Test("a header sent a byte at a time (slowloris) is cut off at the header timeout")
    func slowHeader() async throws {
        try await TestServer.run(.standard, .live, limits: Self.shortHeaderTimeout) { server in
            let connection = try RawConnection(port: #require(server.livePort))
            defer { connection.close() }
            var closed = false
            // About 250 bytes 200 ms apart: a head that takes 50 s or more, never 60 s without a byte.
            let head =
                Array("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".utf8)
                + Array(repeating: UInt8(ascii: "a"), count: 200)
            for byte in head {
                guard connection.send([byte]) else { closed = true; break }
                if await connection.waitForClose(within: .milliseconds(200)) { closed = true; break }
            }
            #expect(closed, "the server kept a connection whose header never ended")
        }
    }

    @Test("a first request slower to arrive whole than the header timeout is answered: its head came in time")
    func slowBodyAfterHead() async throws {
        try await TestServer.run(.standard, .live, limits: Self.shortHeaderTimeout) { server in
            let connection = try RawConnection(port: #require(server.livePort))
            defer { connection.close() }
            let body = Array(#"{"users": {"slow-body": {"id": "slow-body"}}}"#.utf8)
            let lines = [
                "POST /users?api_key=\(TestKeys.apiKey) HTTP/1.1", "Host: 127.0.0.1",
                "Authorization: \(server.serverToken)", "stream-auth-type: jwt", "Content-Type: application/json",
                "Content-Length: \(body.count)", "", "",
            ]
            let head: String = lines.joined(separator: "\r\n")
            #expect(connection.send(Array(head.utf8)))
            // The body in 8 pieces over at least 4 s: past the 3 s header timeout (a slower machine only
            // makes it later), never near the 60 s idle timeout between two pieces.
            let size = body.count / 8 + 1
            let pieces = stride(from: 0, to: body.count, by: size).map { Array(body[$0..<min($0 + size, body.count)]) }
            for piece in pieces {
                try await Task.sleep(for: .milliseconds(500))
                #expect(connection.send(piece), "the server closed a connection whose head had arrived")
            }
            let answer = await connection.read(within: .seconds(50))
            #expect(answer.hasPrefix("HTTP/1.1 2"), "\(answer.prefix(300))")
        }
    }

    @Test("an answered connection stays open for more requests, then closes after the idle timeout")
    func idleConnection() async throws {
        var limits = ServerLimits()
        limits.headerTimeout = .seconds(3)
        // Long enough that a loaded machine's pause between two requests does not reach it.
        limits.idleTimeout = .seconds(10)
        try await TestServer.run(.standard, .live, limits: limits) { server in
            let connection = try RawConnection(port: #require(server.livePort))
            defer { connection.close() }
            var lastSent = ContinuousClock.now
            for _ in 0..<3 {
                lastSent = .now
                #expect(connection.send(Array("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)))
                let answer = await connection.read(within: .seconds(50))
                #expect(answer.hasPrefix("HTTP/1.1 200"), "\(answer)")
                try await Task.sleep(for: .milliseconds(300))
            }
            // The idle time runs from the server's last read, which came after the last request was sent:
            // not before the timeout (how long after it, a loaded machine decides).
            #expect(await connection.waitForClose(within: .seconds(60)))
            #expect(ContinuousClock.now - lastSent >= .milliseconds(9_900))
        }
    }
}
