import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Logging
import NIOCore
import Synchronization
import Testing
import TicksTestSupport

@testable import TicksServer

@Suite("Slow connections")
struct SlowConnectionTests {
    func hub(bufferBytes: Int, maxConnectionsPerUser: Int = 50) -> ConnectionHub {
        ConnectionHub(
            bufferBytes: bufferBytes, maxConnectionsPerUser: maxConnectionsPerUser, metrics: ServerMetrics(),
            logger: Logger(label: "test"))
    }

    static func text(_ frame: OutboundFrame) -> String { String(buffer: frame.buffer) }

    @Test("a connection whose buffer passes its bound in bytes is closed; the others get every frame")
    func hubClosesOnlyTheSlowOne() async throws {
        // Room for four frames of 100 bytes (128 bytes of storage) with their bookkeeping, not five.
        let hub = hub(bufferBytes: 4 * (128 + 64))
        let (slow, slowFrames) = try hub.register(userID: "slow")
        let (fast, fastFrames) = try hub.register(userID: "fast")
        final class Count: Sendable { let value = Atomic<Int>(0) }
        let taken = Count()
        let reader = Task {
            var received: [String] = []
            for await frame in fastFrames {
                fast.taken(frame)
                received.append(Self.text(frame))
                taken.value.store(received.count, ordering: .relaxed)
                if received.count == 10 { break }
            }
            return received
        }
        let frames = (0..<10).map { String(format: "frame %02d", $0) + String(repeating: ".", count: 92) }
        for (index, frame) in frames.enumerated() {
            hub.send(EncodedEvent(Data(frame.utf8)), to: ["slow", "fast"])
            #expect(slow.isOverflowed == (index >= 4), "after frame \(index)")
            // The fast reader keeps up (however long a loaded machine takes it); the slow one never reads.
            try await eventually { taken.value.load(ordering: .relaxed) == index + 1 }
        }
        #expect(slow.isOverflowed)
        #expect(!fast.isOverflowed)
        #expect(await reader.value == frames)
        // Once closed, the slow connection takes nothing more.
        #expect(hub.send(EncodedEvent(Data("later".utf8)), to: ["slow"]) == 0)
        withExtendedLifetime(slowFrames) {}
    }

    @Test("a frame counts the memory it holds: a 600 KB frame takes 1 MiB of storage, and 2 MiB hold one, not two")
    func boundIsInBytes() async throws {
        let hub = hub(bufferBytes: 2 << 20)
        let (slow, frames) = try hub.register(userID: "slow")
        let big = EncodedEvent(Data(repeating: UInt8(ascii: "x"), count: 600_000))
        #expect(try #require(big.frame(for: "slow")).allocatedBytes == 1 << 20)
        #expect(hub.send(big, to: ["slow"]) == 1)
        #expect(!slow.isOverflowed)
        #expect(hub.send(big, to: ["slow"]) == 0)
        #expect(slow.isOverflowed)
        withExtendedLifetime(frames) {}
    }

    @Test("an event is encoded once: every recipient's frame shares its bytes, only the unread counts are their own")
    func framesShareTheirBytes() async throws {
        let hub = hub(bufferBytes: 4 << 20)
        let users = (0..<20).map { "u\($0)" }
        let streams = try users.map { try hub.register(userID: $0) }
        let object = Data(#"{"type":"message.new","message":{"text":"\#(String(repeating: "a", count: 100_000))"}}"#.utf8)
        let event = try EncodedEvent(
            object: object,
            counts: Dictionary(uniqueKeysWithValues: users.map { ($0, UnreadEnding(channel: 1, messages: 3, channels: 2)) }))
        #expect(hub.send(event, to: users) == users.count)
        var storages: Set<UInt> = []
        for (_, frames) in streams {
            var iterator = frames.makeAsyncIterator()
            let frame = try #require(await iterator.next())
            frame.shared.withUnsafeReadableBytes { storages.insert(UInt(bitPattern: $0.baseAddress)) }
            let decoded = try JSON(parsing: Self.text(frame))
            #expect(decoded["unread_count"].int == 1)
            #expect(decoded["total_unread_count"].int == 3)
            #expect(decoded["unread_channels"].int == 2)
            #expect(decoded["message"]["text"].string?.count == 100_000)
        }
        // One copy of the 100 KB message for twenty connections.
        #expect(storages.count == 1)
    }

    @Test("a user may hold maxConnectionsPerUser connections; the next is refused until one closes")
    func connectionCapPerUser() async throws {
        let hub = hub(bufferBytes: 1 << 20, maxConnectionsPerUser: 3)
        let held = try (0..<3).map { _ in try hub.register(userID: "alice") }
        #expect(throws: ConnectionHub.RegistrationError.tooManyConnections(limit: 3)) {
            try hub.register(userID: "alice")
        }
        _ = try hub.register(userID: "bob")
        hub.unregister(held[0].outbox)
        _ = try hub.register(userID: "alice")
    }

