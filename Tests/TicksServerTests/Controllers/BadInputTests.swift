import Foundation
import Testing

@testable import TicksServer

/// Nothing a client sends crashes the server or changes state: each bad
/// request gets a clear 4xx in Stream's format and the data stays as it was.
@Suite("Bad input")
struct BadInputTests {
    func setUp(_ server: TestServer) async throws {
        try await server.upsert("alice", "bob")
        try await server.createChannel("messaging:x", members: ["alice", "bob"])
        try await server.send("messaging:x", id: "x1", from: "alice")
        try await server.createChannel("messaging:y", members: ["alice", "bob"])
        try await server.send("messaging:y", id: "y1", from: "alice")
    }

    /// The state every test checks is untouched afterwards.
    func expectUntouched(_ server: TestServer) async throws {
        let state = try await server.state("messaging:x")
        #expect(state["messages"].array.map { $0["id"].string } == ["x1"])
        let bob = try #require(state["read"].array.first { $0["user"]["id"].string == "bob" })
        #expect(bob["unread_messages"].int == 1)
        #expect(!bob["last_delivered_message_id"].exists)
        #expect(state["members"].array.count == 2)
    }

    static let cases: [(String, String, String, Int, Int)] = [
        // (label, path, body, status, code)
        ("malformed JSON", "/channels/messaging/x/read", #"{"user": {"id": "bob""#, 400, 4),
        ("a JSON array body", "/channels/messaging/x/read", "[1, 2]", 400, 4),
        ("wrong type for message_id", "/channels/messaging/x/read", #"{"user_id": "bob", "message_id": 7}"#, 400, 4),
        ("wrong type for user", "/channels/messaging/x/read", #"{"user": "bob"}"#, 400, 4),
        ("unknown message to mark read", "/channels/messaging/x/read", #"{"user_id": "bob", "message_id": "nope"}"#, 400, 4),
        ("message of another channel", "/channels/messaging/x/read", #"{"user_id": "bob", "message_id": "y1"}"#, 400, 4),
        ("unknown channel", "/channels/messaging/nope/read", #"{"user_id": "bob"}"#, 404, 16),
        ("unknown channel type", "/channels/nope/x/query", #"{"data": {"members": ["bob"]}}"#, 400, 4),
        ("unread without message_id", "/channels/messaging/x/unread", #"{"user_id": "bob"}"#, 400, 4),
        ("recount: user_ids of wrong type", "/unread/recount", #"{"user_ids": "bob"}"#, 400, 4),
        ("recount: user id of wrong type", "/unread/recount", #"{"user_ids": [7]}"#, 400, 4),
        ("recount: user id holding U+0000", "/unread/recount", #"{"user_ids": ["bob\u0000"]}"#, 400, 4),
        ("mark read for nobody", "/channels/messaging/x/read", "{}", 400, 4),
        ("message without text", "/channels/messaging/x/message", #"{"message": {"user_id": "alice"}}"#, 400, 4),
        ("message text holding U+0000", "/channels/messaging/x/message",
         #"{"message": {"text": "nul \u0000 inside", "user_id": "alice"}}"#, 400, 4),
        ("read: message_id holding U+0000", "/channels/messaging/x/read", #"{"user_id": "bob", "message_id": "x\u0000"}"#, 400, 4),
        ("read: user_id holding U+0000", "/channels/messaging/x/read", #"{"user_id": "bob\u0000"}"#, 400, 4),
        ("unread: message_id holding U+0000", "/channels/messaging/x/unread",
         #"{"user_id": "bob", "message_id": "x\u0000"}"#, 400, 4),
        ("read all: user_id holding U+0000", "/channels/read", #"{"user_id": "bob\u0000"}"#, 400, 4),
        ("threads read: user_id holding U+0000", "/threads/read", #"{"user_id": "bob\u0000"}"#, 400, 4),
        ("threads read for nobody", "/threads/read", "{}", 400, 4),
        ("threads read: wrong type for user", "/threads/read", #"{"user": "bob"}"#, 400, 4),
        ("threads read: malformed JSON", "/threads/read", #"{"user_id": "bob""#, 400, 4),
        ("threads read for an unknown user", "/threads/read", #"{"user_id": "nobody"}"#, 404, 16),
        ("played: a message without audio or video", "/messages/x1/played", #"{"user_id": "bob"}"#, 400, 4),
        ("played: the author's own message", "/messages/x1/played", #"{"user_id": "alice"}"#, 400, 4),
        ("played: an unknown message", "/messages/nope/played", #"{"user_id": "bob"}"#, 404, 16),
        ("played for nobody", "/messages/x1/played", "{}", 400, 4),
        ("played: user_id holding U+0000", "/messages/x1/played", #"{"user_id": "bob\u0000"}"#, 400, 4),
        ("played: malformed JSON", "/messages/x1/played", #"{"user_id": "bob""#, 400, 4),
        ("played: a malformed message id", "/messages/x%201/played", #"{"user_id": "bob"}"#, 400, 4),
        ("attachments: not an object", "/channels/messaging/x/message",
         #"{"message": {"text": "hi", "user_id": "alice", "attachments": ["audio"]}}"#, 400, 4),
        ("attachments: no type", "/channels/messaging/x/message",
         #"{"message": {"text": "hi", "user_id": "alice", "attachments": [{"asset_url": "a"}]}}"#, 400, 4),
        ("attachments: more than 30", "/channels/messaging/x/message",
         #"{"message": {"text": "", "user_id": "alice", "attachments": [\#(Array(repeating: #"{"type": "audio"}"#, count: 31).joined(separator: ","))]}}"#,
         400, 4),
        ("attachments: more than 16 KiB", "/channels/messaging/x/message",
         #"{"message": {"text": "hi", "user_id": "alice", "attachments": [{"type": "file", "asset_url": "\#(String(repeating: "x", count: 17_000))"}]}}"#,
         400, 4),
        ("attachments: wrong type", "/channels/messaging/x/message",
         #"{"message": {"text": "hi", "user_id": "alice", "attachments": {"type": "audio"}}}"#, 400, 4),
        ("delivered: user_id holding U+0000", "/channels/delivered",
         #"{"latest_delivered_messages": [{"cid": "messaging:x", "id": "x1"}], "user_id": "bob\u0000"}"#, 400, 4),
        ("query: id_lt holding U+0000", "/channels/messaging/x/query", #"{"messages": {"id_lt": "x\u0000"}}"#, 400, 4),
        ("query: creator holding U+0000", "/channels/messaging/n/query",
         #"{"data": {"members": ["bob"], "created_by_id": "a\u0000"}}"#, 400, 4),
        ("message: author holding U+0000", "/channels/messaging/x/message",
         #"{"message": {"text": "t", "user_id": "alice\u0000"}}"#, 400, 4),
        ("message text of wrong type", "/channels/messaging/x/message", #"{"message": {"text": 5, "user_id": "alice"}}"#, 400, 4),
        ("message without body", "/channels/messaging/x/message", #"{}"#, 400, 4),
        ("invalid message id", "/channels/messaging/x/message", #"{"message": {"id": "a b", "text": "t", "user_id": "alice"}}"#, 400, 4),
        ("over-long message id", "/channels/messaging/x/message",
         #"{"message": {"id": "\#(String(repeating: "m", count: 256))", "text": "t", "user_id": "alice"}}"#, 400, 4),
        ("over-long channel id", "/channels/messaging/\(String(repeating: "c", count: 256))/query", "{}", 400, 4),
        ("invalid channel id", "/channels/messaging/a%20b/query", "{}", 400, 4),
        ("member that does not exist", "/channels/messaging/x", #"{"add_members": ["ghost"]}"#, 400, 4),
        ("delivered: empty list", "/channels/delivered?user_id=bob", #"{"latest_delivered_messages": []}"#, 400, 4),
        ("delivered: unknown channel", "/channels/delivered?user_id=bob",
         #"{"latest_delivered_messages": [{"cid": "messaging:zz", "id": "x1"}]}"#, 400, 4),
        ("delivered: bad cid", "/channels/delivered?user_id=bob",
         #"{"latest_delivered_messages": [{"cid": "nocolon", "id": "x1"}]}"#, 400, 4),
        ("delivered: users differ", "/channels/delivered?user_id=alice",
         #"{"latest_delivered_messages": [{"cid": "messaging:x", "id": "x1"}], "user_id": "bob"}"#, 400, 4),
        ("users: key and id differ", "/users", #"{"users": {"bob": {"id": "alice"}}}"#, 400, 4),
        ("users: invalid id", "/users", #"{"users": {"b b": {"id": "b b"}}}"#, 400, 4),
        ("users: missing id", "/users", #"{"users": {"bob": {"name": "x"}}}"#, 400, 4),
        ("channel type: bad name", "/channeltypes", #"{"name": "no spaces"}"#, 400, 4),
        ("channel type: exists", "/channeltypes", #"{"name": "messaging"}"#, 409, 4),
        ("channel type: bad max length", "/channeltypes", #"{"name": "t1", "max_message_length": 0}"#, 400, 4),
        ("query channels: unsupported filter", "/channels", #"{"filter_conditions": {"frozen": true}}"#, 400, 4),
        ("query channels: limit too big", "/channels", #"{"filter_conditions": {}, "limit": 1000}"#, 400, 4),
        ("unknown endpoint", "/nothing/here", "{}", 404, 16),
    ]

    @Test("each bad request is a clear 4xx and changes nothing", arguments: cases)
    func badRequest(label: String, path: String, body: String, status: Int, code: Int) async throws {
        try await TestServer.run { server in
            try await setUp(server)
            try await server.call(.post, path, body: body).expectError(status, code: code)
            try await expectUntouched(server)
        }
    }

    @Test(
        "mark delivered accepts and ignores messages that are not there (as Stream does); the others count",
        arguments: StoreKind.all)
    func deliveredUnknownMessages(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await setUp(server)
            // A message that does not exist, and one of another channel: ignored, alone or beside a real one.
            for entries in [#"[{"cid": "messaging:x", "id": "nope"}]"#, #"[{"cid": "messaging:x", "id": "y1"}]"#] {
                try await server.ok(.post, "/channels/delivered?user_id=bob", #"{"latest_delivered_messages": \#(entries)}"#)
            }
            try await expectUntouched(server)
            try await server.ok(
                .post, "/channels/delivered?user_id=bob",
                #"{"latest_delivered_messages": [{"cid": "messaging:x", "id": "nope"}, {"cid": "messaging:x", "id": "x1"}]}"#)
            let bob = try await server.state("messaging:x")["read"].array.first { $0["user"]["id"].string == "bob" }
            #expect(bob?["last_delivered_message_id"].string == "x1")
        }
    }

    @Test("message text over the channel type's max_message_length", arguments: StoreKind.all)
    func textTooLong(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await server.ok(.post, "/channeltypes", #"{"name": "short", "max_message_length": 10}"#)
            try await server.upsert("alice")
            try await server.createChannel("short:s", members: ["alice"])
            try await server.call(
                .post, "/channels/short/s/message", body: #"{"message": {"text": "01234567890", "user_id": "alice"}}"#
            ).expectError(400, code: 4)
            try await server.send("short:s", id: "ok", from: "alice", text: "0123456789")
            #expect(try await server.state("short:s")["messages"].array.count == 1)
        }
    }

    @Test("more than 100 latest_delivered_messages entries")
    func tooManyDelivered() async throws {
        try await TestServer.run { server in
            try await setUp(server)
            let entries = Array(repeating: #"{"cid": "messaging:x", "id": "x1"}"#, count: 101).joined(separator: ",")
            try await server.call(
                .post, "/channels/delivered?user_id=bob", body: "{\"latest_delivered_messages\": [\(entries)]}"
            ).expectError(400, code: 4)
            let hundred = Array(repeating: #"{"cid": "messaging:x", "id": "x1"}"#, count: 100).joined(separator: ",")
            try await server.ok(.post, "/channels/delivered?user_id=bob", "{\"latest_delivered_messages\": [\(hundred)]}")
        }
    }

    @Test("a body over 1 MiB is refused with 413", arguments: [false, true])
    func oversizedBody(live: Bool) async throws {
        try await TestServer.run(.standard, live ? .live : .router) { server in
            try await setUp(server)
            let text = String(repeating: "a", count: maxRequestBodyBytes + 10)
            let body = #"{"message": {"text": "\#(text)", "user_id": "alice"}}"#
            try await server.call(.post, "/channels/messaging/x/message", body: body).expectError(413, code: 22)
            try await expectUntouched(server)
        }
    }

    @Test("unknown message ids are 404 on the message endpoints")
    func unknownMessage() async throws {
        try await TestServer.run { server in
            try await server.call(.get, "/messages/nope").expectError(404, code: 16)
            try await server.call(.get, "/messages/nope/receipts").expectError(404, code: 16)
            try await server.call(.get, "/channeltypes/nope").expectError(404, code: 16)
        }
    }

    @Test("bad cids and users for explain: malformed 400, unknown channel 404", arguments: StoreKind.all)
    func badExplain(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await setUp(server)
            for cid in ["messaging", "messaging:", ":x", "messaging:a%00b", "m%D0%B5ssaging:x", "messaging:a%20b"] {
                try await server.call(.get, "/unread/explain?cid=\(cid)&user_id=bob").expectError(400, code: 4)
            }
            try await server.call(.get, "/unread/explain?cid=messaging:x&user_id=bob%00").expectError(400, code: 4)
            try await server.call(.get, "/unread/explain?cid=messaging:nope&user_id=bob").expectError(404, code: 16)
            try await server.call(.get, "/unread/explain?cid=nope:x&user_id=bob").expectError(404, code: 16)
            try await expectUntouched(server)
        }
    }

    @Test("bad query payloads for users")
    func badUserQueries() async throws {
        try await TestServer.run { server in
            try await server.call(.get, "/users").expectError(400, code: 4)
            try await server.call(.get, "/users?payload=%7Bnot").expectError(400, code: 4)
            try await server.call(.get, "/users?payload=%7B%22filter_conditions%22%3A%7B%22name%22%3A%22x%22%7D%7D")
                .expectError(400, code: 4)
        }
    }

    @Test("a channel type name or a delivery id holding U+0000 is 400, on every store (PostgreSQL answered 500)")
    func nulInTypeNamesAndDeliveryIDs() async throws {
        try await TestServer.run { server in
            try await server.call(.get, "/channeltypes/a%00b").expectError(400, code: 4)
            try await server.call(.put, "/channeltypes/a%00b", body: #"{"max_message_length": 10}"#)
                .expectError(400, code: 4)
            try await server.call(.post, "/webhooks/failed/retry", body: #"{"delivery_ids": ["a\u0000b"]}"#)
                .expectError(400, code: 4)
            try await server.call(.get, "/channeltypes/m%D0%B5ssaging").expectError(400, code: 4)  // Cyrillic е
            try await server.call(.get, "/channeltypes/messaging%FF").expectError(400, code: 4)
            // Well-formed ids that name nothing answer as before.
            try await server.call(.get, "/channeltypes/nope").expectError(404, code: 16)
            let retried = try await server.ok(
                .post, "/webhooks/failed/retry", #"{"delivery_ids": ["3f1c2a9e-0000-4000-8000-000000000000"]}"#)
            #expect(retried["retried"].array.isEmpty)
            let messaging = try await server.ok(.get, "/channeltypes/messaging")
            #expect(messaging["name"].string == "messaging")
            #expect(messaging["max_message_length"].int == 5000)
        }
    }

    @Test("a filter value that is not a valid id (U+0000, a look-alike, too long) is 400, on every store")
    func invalidIDsInFilters() async throws {
        try await TestServer.run { server in
            try await setUp(server)
            // {"filter_conditions": {"id": {"$in": ["alice", "a\u0000"]}}}
            try await server.call(
                .get, "/users?payload=%7B%22filter_conditions%22%3A%7B%22id%22%3A%7B%22%24in%22%3A%5B%22alice%22%2C%22a%5Cu0000%22%5D%7D%7D%7D"
            ).expectError(400, code: 4)
            try await server.call(
                .post, "/channels", body: #"{"filter_conditions": {"members": {"$in": ["alice\u0000"]}}, "user_id": "alice"}"#
            ).expectError(400, code: 4)
            try await server.call(
                .post, "/channels",
                body: #"{"filter_conditions": {"cid": {"$in": ["messaging:x", "messaging:\u0000"]}}, "user_id": "alice"}"#
            ).expectError(400, code: 4)
            try await server.call(
                .post, "/channels", body: #"{"filter_conditions": {"type": "mеssaging"}, "user_id": "alice"}"#  // Cyrillic е
            ).expectError(400, code: 4)
            try await server.call(
                .post, "/channels", body: #"{"filter_conditions": {"id": {"$eq": "x "}}, "user_id": "alice"}"#
            ).expectError(400, code: 4)
            let long = String(repeating: "a", count: 256)
            try await server.call(.get, "/members?payload=" + #"{"type":"messaging","id":"x","filter_conditions":{"user_id":"\#(long)"}}"#
                .addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            ).expectError(400, code: 4)
            // Valid ids that name nothing still match nothing.
            let users = try await server.ok(
                .get, "/users?payload=%7B%22filter_conditions%22%3A%7B%22id%22%3A%7B%22%24in%22%3A%5B%22alice%22%2C%22nobody%22%5D%7D%7D%7D")
            #expect(users["users"].array.map { $0["id"].string } == ["alice"])
        }
    }

    @Test("query parameters are read as forms encode them: + is a space")
    func formEncodedQuery() async throws {
        try await TestServer.run { server in
            try await setUp(server)
            // What Python's requests sends for json.dumps({"filter_conditions": {"id": {"$in": ["alice"]}}}).
            let found = try await server.ok(
                .get, "/users?payload=%7B%22filter_conditions%22%3A+%7B%22id%22%3A+%7B%22%24in%22%3A+%5B%22alice%22%5D%7D%7D%7D")
            #expect(found["users"].array.map { $0["id"].string } == ["alice"])
        }
    }

    @Test("request fields Ticks does not implement are accepted and ignored")
    func unknownFieldsIgnored() async throws {
        try await TestServer.run { server in
            try await setUp(server)
            let sent = try await server.ok(
                .post, "/channels/messaging/x/message",
                #"{"message": {"id": "x2", "text": "t", "user_id": "alice", "silent": true, "attachments": [{"type": "image"}], "mood": "happy"}, "skip_push": true}"#
            )
            #expect(sent["message"]["mood"].string == "happy")
            // Attachments are kept as sent (R14), never as custom data.
            #expect(sent["message"]["attachments"].array.map { $0["type"].string } == ["image"])
            #expect(!sent["message"]["silent"].exists)
            try await server.ok(.post, "/channels/messaging/x/read", #"{"user_id": "bob", "thread_id": null, "client_id": "c"}"#)
        }
    }
}
