import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Logging
import Testing

@testable import TicksServer

@Suite("Slow connections")
struct SlowConnectionTests {
    @Test("a connection whose buffer fills is closed; the others get every frame")
    func hubClosesOnlyTheSlowOne() async throws {
        let hub = ConnectionHub(bufferCapacity: 4, metrics: ServerMetrics(), logger: Logger(label: "test"))
        let (slow, slowFrames) = hub.register(userID: "slow")
        let (fast, fastFrames) = hub.register(userID: "fast")
        let reader = Task {
            var received: [String] = []
            for await frame in fastFrames {
                received.append(frame)
                if received.count == 10 { break }
            }
            return received
        }
        for index in 0..<10 {
            hub.send("frame \(index)", to: ["slow", "fast"])
            // Let the fast reader keep up; the slow one never reads.
            try await Task.sleep(for: .milliseconds(1))
        }
        #expect(slow.isOverflowed)
        #expect(!fast.isOverflowed)
        #expect(await reader.value == (0..<10).map { "frame \($0)" })
        // Once closed, the slow connection takes nothing more.
        #expect(hub.send("later", to: ["slow"]) == 0)
        withExtendedLifetime(slowFrames) {}
    }

    @Test("over a real socket: a client that stops reading is disconnected, a reading one is not slowed")
    func liveSlowClient() async throws {
        try await TestServer.run(.standard, .live, bufferCapacity: 8) { server in
            try await server.upsert("alice", "bob", "sloth")
            try await server.createChannel("messaging:s", members: ["alice", "bob", "sloth"])
            let sloth = try RawNonReadingClient(port: #require(server.client.port), token: await server.token("sloth"), userID: "sloth")
            defer { sloth.close() }
            let bob = try await TestSocket.connect(server, as: "bob")
            defer { bob.close() }
            // Wait until the raw client is registered.
            while server.services.hub.connectionCount < 2 { try await Task.sleep(for: .milliseconds(5)) }
            // Big messages fill the socket buffers quickly; then the 8-frame buffer overflows.
            let text = String(repeating: "z", count: 4900)
            var sent = 0
            while sent < 2000 && server.services.hub.connectionCount == 2 {
                try await server.send("messaging:s", id: "s\(sent)", from: "alice", text: text)
                sent += 1
            }
            #expect(server.services.hub.connectionCount == 1, "the slow client is still connected after \(sent) messages")
            for index in 0..<sent {
                #expect(try await bob.next("message.new")["message"]["id"].string == "s\(index)")
            }
        }
    }
}

/// A WebSocket client that completes the handshake and then never reads, with
/// a tiny receive buffer: the slowest client there is.
struct RawNonReadingClient {
    let descriptor: Int32

    init(port: Int, token: String, userID: String) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(descriptor >= 0)
        var size: Int32 = 4096
        setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port)).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        try #require(connected == 0)
        let json = #"{"user_id":"\#(userID)"}"#.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let request = """
            GET /connect?api_key=\(TestKeys.apiKey)&json=\(json)&authorization=\(token) HTTP/1.1\r
            Host: 127.0.0.1\r
            Upgrade: websocket\r
            Connection: Upgrade\r
            Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r
            Sec-WebSocket-Version: 13\r
            \r

            """
        let bytes = Array(request.utf8)
        try #require(write(descriptor, bytes, bytes.count) == bytes.count)
        // Read the 101 answer and the first frame, then stop reading for good.
        var buffer = [UInt8](repeating: 0, count: 1024)
        let received = read(descriptor, &buffer, buffer.count)
        try #require(received > 0)
        try #require(String(decoding: buffer[..<received], as: UTF8.self).hasPrefix("HTTP/1.1 101"))
    }

    func close() {
        _ = Glibc.close(descriptor)
    }
}
