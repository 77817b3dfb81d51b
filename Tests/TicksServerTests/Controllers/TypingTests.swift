import Foundation
import Testing
import TicksTestSupport

@testable import TicksServer

/// docs/api.md, "Typing": `POST /channels/{type}/{id}/event` relays
/// `typing.start` and `typing.stop` to the members, stores nothing, follows
/// the type's `typing_events` and the typist's privacy, and refuses what it
/// does not relay.
@Suite("Typing events")
struct TypingTests {
    @Test("typing.start and typing.stop reach every member's connections, a thread's parent_id too", arguments: StoreKind.all)
    func relayed(kind: StoreKind) async throws {
        try await TestServer.run(kind, .live) { server in
            try await server.upsert("alice", "bob", "carol", "dave")
            try await server.createChannel("messaging:t", members: ["alice", "bob", "carol"], createdBy: "alice")
            let alice = try await TestSocket.connect(server, as: "alice")
            let bob = try await TestSocket.connect(server, as: "bob")
            let dave = try await TestSocket.connect(server, as: "dave")
            defer { [alice, bob, dave].forEach { $0.close() } }

            for prefix in ["", "/api/v2/chat"] {
                let answer = try await server.ok(
                    .post, "\(prefix)/channels/messaging/t/event", #"{"event": {"type": "typing.start"}}"#,
                    token: try await server.token("bob"))
                #expect(answer["event"]["type"].string == "typing.start")
                #expect(answer["event"]["user"]["id"].string == "bob")
                for socket in [alice, bob] {
                    let event = try await socket.next("typing.start")
                    #expect(event["user"]["id"].string == "bob" && event["cid"].string == "messaging:t")
                    #expect(event["channel_type"].string == "messaging" && event["channel_id"].string == "t")
                    #expect(event["created_at"].time != nil && !event["parent_id"].exists)
                }
            }
            // A server token names the typist; in a thread the event carries the parent.
            try await server.ok(
                .post, "/channels/messaging/t/event", #"{"event": {"type": "typing.stop", "parent_id": "p1"}, "user_id": "carol"}"#)
            let stop = try await alice.next("typing.stop")
            #expect(stop["user"]["id"].string == "carol" && stop["parent_id"].string == "p1")
            // dave is not a member: after a barrier every member saw, nothing of the channel reached him.
            try await server.send("messaging:t", id: "barrier", from: "alice")
            _ = try await bob.next("message.new")
            #expect(!dave.pending.contains { ($0["type"].string ?? "").hasPrefix("typing.") }, "\(dave.pending)")
            // Nothing stored: no sync event and no message.
            let since = ISO8601DateFormatter().string(from: Date().addingTimeInterval(-3600))
            let sync = try await server.ok(
                .post, "/sync", #"{"channel_cids": ["messaging:t"], "last_sync_at": "\#(since)", "user_id": "bob"}"#)
            #expect(sync["events"].array.contains { $0["type"].string == "message.new" }, "\(sync)")
            #expect(!sync["events"].array.contains { ($0["type"].string ?? "").hasPrefix("typing.") })
        }
    }

    @Test("a typist who keeps typing private is answered and heard by no one", arguments: StoreKind.all)
    func privateTypist(kind: StoreKind) async throws {
        try await TestServer.run(kind, .live) { server in
            try await server.upsert("alice", "bob")
            try await server.ok(
                .post, "/users",
                #"{"users": {"finn": {"id": "finn", "privacy_settings": {"typing_indicators": {"enabled": false}}}}}"#)
            try await server.createChannel("messaging:p", members: ["alice", "bob", "finn"], createdBy: "alice")
            let alice = try await TestSocket.connect(server, as: "alice")
            defer { alice.close() }
            let answer = try await server.ok(
                .post, "/channels/messaging/p/event", #"{"event": {"type": "typing.start"}}"#,
                token: try await server.token("finn"))
            #expect(answer["event"]["type"].string == "typing.start")
            try await server.ok(
                .post, "/channels/messaging/p/event", #"{"event": {"type": "typing.start"}}"#,
                token: try await server.token("bob"))
            let heard = try await alice.next("typing.start")
            // Events reach a connection in order: finn's, sent first, would have come before bob's.
            #expect(heard["user"]["id"].string == "bob")
            #expect(!alice.pending.contains { $0["type"].string == "typing.start" })
        }
    }

    /// Each refusal, with its status and code; none of them relays anything.
    static let refusals: [(name: String, path: String, body: String, user: String?, status: Int, code: Int)] = [
        ("a custom event", "/channels/messaging/r/event", #"{"event": {"type": "custom.poke"}}"#, "alice", 400, 4),
        ("a receipt event", "/channels/messaging/r/event", #"{"event": {"type": "message.read"}}"#, "alice", 400, 4),
        ("no event", "/channels/messaging/r/event", #"{}"#, "alice", 400, 4),
        ("no type", "/channels/messaging/r/event", #"{"event": {}}"#, "alice", 400, 4),
        ("a bad parent id", "/channels/messaging/r/event", #"{"event": {"type": "typing.start", "parent_id": "a b"}}"#,
         "alice", 400, 4),
        ("typing off (livestream)", "/channels/livestream/r/event", #"{"event": {"type": "typing.start"}}"#, "alice", 400, 4),
        ("not a member", "/channels/messaging/r/event", #"{"event": {"type": "typing.start"}}"#, "dave", 403, 17),
        ("acting for another", "/channels/messaging/r/event", #"{"event": {"type": "typing.start", "user_id": "bob"}}"#,
         "alice", 403, 17),
        ("no such channel", "/channels/messaging/nope/event", #"{"event": {"type": "typing.start"}}"#, "alice", 404, 16),
        ("server token naming no one", "/channels/messaging/r/event", #"{"event": {"type": "typing.start"}}"#, nil, 400, 4),
    ]

    @Test("what is not relayed is refused with Stream's error, and relays nothing", arguments: StoreKind.all)
    func refused(kind: StoreKind) async throws {
        try await TestServer.run(kind, .live) { server in
            try await server.upsert("alice", "bob", "dave")
            try await server.createChannel("messaging:r", members: ["alice", "bob"], createdBy: "alice")
            try await server.createChannel("livestream:r", members: ["alice", "bob"], createdBy: "alice")
            let bob = try await TestSocket.connect(server, as: "bob")
            defer { bob.close() }
            for refusal in Self.refusals {
                let reply = try await server.call(
                    .post, refusal.path, body: refusal.body, token: try await server.optionalToken(refusal.user))
                #expect(reply.status == refusal.status, "\(refusal.name): \(reply.body)")
                try reply.expectError(refusal.status, code: refusal.code)
            }
            try await server.send("messaging:r", id: "barrier", from: "alice")
            _ = try await bob.next("message.new")
            #expect(!bob.pending.contains { ($0["type"].string ?? "").hasPrefix("typing.") }, "\(bob.pending)")
        }
    }
}
