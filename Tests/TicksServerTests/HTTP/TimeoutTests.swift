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
    /// Short enough for a test, long enough that a loaded machine (the
    /// whole suite in parallel on two cores) does not trip them by accident.
    static var shortTimeouts: ServerLimits {
        var limits = ServerLimits()
        limits.headerTimeout = .seconds(3)
        limits.idleTimeout = .seconds(3)
        return limits
    }

    @Test("a connection that never sends a request is closed after the header timeout")
    func silentConnection() async throws {
        try await TestServer.run(.standard, .live, limits: Self.shortTimeouts) { server in
            let connection = try RawConnection(port: #require(server.client.port))
            defer { connection.close() }
            let started = ContinuousClock.now
            #expect(await connection.waitForClose(within: .seconds(20)))
            #expect(ContinuousClock.now - started >= .milliseconds(2500))
        }
    }

    @Test("a header sent a byte at a time (slowloris) is cut off at the header timeout")
    func slowHeader() async throws {
        try await TestServer.run(.standard, .live, limits: Self.shortTimeouts) { server in
            let connection = try RawConnection(port: #require(server.client.port))
            defer { connection.close() }
            let started = ContinuousClock.now
            var closed = false
            for byte in "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".utf8 + Array(repeating: UInt8(ascii: "a"), count: 200) {
                guard connection.send([byte]) else { closed = true; break }
                if await connection.waitForClose(within: .milliseconds(200)) { closed = true; break }
            }
            #expect(closed, "the server kept a connection whose header never ended")
            #expect(ContinuousClock.now - started < .seconds(20))
        }
    }

    @Test("a first request slower to arrive whole than the header timeout is answered: its head came in time")
    func slowBodyAfterHead() async throws {
        try await TestServer.run(.standard, .live, limits: Self.shortTimeouts) { server in
            let connection = try RawConnection(port: #require(server.client.port))
            defer { connection.close() }
            let body = Array(#"{"users": {"slow-body": {"id": "slow-body"}}}"#.utf8)
            let lines = [
                "POST /users?api_key=\(TestKeys.apiKey) HTTP/1.1", "Host: 127.0.0.1",
                "Authorization: \(server.serverToken)", "stream-auth-type: jwt", "Content-Type: application/json",
                "Content-Length: \(body.count)", "", "",
            ]
            let head: String = lines.joined(separator: "\r\n")
            #expect(connection.send(Array(head.utf8)))
            // The body in 8 pieces over 4 s: past the 3 s header timeout, never 3 s without a byte (the idle timeout).
            let size = body.count / 8 + 1
            let pieces = stride(from: 0, to: body.count, by: size).map { Array(body[$0..<min($0 + size, body.count)]) }
            for piece in pieces {
                try await Task.sleep(for: .milliseconds(500))
                #expect(connection.send(piece), "the server closed a connection whose head had arrived")
            }
            let answer = await connection.read(within: .seconds(10))
            #expect(answer.hasPrefix("HTTP/1.1 2"), "\(answer.prefix(300))")
        }
    }

    @Test("an answered connection stays open for more requests, then closes after the idle timeout")
    func idleConnection() async throws {
        try await TestServer.run(.standard, .live, limits: Self.shortTimeouts) { server in
            let connection = try RawConnection(port: #require(server.client.port))
            defer { connection.close() }
            var lastSent = ContinuousClock.now
            for _ in 0..<3 {
                lastSent = .now
                #expect(connection.send(Array("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)))
                let answer = await connection.read(within: .seconds(5))
                #expect(answer.hasPrefix("HTTP/1.1 200"), "\(answer)")
                try await Task.sleep(for: .milliseconds(300))
            }
            // The idle time runs from the server's last read, which came after the last request was sent.
            #expect(await connection.waitForClose(within: .seconds(20)))
            #expect(ContinuousClock.now - lastSent >= .milliseconds(2900))
        }
    }
}
