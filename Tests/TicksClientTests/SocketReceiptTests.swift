import Foundation
import Testing
import TicksClient
import TicksTestSupport

/// The SDK sends receipts as frames on the socket it holds (Ticks'
/// extension), HTTP when it may not, and surfaces refusals either way.
@Suite("Receipts over the open socket")
struct SocketReceiptClientTests {
    let channel = ChannelID(type: "messaging", id: "sock")

    func setUp(_ server: LiveServer) async throws {
        try await server.upsert("alice", "bob", "carol")
        try await server.createChannel("messaging:sock", members: ["alice", "bob"])
        try await server.send("messaging:sock", id: "k1", from: "alice")
        try await server.send("messaging:sock", id: "k2", from: "alice")
    }

    @Test("mark read and delivered go as frames on the socket, not as HTTP requests")
    func onTheSocket() async throws {
        try await LiveServer.with { server in
            try await setUp(server)
            let bob = try await server.connected("bob")
            let sock = await bob.channel(channel)
            try await sock.load()
            try await sock.markRead(upTo: "k1")
            #expect(try await sock.state.unreadCount == 1)
            #expect(server.socketReceipts("mark_read") == 1)
            #expect(server.requestCount(route: "/channels/{type}/{id}/read") == 0)
            // The delivered mark of k2 went the same way.
            _ = try await eventually("k2 delivered") {
                try await server.readState("messaging:sock", of: "bob")?["last_delivered_message_id"].string == "k2"
                    ? true : nil
            }
            #expect(server.socketReceipts("mark_delivered") >= 1)
            #expect(server.requestCount(route: "/channels/delivered") == 0)
            #expect(try await server.readState("messaging:sock", of: "bob")?["last_read_message_id"].string == "k1")
            await bob.disconnect()
        }
    }

    @Test("with receiptsOnSocket off, receipts are HTTP requests, as with any Stream server")
    func overHTTP() async throws {
        try await LiveServer.with { server in
            try await setUp(server)
            let bob = try await server.connected("bob") { $0.receiptsOnSocket = false }
            let sock = await bob.channel(channel)
            try await sock.load()
            try await sock.markRead()
            #expect(server.requestCount(route: "/channels/{type}/{id}/read") == 1)
            #expect(server.socketReceipts("mark_read") == 0)
            #expect(try await server.readState("messaging:sock", of: "bob")?["last_read_message_id"].string == "k2")
            await bob.disconnect()
        }
    }

    @Test("a receipt the server refuses on the socket throws its error, as over HTTP")
    func refused() async throws {
        try await LiveServer.with { server in
            try await setUp(server)
            let carol = try await server.connected("carol")
            let sock = await carol.channel(channel)
            await #expect(throws: TicksClientError.self) { try await sock.markRead() }
            #expect(server.socketReceipts("mark_read", refused: true) == 1)
            await carol.disconnect()
        }
    }
}
