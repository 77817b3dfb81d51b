import Foundation
import HTTPTypes
import Testing
import TicksProtocol

@testable import TicksServer

/// What Stream's own `stream-chat-python` suite asks of the server, as its
/// SDK sends it (issue 22, item 8): each request below is the one the SDK
/// makes for the test named, checked for Stream's answer.
@Suite("Stream's SDK suite, over the wire")
struct StreamSuiteTests {
    /// Stream's `channel` fixture: a channel made by `creator` with no members, and a message from them.
    func creatorsChannel(_ server: TestServer, _ cid: String, creator: String, message: String) async throws {
        try await server.upsert(creator)
        try await server.ok(.post, "/channels/\(server.path(cid))/query", #"{"data": {"created_by": {"id": "\#(creator)"}}}"#)
        try await server.send(cid, id: message, from: creator)
    }

    @Test("a server token marks unread and delivered for a user who is not a member: accepted, nothing changes", arguments: StoreKind.all)
    func marksForNonMembers(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await creatorsChannel(server, "messaging:fixture", creator: "random", message: "m1")
            // channel.mark_unread(user_id, message_id=…)
            let unread = try await server.call(
                .post, "/channels/messaging/fixture/unread", body: #"{"message_id": "m1", "user_id": "random"}"#)
            #expect(unread.status == 200, "\(unread.body)")
            // client.mark_delivered_simple(user_id, message_id, cid)
            let delivered = try await server.call(
                .post, "/channels/delivered?user_id=random",
                body: #"{"latest_delivered_messages": [{"cid": "messaging:fixture", "id": "m1"}], "user_id": "random"}"#)
            #expect(delivered.status == 200, "\(delivered.body)")
            // Stream keeps read state for members only: still none, and still no members.
            let state = try await server.state("messaging:fixture")
            #expect(state["members"].array.isEmpty && state["read"].array.isEmpty)
            let channel = try #require(try await server.store.channel(ChannelID(type: "messaging", id: "fixture")))
            #expect(try await server.store.member("random", of: channel) == nil)

            // With several channels, those the user belongs to are marked.
            try await server.upsert("bob")
            try await server.createChannel("messaging:own", members: ["random", "bob"])
            try await server.send("messaging:own", id: "own1", from: "bob")
            try await server.ok(
                .post, "/channels/delivered?user_id=random",
                #"{"latest_delivered_messages": [{"cid": "messaging:fixture", "id": "m1"}, {"cid": "messaging:own", "id": "own1"}], "user_id": "random"}"#)
            let own = try #require(try await server.store.channel(ChannelID(type: "messaging", id: "own")))
            #expect(try await server.store.member("random", of: own)?.lastDeliveredMessageID == "own1")

            // The user's own token is no server token: refused, nothing marked.
            let token = try await server.token("random")
            try await server.call(
                .post, "/channels/messaging/fixture/unread", body: #"{"message_id": "m1"}"#, token: token
            ).expectError(403, code: 17)
            try await server.call(
                .post, "/channels/delivered",
                body: #"{"latest_delivered_messages": [{"cid": "messaging:fixture", "id": "m1"}]}"#, token: token
            ).expectError(403, code: 17)
            try await server.call(.post, "/channels/messaging/fixture/read", body: "{}", token: token)
                .expectError(403, code: 17)
            #expect(try await server.store.member("random", of: channel) == nil)
        }
    }

    @Test("query members with name $autocomplete, in join order, paged", arguments: StoreKind.all)
    func autocomplete(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await creatorsChannel(server, "messaging:beatles", creator: "random", message: "m1")
            let names = ["paul", "george", "john", "jessica", "john2"]
            try await server.ok(
                .post, "/users",
                "{\"users\": {\(names.map { "\"\($0)\": {\"id\": \"\($0)\", \"name\": \"\($0)\"}" }.joined(separator: ","))}}")
            for name in names {
                try await server.ok(.post, "/channels/messaging/beatles", #"{"add_members": ["\#(name)"]}"#)
            }
            func query(_ payload: String) async throws -> Reply {
                let encoded = payload.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? payload
                return try await server.call(.get, "/members?payload=\(encoded)")
            }
            func ids(_ reply: Reply) throws -> [String] {
                #expect(reply.status == 200, "\(reply.body)")
                return try reply.json()["members"].array.compactMap { $0["user"]["id"].string }
            }
            // channel.query_members(filter_conditions={"name": {"$autocomplete": "j"}},
            //     sort=[{"field": "created_at", "direction": 1}], offset=1, limit=10)
            let stream = try await query(
                #"{"id": "beatles", "type": "messaging", "filter_conditions": {"name": {"$autocomplete": "j"}}, "sort": [{"field": "created_at", "direction": 1}], "offset": 1, "limit": 10}"#)
            #expect(try ids(stream) == ["jessica", "john2"])
            // Any case; a later word of the name; with an id filter too.
            try await server.ok(.post, "/users", #"{"users": {"mj": {"id": "mj", "name": "Mary Jane"}}}"#)
            try await server.ok(.post, "/channels/messaging/beatles", #"{"add_members": ["mj"]}"#)
            let all = try await query(
                #"{"id": "beatles", "type": "messaging", "filter_conditions": {"name": {"$autocomplete": "J"}}}"#)
            #expect(try ids(all) == ["john", "jessica", "john2", "mj"])
            let both = try await query(
                #"{"id": "beatles", "type": "messaging", "filter_conditions": {"name": {"$autocomplete": "jo"}, "id": {"$in": ["john2", "paul"]}}}"#)
            #expect(try ids(both) == ["john2"])
            // What Ticks cannot apply is 400, not ignored.
            for payload in [
                #"{"id": "beatles", "type": "messaging", "filter_conditions": {"name": {"$eq": "john"}}}"#,
                #"{"id": "beatles", "type": "messaging", "filter_conditions": {"nick": {"$autocomplete": "j"}}}"#,
                #"{"id": "beatles", "type": "messaging", "filter_conditions": {"name": {"$autocomplete": ""}}}"#,
                #"{"id": "beatles", "type": "messaging", "sort": [{"field": "created_at", "direction": -1}]}"#,
                #"{"id": "beatles", "type": "messaging", "sort": [{"field": "user_id", "direction": 1}]}"#,
            ] {
                try await query(payload).expectError(400, code: 4)
            }
        }
    }

    @Test("a channel type update answers commands as names, a get as command objects", arguments: StoreKind.all)
    func channelTypeCommands(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            // client.update_channel_type("team", commands=["ban", "unban"])
            let updated = try await server.ok(.put, "/channeltypes/team", #"{"commands": ["ban", "unban"]}"#)
            #expect(updated["commands"].array.compactMap(\.string) == ["ban", "unban"])
            #expect(updated["name"].string == "team" && updated["permissions"].array.count > 0)
            let got = try await server.ok(.get, "/channeltypes/team")
            #expect(got["commands"].array.compactMap { $0["name"].string } == ["ban", "unban"])
        }
    }

    @Test("GET /app as Stream's: app first, X-RateLimit headers on a 200, no rate_limit in the body", arguments: StoreKind.all)
    func appAsStreams(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            let app = try await server.call(.get, "/app")
            #expect(app.status == 200)
            #expect(app.body.hasPrefix(#"{"app":"#))
            #expect(!app.body.contains("rate_limit"))
            for name in ["X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"] {
                #expect(Int(app.headers[HTTPField.Name(name)!] ?? "") != nil, "\(name)")
                // Sent in lower case, as Stream's are: its Python SDK looks them up so in a plain dict.
                #expect(app.headers.contains { $0.name.rawName == name.lowercased() }, "\(name)")
            }
            // Spending a call counts down, as on every other endpoint.
            let again = try await server.call(.get, "/app")
            let remaining = { (reply: Reply) in Int(reply.headers[HTTPField.Name("X-RateLimit-Remaining")!] ?? "") }
            #expect(remaining(again)! == remaining(app)! - 1)
        }
    }

    @Test("query channels sorted by id, in byte order, either way", arguments: StoreKind.all)
    func sortByID(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await server.upsert("gimli", "legolas")
            for id in ["b-hall", "Z-hall", "a-hall", "fellowship"] {
                try await server.createChannel("messaging:\(id)", members: ["gimli", "legolas"])
            }
            // client.query_channels({"members": {"$in": ["gimli"]}}, {"id": 1})
            func ids(_ direction: Int) async throws -> [String] {
                let body = #"{"filter_conditions": {"members": {"$in": ["gimli"]}}, "sort": [{"field": "id", "direction": \#(direction)}]}"#
                return try await server.ok(.post, "/channels", body)["channels"].array.compactMap { $0["channel"]["id"].string }
            }
            #expect(try await ids(1) == ["Z-hall", "a-hall", "b-hall", "fellowship"])
            #expect(try await ids(-1) == ["fellowship", "b-hall", "a-hall", "Z-hall"])
        }
    }
}