    @Test("shutting down: every connection is ended, no new one is taken, and the wait ends when the last closes")
    func shutDownEndsAndWaits() async throws {
        let hub = hub(bufferBytes: 1 << 20, maxConnectionsPerUser: 3)
        let clock = ManualClock()
        let open = try (0..<2).map { _ in try hub.register(userID: "alice") }
        async let closedInTime = hub.shutDown(within: .seconds(5), time: clock.timeSource)
        // Each connection's frames end, as its handler sees when the node shuts down.
        for connection in open {
            for await _ in connection.frames {}
        }
        #expect(throws: ConnectionHub.RegistrationError.shuttingDown) { try hub.register(userID: "bob") }
        hub.unregister(open[0].outbox)
        hub.unregister(open[1].outbox)
        #expect(await closedInTime)
        #expect(hub.connectionCount == 0)
    }

    @Test("shutting down: a connection that never closes holds the wait only until its limit")
    func shutDownGivesUp() async throws {
        let hub = hub(bufferBytes: 1 << 20, maxConnectionsPerUser: 3)
        let clock = ManualClock()
        let stuck = try hub.register(userID: "alice")
        async let closedInTime = hub.shutDown(within: .seconds(5), time: clock.timeSource)
        for await _ in stuck.frames {}
        try await eventually { clock.sleepers == 1 }
        clock.advance(by: .seconds(5))
        #expect(await closedInTime == false)
        #expect(hub.connectionCount == 1)
    }

    @Test("over a real socket: a client that stops reading is disconnected, a reading one is not slowed")
    func liveSlowClient() async throws {
        var limits = ServerLimits.patient
        limits.connectionBufferBytes = 64 * 1024
        try await TestServer.run(.standard, .live, limits: limits, rateLimits: .off) { server in
            try await server.upsert("alice", "bob", "sloth")
            try await server.createChannel("messaging:s", members: ["alice", "bob", "sloth"])
            let sloth = try RawNonReadingClient(port: #require(server.livePort), token: await server.token("sloth"), userID: "sloth")
            defer { sloth.close() }
            let bob = try await TestSocket.connect(server, as: "bob")
            defer { bob.close() }
            // Wait until the raw client is registered.
            while server.services.hub.connectionCount < 2 { try await Task.sleep(for: .milliseconds(5)) }
            // Big messages fill the socket buffers quickly; then the 64 KiB buffer overflows.
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
    let connection: RawConnection

    init(port: Int, token: String, userID: String) throws {
        connection = try RawConnection(port: port, receiveBufferBytes: 4096)
        try #require(connection.send(RawConnection.connectRequest(userID: userID, token: token)))
        // Read the 101 answer and the first frame, then stop reading for good.
        var buffer = [UInt8](repeating: 0, count: 1024)
        let received = read(connection.descriptor, &buffer, buffer.count)
        try #require(received > 0)
        try #require(String(decoding: buffer[..<received], as: UTF8.self).hasPrefix("HTTP/1.1 101"))
    }

    func close() {
        connection.close()
    }
}
