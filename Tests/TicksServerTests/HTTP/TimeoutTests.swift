import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing

@testable import TicksServer

/// A client that connects and then says nothing, or a header a byte at a
/// time, must not hold a connection forever.
@Suite("HTTP timeouts")
struct TimeoutTests {
    static var shortTimeouts: ServerLimits {
        var limits = ServerLimits()
        limits.headerTimeout = .seconds(1)
        limits.idleTimeout = .seconds(1)
        return limits
    }

    @Test("a connection that never sends a request is closed after the header timeout")
    func silentConnection() async throws {
        try await TestServer.run(.standard, .live, limits: Self.shortTimeouts) { server in
            let connection = try RawConnection(port: #require(server.client.port))
            defer { connection.close() }
            let started = ContinuousClock.now
            #expect(await connection.waitForClose(within: .seconds(8)))
            #expect(ContinuousClock.now - started >= .milliseconds(800))
        }
    }

    @Test("a header sent a byte at a time (slowloris) is cut off at the header timeout")
    func slowHeader() async throws {
        try await TestServer.run(.standard, .live, limits: Self.shortTimeouts) { server in
            let connection = try RawConnection(port: #require(server.client.port))
            defer { connection.close() }
            let started = ContinuousClock.now
            var closed = false
            for byte in "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".utf8 + Array(repeating: UInt8(ascii: "a"), count: 100) {
                guard connection.send([byte]) else { closed = true; break }
                if await connection.waitForClose(within: .milliseconds(200)) { closed = true; break }
            }
            #expect(closed, "the server kept a connection whose header never ended")
            #expect(ContinuousClock.now - started < .seconds(8))
        }
    }

    @Test("an answered connection stays open for more requests, then closes after the idle timeout")
    func idleConnection() async throws {
        try await TestServer.run(.standard, .live, limits: Self.shortTimeouts) { server in
            let connection = try RawConnection(port: #require(server.client.port))
            defer { connection.close() }
            for _ in 0..<3 {
                #expect(connection.send(Array("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)))
                let answer = await connection.read(within: .seconds(5))
                #expect(answer.hasPrefix("HTTP/1.1 200"), "\(answer)")
                try await Task.sleep(for: .milliseconds(300))
            }
            #expect(await connection.waitForClose(within: .seconds(8)))
        }
    }
}
