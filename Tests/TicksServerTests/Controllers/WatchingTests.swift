import Foundation
import Testing
import TicksTestSupport

@testable import TicksServer

/// docs/events.md, "Watching": a query with `watch: true` and a socket's
/// `connection_id` makes that connection a watcher; it then hears only the
/// channels it watches, and `notification.message_new` for its user's other
/// channels. A connection that never watched hears everything, as before.
@Suite("Watching")
struct WatchingTests {
    /// Whether `socket` holds a frame of `type` for `cid` (not taken yet).
    static func holds(_ socket: TestSocket, _ type: String, in cid: String) -> Bool {
        socket.pending.contains { $0["type"].string == type && $0["cid"].string == cid }
    }

    @Test(
        "watchers hear their channels, the user's other watching connections notification.message_new, one that never watched everything",
        arguments: StoreKind.all)
    func audiences(kind: StoreKind) async throws {
        try await TestServer.run(kind, .live) { server in
            try await server.upsert("alice", "bob", "carol")
            try await server.createChannel("messaging:w", members: ["alice", "bob", "carol"], createdBy: "alice")
            try await server.createChannel("messaging:x", members: ["alice", "bob"], createdBy: "alice")
            let alice = try await TestSocket.connect(server, as: "alice")
            let watcher = try await TestSocket.connect(server, as: "bob")
            let other = try await TestSocket.connect(server, as: "bob")
            let plain = try await TestSocket.connect(server, as: "bob")
            defer { [alice, watcher, other, plain].forEach { $0.close() } }
            let bob = try await server.token("bob")
            let watcherID = try #require(watcher.hello?["connection_id"].string)
            let otherID = try #require(other.hello?["connection_id"].string)
            let plainID = try #require(plain.hello?["connection_id"].string)

            // The channel query, its connection id in the query string (Stream's JS SDK).
            let state = try await server.ok(
                .post, "/channels/messaging/w/query?connection_id=\(watcherID)",
                #"{"state": true, "watch": true, "presence": false, "watchers": {"limit": 10}}"#, token: bob)
            // alice never watched (she hears w), bob watches it; carol is not connected.
            #expect(state["watchers"].array.compactMap { $0["id"].string } == ["alice", "bob"], "\(state)")
            #expect(state["watcher_count"].int == 2)
            // Query channels, the id in the body.
            let list = try await server.ok(
                .post, "/channels",
                #"{"filter_conditions": {"cid": "messaging:x"}, "watch": true, "connection_id": "\#(otherID)"}"#,
                token: bob)
            #expect(list["channels"].array.count == 1)
            // Someone else's connection cannot be made to watch: plain stays a connection that hears all.
            try await server.ok(
                .post, "/channels/messaging/x/query?connection_id=\(plainID)", #"{"watch": true}"#,
                token: try await server.token("alice"))

            try await server.send("messaging:w", id: "m1", from: "alice")
            #expect(try await watcher.next("message.new")["message"]["id"].string == "m1")
            #expect(try await plain.next("message.new")["message"]["id"].string == "m1")
            #expect(try await alice.next("message.new")["message"]["id"].string == "m1")
            let notice = try await other.next("notification.message_new")
            #expect(notice["cid"].string == "messaging:w" && notice["message"]["id"].string == "m1")
            #expect(notice["channel"]["id"].string == "w" && notice["channel"]["type"].string == "messaging")
            #expect(notice["channel"]["config"]["name"].string == "messaging")
            #expect(notice["channel"]["last_message_at"].time != nil)
            #expect(notice["unread_count"].int == 1 && notice["total_unread_count"].int == 1)
            #expect(notice["unread_channels"].int == 1 && notice["user"]["id"].string == "alice")

            // A channel's other events: to w's watcher and to plain, not to other.
            try await server.ok(
                .post, "/channels/messaging/w/event", #"{"event": {"type": "typing.start"}}"#,
                token: try await server.token("carol"))
            _ = try await watcher.next("typing.start")
            _ = try await plain.next("typing.start")
            try await server.ok(.post, "/channels/messaging/w/read", "{}", token: try await server.token("carol"))
            _ = try await watcher.next("message.read")
            _ = try await plain.next("message.read")
            // A reply shown only in its thread tells no one who is not watching.
            try await server.ok(
                .post, "/channels/messaging/w/message",
                #"{"message": {"id": "r1", "text": "re", "parent_id": "m1"}}"#, token: try await server.token("alice"))
            #expect(try await watcher.next("message.new")["message"]["id"].string == "r1")
            // The barrier: a message in x, which other watches and watcher does not.
            try await server.send("messaging:x", id: "x1", from: "alice")
            #expect(try await other.next("message.new")["message"]["id"].string == "x1")
            #expect(try await watcher.next("notification.message_new")["message"]["id"].string == "x1")
            #expect(try await plain.next("message.new")["cid"].string == "messaging:w")  // r1
            #expect(try await plain.next("message.new")["message"]["id"].string == "x1")
            for type in ["message.new", "typing.start", "message.read", "notification.message_new"] {
                #expect(!Self.holds(other, type, in: "messaging:w"), "\(type) reached other: \(other.pending)")
            }
            #expect(!Self.holds(plain, "notification.message_new", in: "messaging:w"), "\(plain.pending)")
            #expect(!Self.holds(watcher, "message.new", in: "messaging:x"), "\(watcher.pending)")
            #expect(!Self.holds(alice, "notification.message_new", in: "messaging:x"))

            // Stopping: the watcher now hears w's messages as notifications (v1 and v2).
            for (prefix, id) in [("", "m2"), ("/api/v2/chat", "m3")] {
                let stopped = try await server.ok(
                    .post, "\(prefix)/channels/messaging/w/stop-watching?connection_id=\(watcherID)", "{}", token: bob)
                #expect(stopped["duration"].string != nil)
                try await server.send("messaging:w", id: id, from: "alice")
                #expect(try await watcher.next("notification.message_new")["message"]["id"].string == id)
                #expect(try await other.next("notification.message_new")["message"]["id"].string == id)
                #expect(try await plain.next("message.new")["message"]["id"].string == id)
                #expect(!Self.holds(watcher, "message.new", in: "messaging:w"))
                // Watching again through the body's connection id.
                try await server.ok(
                    .post, "/channels/messaging/w/query", #"{"watch": true, "connection_id": "\#(watcherID)"}"#, token: bob)
                try await server.send("messaging:w", id: id + "-again", from: "alice")
                #expect(try await watcher.next("message.new")["message"]["id"].string == id + "-again")
                #expect(try await plain.next("message.new")["message"]["id"].string == id + "-again")
                #expect(try await other.next("notification.message_new")["message"]["id"].string == id + "-again")
            }
        }
    }

    @Test("watcher_count and watchers count this node's members whose connections hear the channel", arguments: StoreKind.all)
    func watcherCount(kind: StoreKind) async throws {
        try await TestServer.run(kind, .live) { server in
            try await server.upsert("alice", "bob", "carol", "dave")
            try await server.createChannel("messaging:c", members: ["alice", "bob", "carol"], createdBy: "alice")
            try await server.createChannel("messaging:d", members: ["alice", "bob", "carol"], createdBy: "alice")
            let bob = try await TestSocket.connect(server, as: "bob")
            let carol = try await TestSocket.connect(server, as: "carol")
            let dave = try await TestSocket.connect(server, as: "dave")
            defer { [bob, carol, dave].forEach { $0.close() } }
            let carolID = try #require(carol.hello?["connection_id"].string)
            // carol watches d only: for c she is no watcher; dave is no member; alice is not connected.
            try await server.ok(
                .post, "/channels/messaging/d/query?connection_id=\(carolID)", #"{"watch": true}"#,
                token: try await server.token("carol"))
            let c = try await server.ok(.post, "/channels/messaging/c/query", #"{"watchers": {"limit": 5}, "user_id": "alice"}"#)
            #expect(c["watcher_count"].int == 1 && c["watchers"].array.compactMap { $0["id"].string } == ["bob"], "\(c)")
            let d = try await server.ok(
                .post, "/channels/messaging/d/query", #"{"watchers": {"limit": 1, "offset": 1}, "user_id": "alice"}"#)
            #expect(d["watcher_count"].int == 2 && d["watchers"].array.compactMap { $0["id"].string } == ["carol"], "\(d)")
            // Not asked for: no list, the count still.
            let plain = try await server.ok(.post, "/channels/messaging/d/query", #"{"user_id": "alice"}"#)
            #expect(!plain["watchers"].exists && plain["watcher_count"].int == 2)
            // message.new carries the count of the channel's watchers.
            try await server.send("messaging:c", id: "c1", from: "alice")
            #expect(try await bob.next("message.new")["watcher_count"].int == 1)
            #expect(try await carol.next("notification.message_new")["cid"].string == "messaging:c")
        }
    }

    @Test(
        "a member removed from a channel, or whose channel was deleted, still ends the watch, and stop-watching tells nothing of the channel",
        arguments: StoreKind.all)
    func stopAfterLeaving(kind: StoreKind) async throws {
        try await TestServer.run(kind, .live) { server in
            try await server.upsert("alice", "bob")
            try await server.createChannel("messaging:left", members: ["alice", "bob"], createdBy: "alice")
            try await server.createChannel("messaging:gone", members: ["alice", "bob"], createdBy: "alice")
            try await server.createChannel("messaging:kept", members: ["alice", "bob"], createdBy: "alice")
            let socket = try await TestSocket.connect(server, as: "bob")
            defer { socket.close() }
            let id = try #require(socket.hello?["connection_id"].string)
            let bob = try await server.token("bob")
            for cid in ["left", "gone", "kept"] {
                try await server.ok(.post, "/channels/messaging/\(cid)/query?connection_id=\(id)", #"{"watch": true}"#, token: bob)
            }
            let hub = server.services.hub
            #expect(hub.watchedChannels(connectionID: id, userID: "bob") == ["messaging:left", "messaging:gone", "messaging:kept"])
            try await server.ok(.post, "/channels/messaging/left", #"{"remove_members": ["bob"]}"#)
            try await server.ok(.delete, "/channels/messaging/gone")
            for cid in ["left", "gone", "never-was"] {
                let stopped = try await server.ok(
                    .post, "/channels/messaging/\(cid)/stop-watching?connection_id=\(id)", "{}", token: bob)
                #expect(stopped["duration"].string != nil)
            }
            #expect(hub.watchedChannels(connectionID: id, userID: "bob") == ["messaging:kept"])
            // Another user cannot end bob's watch: the same call with alice's token changes nothing.
            try await server.ok(
                .post, "/channels/messaging/kept/stop-watching?connection_id=\(id)", "{}", token: try await server.token("alice"))
            #expect(hub.watchedChannels(connectionID: id, userID: "bob") == ["messaging:kept"])
        }
    }

    /// Each refusal, with its status and code.
    static let refusals: [(name: String, path: String, body: String, user: String?, status: Int, code: Int)] = [
        ("stop-watching without a connection id", "/channels/messaging/r/stop-watching", "{}", "alice", 400, 4),
        ("stop-watching a bad connection id", "/channels/messaging/r/stop-watching?connection_id=a%20b", "{}", "alice", 400, 4),
        ("stop-watching a connection id in a bad body", "/channels/messaging/r/stop-watching", #"{"connection_id": 7}"#,
         "alice", 400, 4),
        ("stop-watching with a server token", "/channels/messaging/r/stop-watching?connection_id=c1", "{}", nil, 400, 4),
        ("stop-watching a malformed channel id", "/channels/messaging/a%00b/stop-watching?connection_id=c1", "{}",
         "alice", 400, 4),
        ("stop-watching a malformed channel type", "/channels/m%D0%B5ssaging/r/stop-watching?connection_id=c1", "{}",
         "alice", 400, 4),
        ("a query's bad connection id", "/channels/messaging/r/query?connection_id=\(String(repeating: "c", count: 256))",
         #"{"watch": true}"#, "alice", 400, 4),
        ("query channels' bad connection id", "/channels", #"{"watch": true, "connection_id": "a:b"}"#, "alice", 400, 4),
        ("watchers.limit past 100", "/channels/messaging/r/query", #"{"watchers": {"limit": 101}}"#, "alice", 400, 4),
        ("a negative watchers.offset", "/channels/messaging/r/query", #"{"watchers": {"offset": -1}}"#, "alice", 400, 4),
        ("watchers.offset past 10,000", "/channels/messaging/r/query", #"{"watchers": {"offset": 10001}}"#, "alice", 400, 4),
        ("watch not a boolean", "/channels/messaging/r/query", #"{"watch": "yes"}"#, "alice", 400, 4),
    ]

    @Test("what cannot watch or stop watching is refused with Stream's error, and changes no connection", arguments: StoreKind.all)
    func refused(kind: StoreKind) async throws {
        try await TestServer.run(kind, .live) { server in
            try await server.upsert("alice", "bob", "dave")
            try await server.createChannel("messaging:r", members: ["alice", "bob"], createdBy: "alice")
            try await server.createChannel("messaging:r2", members: ["alice", "bob"], createdBy: "alice")
            let alice = try await TestSocket.connect(server, as: "alice")
            defer { alice.close() }
            for refusal in Self.refusals {
                let reply = try await server.call(
                    .post, refusal.path, body: refusal.body, token: try await server.optionalToken(refusal.user))
                #expect(reply.status == refusal.status, "\(refusal.name): \(reply.body)")
                try reply.expectError(refusal.status, code: refusal.code)
            }
            // Queries that would watch with alice's own connection, refused: the watch is taken
            // back (or never made), and a channel the call would make is not made.
            let aliceID = try #require(alice.hello?["connection_id"].string)
            for (path, body) in [
                ("/channels/messaging/r/query?connection_id=\(aliceID)", #"{"watch": true, "messages": {"id_lt": "nope"}}"#),
                ("/channels/messaging/fresh/query?connection_id=\(aliceID)",
                 #"{"watch": true, "data": {"members": ["alice", "bob"]}, "watchers": {"limit": 101}}"#),
                ("/channels/messaging/fresh/query?connection_id=\(aliceID)",
                 #"{"watch": true, "data": {"members": ["alice", "bob"]}, "messages": {"id_around": "x"}}"#),
            ] {
                let reply = try await server.call(.post, path, body: body, token: try await server.token("alice"))
                try reply.expectError(400, code: 4)
            }
            let fresh = try await server.ok(.post, "/channels", #"{"filter_conditions": {"cid": "messaging:fresh"}}"#)
            #expect(fresh["channels"].array.isEmpty, "\(fresh)")
            // alice's connection never became a watcher (of r or of anything): she hears r2's messages
            // as message.new, not as notification.message_new.
            try await server.send("messaging:r2", id: "after", from: "bob")
            #expect(try await alice.next("message.new")["message"]["id"].string == "after")
            #expect(!alice.pending.contains { $0["type"].string == "notification.message_new" })
        }
    }
}
