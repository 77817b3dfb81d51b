import Foundation
import Testing
import TicksProtocol

@testable import TicksServer

/// `POST /channels` as a channel list uses it: the order `sort` asks for,
/// and pages with `offset`, on every store.
@Suite("Channel lists")
struct ChannelListTests {
    /// alice is in c1…c4, created in that order; messages went to c3, then c1.
    func setUp(_ server: TestServer) async throws {
        try await server.upsert("alice", "bob", "carol")
        for index in 1...4 {
            try await server.createChannel("messaging:c\(index)", members: ["alice", "bob"])
        }
        try await server.send("messaging:c3", id: "m3", from: "bob")
        try await server.send("messaging:c1", id: "m1", from: "bob")
        try await server.ok(.post, "/channels/messaging/c2", #"{"add_members": ["carol"]}"#)
    }

    func ids(_ server: TestServer, _ body: String) async throws -> [String] {
        let alice = try await server.token("alice")
        return try await server.ok(.post, "/channels", body, token: alice)["channels"].array.compactMap {
            $0["channel"]["id"].string
        }
    }

    @Test("sort: newest message first by default; each supported field either way", arguments: StoreKind.all)
    func sorted(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await setUp(server)
            // Channels without messages count from their creation: c4, c2 are newer than none.
            #expect(try await ids(server, "{}") == ["c1", "c3", "c4", "c2"])
            #expect(
                try await ids(server, #"{"sort": [{"field": "last_message_at", "direction": -1}]}"#)
                    == ["c1", "c3", "c4", "c2"])
            #expect(
                try await ids(server, #"{"sort": [{"field": "last_message_at", "direction": 1}]}"#)
                    == ["c2", "c4", "c3", "c1"])
            #expect(try await ids(server, #"{"sort": [{"field": "created_at", "direction": 1}]}"#) == ["c1", "c2", "c3", "c4"])
            #expect(try await ids(server, #"{"sort": [{"field": "created_at"}]}"#) == ["c4", "c3", "c2", "c1"])
            // Adding carol updated c2 after every message.
            #expect(try await ids(server, #"{"sort": [{"field": "updated_at"}]}"#).first == "c2")
            #expect(try await ids(server, #"{"sort": [{"field": "last_updated"}]}"#) == ["c2", "c1", "c3", "c4"])
            // Ties broken by the next key, then the newest channel.
            #expect(
                try await ids(server, #"{"sort": [{"field": "member_count"}, {"field": "created_at", "direction": 1}]}"#)
                    == ["c2", "c1", "c3", "c4"])
        }
    }

    @Test("offset pages through the list without gaps or repeats", arguments: StoreKind.all)
    func paging(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await setUp(server)
            var seen: [String] = []
            for offset in stride(from: 0, to: 6, by: 3) {
                seen += try await ids(server, #"{"limit": 3, "offset": \#(offset)}"#)
            }
            #expect(seen == ["c1", "c3", "c4", "c2"])
            #expect(try await ids(server, #"{"limit": 3, "offset": 4}"#).isEmpty)
        }
    }

    @Test("a sort on anything else, or a direction other than ±1, is a 400 that names what is supported")
    func badSort() async throws {
        try await TestServer.run { server in
            try await setUp(server)
            let reply = try await server.call(.post, "/channels", body: #"{"sort": [{"field": "unread_count"}]}"#)
            try reply.expectError(400, code: 4)
            #expect(reply.body.contains("last_message_at"))
            try await server.call(.post, "/channels", body: #"{"sort": [{"field": "created_at", "direction": 0}]}"#)
                .expectError(400, code: 4)
            try await server.call(.post, "/channels", body: #"{"sort": {"field": "created_at"}}"#)
                .expectError(400, code: 4)
            #expect(try await ids(server, "{}").count == 4)
        }
    }
}
