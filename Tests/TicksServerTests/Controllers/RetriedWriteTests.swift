import Foundation
import Testing
import TicksProtocol
import TicksTestSupport

@testable import TicksServer

/// A write answered 503 may have been made (its connection was lost after
/// COMMIT went out: `StoreDeadline`), so clients repeat it. Each write that
/// can end so must be safe to repeat: the repeat answers 2xx and changes
/// nothing more — no second cursor move in the receipt log, no unread count
/// off by one, no second message, no new play time (docs/operations.md,
/// "When the database goes away"). On every store.
@Suite("Retried writes change nothing more")
struct RetriedWriteTests {
    /// What a repeat must leave as it was: bob's read state, the receipts of m1…m3 and v1,
    /// the channel's messages, alice's and bob's unread counts, and the receipt log's rows.
    func snapshot(_ server: TestServer) async throws -> [String: JSONValue] {
        /// An answer without its `duration`, the one field that differs from call to call.
        func kept(_ json: JSON) -> JSONValue {
            guard case .object(var fields)? = json.value else { return json.value ?? .null }
            fields["duration"] = nil
            return .object(fields)
        }
        let sql = try #require(server.store as? SQLStore)
        let logged = try await sql.engine.read {
            Step.row("SELECT COUNT(*) FROM cursor_move").map { try $0?.int(0) ?? -1 }
        }
        var parts: [String: JSONValue] = ["cursor moves": .int(logged)]
        parts["bob"] = kept(try #require(try await server.readState("messaging:g", of: "bob")))
        for id in ["m1", "m2", "m3", "v1"] { parts[id] = kept(try await server.receipts(id)) }
        let channel = try await server.ok(.post, "/channels/messaging/g/query", #"{"state": true}"#)
        parts["messages"] = kept(channel["messages"])
        for user in ["alice", "bob"] {
            parts["\(user) unread"] = kept(try await server.ok(.get, "/unread", token: try await server.token(user)))
        }
        return parts
    }

    @Test("mark read, mark delivered, send with a client id and mark played, each made twice", arguments: StoreKind.all)
    func repeated(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await server.upsert("alice", "bob")
            try await server.createChannel("messaging:g", members: ["alice", "bob"], createdBy: "alice")
            for id in ["m1", "m2", "m3"] { try await server.send("messaging:g", id: id, from: "alice") }
            try await server.sendVoiceNote("messaging:g", id: "v1", from: "alice")
            let bob = try await server.token("bob")
            let writes: [(String, @Sendable () async throws -> Reply)] = [
                ("mark delivered", {
                    try await server.call(
                        .post, "/channels/delivered",
                        body: #"{"latest_delivered_messages": [{"cid": "messaging:g", "id": "m2"}]}"#, token: bob)
                }),
                ("mark read", {
                    try await server.call(.post, "/channels/messaging/g/read", body: #"{"message_id": "m1"}"#, token: bob)
                }),
                ("send with a client id", {
                    try await server.call(
                        .post, "/channels/messaging/g/message",
                        body: #"{"message": {"id": "b1", "text": "once only"}}"#, token: bob)
                }),
                ("mark played", { try await server.call(.post, "/messages/v1/played", body: "{}", token: bob) }),
            ]
            for (name, write) in writes {
                let first = try await write()
                #expect((200..<300).contains(first.status), "\(name): \(first.body)")
                let before = try await snapshot(server)
                let again = try await write()
                #expect((200..<300).contains(again.status), "\(name) again: \(again.body)")
                let after = try await snapshot(server)
                let changed = before.keys.filter { before[$0] != after[$0] }.sorted()
                #expect(changed.isEmpty, "\(name) made twice changed \(changed): \(changed.map { after[$0] })")
            }
        }
    }
}
