import Foundation
import Testing
import TicksTestSupport

@testable import TicksServer

/// Requests that are not HTTP the parser accepts get Stream's error body, on
/// a new connection and on a reused one, and the server keeps serving.
@Suite("Malformed HTTP")
struct MalformedRequestTests {
    static let health = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"

    /// Sends `request` on a new connection; what comes back until `responses`
    /// whole answers have, or the server closes it.
    func exchange(_ request: String, port: Int, responses: Int = 1) async throws -> String {
        let connection = try RawConnection(port: port)
        defer { connection.close() }
        #expect(connection.send(Array(request.utf8)))
        return await connection.read(within: .seconds(50), responses: responses)
    }

    func expectStreamError(_ answer: String, message: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(answer.hasPrefix("HTTP/1.1 400"), "\(answer.prefix(300))", sourceLocation: sourceLocation)
        #expect(answer.lowercased().contains("content-type: application/json"), sourceLocation: sourceLocation)
        let body = try #require(answer.components(separatedBy: "\r\n\r\n").last, sourceLocation: sourceLocation)
        let error = try JSON(parsing: body)
        #expect(error["code"].int == 4, sourceLocation: sourceLocation)
        #expect(error["StatusCode"].int == 400, sourceLocation: sourceLocation)
        #expect(error["message"].string?.contains(message) == true, "\(body)", sourceLocation: sourceLocation)
    }

    @Test("a URL and headers over 80 KiB, alone or behind an answered request, get 400 with Stream's body")
    func oversizedHead() async throws {
        try await TestServer.run(.standard, .live) { server in
            let port = try #require(server.livePort)
            let huge = "GET /health?x=\(String(repeating: "a", count: 90_000)) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
            try expectStreamError(try await exchange(huge, port: port), message: "larger than 80 KiB")
            // Pipelined behind a good request: that one is answered first, then the 400.
            let both = try await exchange(Self.health + huge, port: port, responses: 2)
            #expect(both.hasPrefix("HTTP/1.1 200"), "\(both.prefix(300))")
            let second = try #require(both.range(of: "HTTP/1.1 400"), "\(both.prefix(600))")
            try expectStreamError(String(both[second.lowerBound...]), message: "larger than 80 KiB")
            #expect(try await exchange(Self.health, port: port).hasPrefix("HTTP/1.1 200"))
        }
    }

    @Test("a request line or header that is not HTTP gets 400 with Stream's body")
    func garbage() async throws {
        try await TestServer.run(.standard, .live) { server in
            let port = try #require(server.livePort)
            try expectStreamError(try await exchange("BLAH\r\n\r\n", port: port), message: "not valid HTTP/1.1")
            try expectStreamError(
                try await exchange("GET /he alth HTTP/1.1\r\nHost: x\r\n\r\n", port: port), message: "not valid HTTP/1.1")
            try expectStreamError(
                try await exchange("GET /health HTTP/1.1\r\nBad Header\r\n\r\n", port: port), message: "not valid HTTP/1.1")
            #expect(try await exchange(Self.health, port: port).hasPrefix("HTTP/1.1 200"))
        }
    }

    @Test("a chunked body that breaks HTTP is the client's error (400), not the server's (500)")
    func brokenChunkedBody() async throws {
        try await TestServer.run(.standard, .live) { server in
            let port = try #require(server.livePort)
            let request = """
                POST /users?api_key=\(TestKeys.apiKey) HTTP/1.1\r
                Host: 127.0.0.1\r
                Authorization: \(server.serverToken)\r
                Content-Type: application/json\r
                Transfer-Encoding: chunked\r
                \r
                5\r
                {"use\r
                ZZ\r

                """
            try expectStreamError(try await exchange(request, port: port), message: "not valid HTTP/1.1")
            let metrics = try await exchange(
                "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", port: port)
            #expect(metrics.contains(#"ticks_http_errors_total{class="4xx"} 1"#), "\(metrics)")
            #expect(!metrics.contains(#"ticks_http_errors_total{class="5xx"} 1"#))
        }
    }

    @Test("Upgrade: websocket on a path other than /connect gets 400 with Stream's body")
    func upgradeElsewhere() async throws {
        try await TestServer.run(.standard, .live) { server in
            let port = try #require(server.livePort)
            let request = """
                GET /health HTTP/1.1\r
                Host: 127.0.0.1\r
                Upgrade: websocket\r
                Connection: Upgrade\r
                Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r
                Sec-WebSocket-Version: 13\r
                \r

                """
            try expectStreamError(try await exchange(request, port: port), message: "only /connect")
            // /connect itself still upgrades.
            let socket = try await TestSocket.connect(server, as: "alice")
            socket.close()
        }
    }
}
