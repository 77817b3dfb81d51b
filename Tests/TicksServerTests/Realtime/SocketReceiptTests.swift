import Foundation
import Testing
import TicksProtocol

@testable import TicksServer

/// Receipts sent as frames on the reader's own WebSocket (Ticks' extension):
/// the same rules, events, checks and limits as over HTTP, each answered by
/// an ack with the request's id.
@Suite("Receipts on the socket")
struct SocketReceiptTests {
    func setUp(_ server: TestServer) async throws {
        try await server.upsert("alice", "bob", "carol")
        try await server.createChannel("messaging:s", members: ["alice", "bob"])
        for index in 1...3 { try await server.send("messaging:s", id: "s\(index)", from: "alice") }
    }

    /// A live server with the usual set-up, and alice (the sender) and bob (the reader) connected.
    func withPair(_ kind: StoreKind, _ body: @Sendable (TestServer, TestSocket, TestSocket) async throws -> Void)
        async throws
    {
        try await TestServer.run(kind, .live) { server in
            try await setUp(server)
            let alice = try await TestSocket.connect(server, as: "alice")
            defer { alice.close() }
            let bob = try await TestSocket.connect(server, as: "bob")
            defer { bob.close() }
            try await body(server, alice, bob)
        }
    }

    func request(_ request: SocketReceipt.Request) throws -> String {
        String(decoding: try JSONEncoder().encode(request), as: UTF8.self)
    }

    @Test("mark_read moves the cursor and reaches the sender; the ack carries the request id and message.read", arguments: StoreKind.all)
    func markRead(kind: StoreKind) async throws {
        try await withPair(kind) { server, alice, bob in
            try await bob.send(try request(.markRead("messaging:s", upTo: "s2", requestID: "r1")))
            let ack = try await bob.next("ack")
            #expect(ack["request_id"].string == "r1")
            #expect(!ack["error"].exists)
            #expect(ack["event"]["type"].string == "message.read")
            #expect(ack["event"]["last_read_message_id"].string == "s2")
            let read = try await alice.next("message.read")
            #expect(read["user"]["id"].string == "bob" && read["last_read_message_id"].string == "s2")
            let own = try await bob.next("notification.mark_read")
            #expect(own["unread_count"].int == 1)
            let state = try #require(try await server.readState("messaging:s", of: "bob"))
            #expect(state["last_read_message_id"].string == "s2")
            #expect(state["last_delivered_message_id"].string == "s2")
            // R2: an older target is acknowledged and changes nothing.
            try await bob.send(try request(.markRead("messaging:s", upTo: "s1", requestID: "r2")))
            #expect(try await bob.next("ack")["request_id"].string == "r2")
            #expect(try await server.readState("messaging:s", of: "bob")?["last_read_message_id"].string == "s2")
        }
    }

    @Test("mark_delivered moves the delivered cursor and sends message.delivered", arguments: StoreKind.all)
    func markDelivered(kind: StoreKind) async throws {
        try await withPair(kind) { server, alice, bob in
            let entries = [SocketReceipt.DeliveredEntry(cid: "messaging:s", id: "s3")]
            try await bob.send(try request(.markDelivered(entries, requestID: "d1")))
            let ack = try await bob.next("ack")
            #expect(ack["request_id"].string == "d1" && !ack["error"].exists)
            let delivered = try await alice.next("message.delivered")
            #expect(delivered["user"]["id"].string == "bob" && delivered["last_delivered_message_id"].string == "s3")
            let state = try #require(try await server.readState("messaging:s", of: "bob"))
            #expect(state["last_delivered_message_id"].string == "s3")
            #expect(state["unread_messages"].int == 3)
        }
    }

    @Test("refusals come back in the ack as Stream's errors, and the socket stays open", arguments: StoreKind.all)
    func refusals(kind: StoreKind) async throws {
        try await TestServer.run(kind, .live) { server in
            try await setUp(server)
            let carol = try await TestSocket.connect(server, as: "carol")
            defer { carol.close() }
            let cases: [(SocketReceipt.Request, Int, Int)] = [
                (.markRead("messaging:s", upTo: nil, requestID: "x1"), 403, 17),  // not a member
                (.markRead("messaging:nope", upTo: nil, requestID: "x2"), 404, 16),
                (.markRead("nocolon", upTo: nil, requestID: "x3"), 400, 4),
                (.markDelivered([], requestID: "x4"), 400, 4),
                (.markDelivered([.init(cid: "messaging:s", id: "s1")], requestID: "x5"), 403, 17),
                (.markDelivered([.init(cid: "messaging:s", id: "a b")], requestID: "x6"), 400, 4),
            ]
            for (request, status, code) in cases {
                try await carol.send(try self.request(request))
                let ack = try await carol.next("ack")
                #expect(ack["request_id"].string == request.requestID)
                #expect(ack["error"]["StatusCode"].int == status, "\(request.requestID): \(ack)")
                #expect(ack["error"]["code"].int == code, "\(request.requestID): \(ack)")
            }
            // Not a receipt, not JSON: ignored, the connection keeps answering.
            try await carol.send("{not json")
            try await carol.send(#"[{"type":"health.check"}]"#)
            _ = try await carol.next("health.check")
            #expect(try await server.readState("messaging:s", of: "bob")?["last_read_message_id"].exists == false)
        }
    }

    @Test("receipts on a socket count against the same rate limits as over HTTP")
    func rateLimited() async throws {
        var limits = RateLimits()
        try limits.set("MarkRead=2")
        try await TestServer.run(.standard, .live, rateLimits: limits) { server in
            try await setUp(server)
            let bob = try await TestSocket.connect(server, as: "bob")
            defer { bob.close() }
            for index in 1...3 {
                try await bob.send(try request(.markRead("messaging:s", upTo: "s\(index)", requestID: "l\(index)")))
            }
            var errors: [Int?] = []
            for _ in 1...3 { errors.append(try await bob.next("ack")["error"]["code"].int) }
            #expect(errors == [nil, nil, 9])
            #expect(try await server.readState("messaging:s", of: "bob")?["last_read_message_id"].string == "s2")
            // Counted in /metrics with HTTP's refusals.
            let metrics = try await server.call(.get, "/metrics").body
            #expect(metrics.contains(#"ticks_rate_limited_total{endpoint="MarkRead"} 1"#), "\(metrics)")
        }
    }
}
