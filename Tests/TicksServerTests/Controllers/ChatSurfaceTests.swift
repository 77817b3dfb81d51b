import Foundation
import HTTPTypes
import Testing
import TicksProtocol

@testable import TicksServer

/// The chat surface around receipts, over HTTP: who may call what, with
/// Stream's status codes and errors, on every store.
@Suite("Chat surface")
struct ChatSurfaceTests {
    /// alice created messaging:ab with bob and carol; alice sent ab1, bob ab2.
    func setUp(_ server: TestServer) async throws {
        try await server.upsert("alice", "bob", "carol", "mallory")
        try await server.createChannel("messaging:ab", members: ["alice", "bob", "carol"], createdBy: "alice")
        try await server.send("messaging:ab", id: "ab1", from: "alice")
        try await server.send("messaging:ab", id: "ab2", from: "bob")
    }

    @Test("distinct channels: the same members name the same channel in any order, and receipts work there", arguments: StoreKind.all)
    func distinct(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await server.upsert("alice", "bob")
            let first = try await server.ok(
                .post, "/channels/messaging/query", #"{"data": {"members": ["alice", "bob"], "created_by": {"id": "alice"}}}"#)
            let id = try #require(first["channel"]["id"].string)
            #expect(id.hasPrefix("!members-") && id.count == "!members-".count + 43)
            let second = try await server.ok(
                .post, "/channels/messaging/query", #"{"data": {"members": [{"user_id": "bob"}, "alice"]}, "user_id": "bob"}"#)
            #expect(second["channel"]["id"].string == id)
            try await server.send("messaging:\(id)", id: "d1", from: "alice")
            try await server.markRead("messaging:\(id)", "bob")
            let receipts = try await server.receipts("d1")
            #expect(receipts["receipts"].array.map { $0["user"]["id"].string } == ["bob"])
            #expect(receipts["read_count"].int == 1)
            try await server.call(.post, "/channels/messaging/query", body: #"{"data": {"members": ["alice"]}}"#)
                .expectError(400, code: 4)
        }
    }

    @Test("only the channel's creator, moderators, admins and server tokens update, truncate or delete it")
    func channelManagement() async throws {
        try await TestServer.run { server in
            try await setUp(server)
            let bob = try await server.token("bob")
            let mallory = try await server.token("mallory")
            for (method, path, body) in [
                (HTTPRequest.Method.patch, "/channels/messaging/ab", #"{"set": {"motd": "x"}}"#),
                (.post, "/channels/messaging/ab", #"{"data": {"motd": "x"}}"#),
                (.post, "/channels/messaging/ab/truncate", "{}"),
                (.delete, "/channels/messaging/ab", nil),
            ] as [(HTTPRequest.Method, String, String?)] {
                try await server.call(method, path, body: body, token: bob).expectError(403, code: 17)
                try await server.call(method, path, body: body, token: mallory).expectError(403, code: 17)
            }
            #expect(try await server.state("messaging:ab")["messages"].array.count == 2)
            let alice = try await server.token("alice")
            let patched = try await server.ok(.patch, "/channels/messaging/ab", #"{"set": {"motd": "hi", "n": 1}}"#, token: alice)
            #expect(patched["channel"]["motd"].string == "hi")
            let unset = try await server.ok(.patch, "/channels/messaging/ab", #"{"unset": ["n"]}"#, token: alice)
            #expect(unset["channel"]["motd"].string == "hi" && !unset["channel"]["n"].exists)
            // A full update replaces the custom data.
            let full = try await server.ok(.post, "/channels/messaging/ab", #"{"data": {"topic": "t"}, "message": null}"#, token: alice)
            #expect(full["channel"]["topic"].string == "t" && !full["channel"]["motd"].exists)
            try await server.call(.patch, "/channels/messaging/ab", body: #"{"set": {"member_count": 3}}"#, token: alice)
                .expectError(400, code: 4)
            try await server.call(.patch, "/channels/messaging/ab", body: #"{}"#, token: alice).expectError(400, code: 4)
            // Hard delete needs a server token.
            try await server.call(.delete, "/channels/messaging/ab?hard_delete=true", token: alice).expectError(403, code: 17)
            let deleted = try await server.ok(.delete, "/channels/messaging/ab?hard_delete=False", token: alice)
            #expect(deleted["channel"]["deleted_at"].exists)
            try await server.call(.post, "/channels/messaging/ab/read", body: #"{"user_id": "bob"}"#).expectError(404, code: 16)
        }
    }

    @Test("messages: authors edit their own, managers delete any, others are refused", arguments: StoreKind.all)
    func messagePermissions(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await setUp(server)
            let bob = try await server.token("bob")
            let carol = try await server.token("carol")
            let alice = try await server.token("alice")
            try await server.call(.post, "/messages/ab1", body: #"{"message": {"text": "mine now"}}"#, token: bob)
                .expectError(403, code: 17)
            try await server.call(.put, "/messages/ab1", body: #"{"set": {"text": "x"}}"#, token: carol)
                .expectError(403, code: 17)
            try await server.call(.delete, "/messages/ab1", token: carol).expectError(403, code: 17)
            // Acting for another user with a user token is refused.
            try await server.call(.put, "/messages/ab2", body: #"{"set": {"text": "x"}, "user": {"id": "alice"}}"#, token: bob)
                .expectError(403, code: 17)
            let edited = try await server.ok(.post, "/messages/ab1", #"{"message": {"text": "edited", "mood": "ok"}}"#, token: alice)
            #expect(edited["message"]["text"].string == "edited" && edited["message"]["mood"].string == "ok")
            #expect(edited["message"]["message_text_updated_at"].exists)
            let partial = try await server.ok(.put, "/messages/ab2", #"{"set": {"color": "red"}, "unset": []}"#, token: bob)
            #expect(partial["message"]["text"].string == "hello" && partial["message"]["color"].string == "red")
            // Only a change of the text is a text update.
            #expect(!partial["message"]["message_text_updated_at"].exists && partial["message"]["updated_at"].exists)
            try await server.call(.put, "/messages/ab2", body: #"{"set": {"text": 5}}"#, token: bob).expectError(400, code: 4)
            try await server.call(.put, "/messages/ab2", body: #"{"set": {"user_id": "x"}}"#, token: bob).expectError(400, code: 4)
            try await server.call(.post, "/messages/nope", body: #"{"message": {"text": "x", "user_id": "bob"}}"#)
                .expectError(404, code: 16)
            // The channel's creator deletes bob's message; it is then a deleted message, and cannot be edited.
            let deleted = try await server.ok(.delete, "/messages/ab2", token: alice)
            #expect(deleted["message"]["type"].string == "deleted")
            // Deleted again, it keeps the time of its first delete.
            let again = try await server.ok(.delete, "/messages/ab2", token: alice)
            #expect(again["message"]["deleted_at"].string == deleted["message"]["deleted_at"].string)
            #expect(try await server.ok(.get, "/messages/ab2")["message"]["deleted_at"].string == deleted["message"]["deleted_at"].string)
            try await server.call(.put, "/messages/ab2", body: #"{"set": {"text": "back"}}"#, token: bob)
                .expectError(400, code: 4)
            try await server.call(.delete, "/messages/ab1?delete_for_me=true", token: alice).expectError(400, code: 4)
            let many = try await server.ok(.get, "/channels/messaging/ab/messages?ids=ab1,ab2,nope", token: carol)
            #expect(many["messages"].array.map { "\($0["id"].string ?? "") \($0["type"].string ?? "")" } == ["ab1 regular", "ab2 deleted"])
            try await server.call(.get, "/channels/messaging/ab/messages?ids=ab1", token: try await server.token("mallory"))
                .expectError(403, code: 17)
            // A server token may delete any message; a hard-deleted one is gone.
            try await server.ok(.delete, "/messages/ab1?hard=true")
            try await server.call(.get, "/messages/ab1").expectError(404, code: 16)
        }
    }

    @Test("a deleted message is no longer unread, over HTTP; GET /unread and the batch agree", arguments: StoreKind.all)
    func unreadAfterDelete(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await setUp(server)
            let before = try await server.ok(.get, "/unread?user_id=carol")
            #expect(before["total_unread_count"].int == 2)
            #expect(before["channels"].array.map { $0["channel_id"].string } == ["messaging:ab"])
            try await server.ok(.delete, "/messages/ab1?hard=true")
            let after = try await server.ok(.get, "/unread", token: try await server.token("carol"))
            #expect(after["total_unread_count"].int == 1)
            #expect(after["channel_type"].array.first?["unread_count"].int == 1)
            let carol = try #require(try await server.readState("messaging:ab", of: "carol"))
            #expect(carol["unread_messages"].int == 1)
            #expect(carol["first_unread_message_id"].string == "ab2")
            let batch = try await server.ok(.post, "/unread_batch", #"{"user_ids": ["carol", "bob", "ghost"]}"#)
            #expect(batch["counts_by_user"]["carol"]["total_unread_count"].int == 1)
            #expect(batch["counts_by_user"]["bob"]["total_unread_count"].int == 0)
            #expect(!batch["counts_by_user"]["ghost"].exists)
            try await server.call(.post, "/unread_batch", body: #"{"user_ids": ["carol"]}"#, token: try await server.token("carol"))
                .expectError(403, code: 17)
            try await server.call(.get, "/unread?user_id=bob", token: try await server.token("carol")).expectError(403, code: 17)
        }
    }

    @Test("threads over HTTP: replies, their listing, thread read and thread unread counts", arguments: StoreKind.all)
    func threads(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await setUp(server)
            let reply = try await server.ok(
                .post, "/channels/messaging/ab/message",
                #"{"message": {"id": "r1", "text": "in thread", "parent_id": "ab1", "user": {"id": "bob"}}}"#)
            #expect(reply["message"]["type"].string == "reply" && reply["message"]["parent_id"].string == "ab1")
            let state = try await server.state("messaging:ab")
            #expect(state["messages"].array.map { $0["id"].string } == ["ab1", "ab2"])
            #expect(state["messages"].array.first?["reply_count"].int == 1)
            let alice = try await server.ok(.get, "/unread?user_id=alice")
            #expect(alice["total_unread_threads_count"].int == 1)
            #expect(alice["threads"].array.first?["parent_message_id"].string == "ab1")
            #expect(alice["total_unread_count"].int == 1)  // ab2 only: the reply is not in the channel
            let replies = try await server.ok(.get, "/messages/ab1/replies?limit=10")
            #expect(replies["messages"].array.map { $0["id"].string } == ["r1"])
            let read = try await server.ok(.post, "/channels/messaging/ab/read", #"{"thread_id": "ab1", "user": {"id": "alice"}}"#)
            #expect(read["event"]["thread"]["parent_message_id"].string == "ab1")
            #expect(read["event"]["last_read_message_id"].string == "r1")
            #expect(try await server.ok(.get, "/unread?user_id=alice")["total_unread_threads_count"].int == 0)
            // alice's channel read state did not move.
            #expect(try await server.readState("messaging:ab", of: "alice")?["unread_messages"].int == 1)
            try await server.call(
                .post, "/channels/messaging/ab/message",
                body: #"{"message": {"text": "deeper", "parent_id": "r1", "user": {"id": "carol"}}}"#
            ).expectError(400, code: 4)
            try await server.call(.post, "/channels/messaging/ab/read", body: #"{"thread_id": "nope", "user_id": "alice"}"#)
                .expectError(400, code: 4)
        }
    }

    @Test("members: query with filters and paging, partial update by the member or a manager", arguments: StoreKind.all)
    func members(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await setUp(server)
            func query(_ payload: String, token: String? = nil) async throws -> [String?] {
                let encoded = payload.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                return try await server.ok(.get, "/members?payload=\(encoded)", token: token)["members"].array.map { $0["user_id"].string }
            }
            #expect(try await query(#"{"type": "messaging", "id": "ab"}"#) == ["alice", "bob", "carol"])
            #expect(try await query(#"{"type": "messaging", "id": "ab", "limit": 1, "offset": 1}"#) == ["bob"])
            #expect(try await query(#"{"type": "messaging", "id": "ab", "filter_conditions": {"id": {"$in": ["carol", "x"]}}}"#) == ["carol"])
            let bob = try await server.token("bob")
            let updated = try await server.ok(.patch, "/channels/messaging/ab/member/bob", #"{"set": {"hat": "blue"}}"#, token: bob)
            #expect(updated["channel_member"]["hat"].string == "blue")
            try await server.call(.patch, "/channels/messaging/ab/member/carol", body: #"{"set": {"hat": "red"}}"#, token: bob)
                .expectError(403, code: 17)
            try await server.call(.patch, "/channels/messaging/ab/member/bob", body: #"{"set": {"channel_role": "channel_moderator"}}"#, token: bob)
                .expectError(403, code: 17)
            let promoted = try await server.ok(
                .patch, "/channels/messaging/ab/member/bob", #"{"set": {"channel_role": "channel_moderator"}}"#,
                token: try await server.token("alice"))
            #expect(promoted["channel_member"]["channel_role"].string == "channel_moderator")
            #expect(promoted["channel_member"]["hat"].string == "blue")
            try await server.call(.patch, "/channels/messaging/ab/member/mallory", body: #"{"set": {"hat": "x"}}"#)
                .expectError(404, code: 16)
            let mallory = try await server.token("mallory")
            let encoded = #"{"type": "messaging", "id": "ab"}"#.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            try await server.call(.get, "/members?payload=\(encoded)", token: mallory).expectError(403, code: 17)
        }
    }

    @Test("users: partial update of one's own fields, never one's role; the server may", arguments: StoreKind.all)
    func usersPartial(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await setUp(server)
            let bob = try await server.token("bob")
            let updated = try await server.ok(.patch, "/users", #"{"users": [{"id": "bob", "set": {"name": "Robert", "team": "x"}, "unset": []}]}"#, token: bob)
            #expect(updated["users"]["bob"]["name"].string == "Robert" && updated["users"]["bob"]["team"].string == "x")
            try await server.call(.patch, "/users", body: #"{"users": [{"id": "bob", "set": {"role": "admin"}}]}"#, token: bob)
                .expectError(403, code: 17)
            try await server.call(.patch, "/users", body: #"{"users": [{"id": "carol", "set": {"name": "C"}}]}"#, token: bob)
                .expectError(403, code: 17)
            try await server.call(.patch, "/users", body: #"{"users": [{"id": "ghost", "set": {"name": "G"}}]}"#)
                .expectError(400, code: 4)
            try await server.call(.patch, "/users", body: #"{"users": [{"id": "bob", "set": {"name": 5}}]}"#)
                .expectError(400, code: 4)
            let admin = try await server.ok(.patch, "/users", #"{"users": [{"id": "bob", "set": {"role": "admin"}, "unset": ["team"]}]}"#)
            #expect(admin["users"]["bob"]["role"].string == "admin" && !admin["users"]["bob"]["team"].exists)
        }
    }

    @Test("bulk delete answers with a task that reports each cid", arguments: StoreKind.all)
    func bulkDelete(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await setUp(server)
            let answer = try await server.ok(.post, "/channels/delete", #"{"cids": ["messaging:ab", "messaging:nope"], "hard_delete": true}"#)
            let taskID = try #require(answer["task_id"].string)
            let task = try await server.ok(.get, "/tasks/\(taskID)")
            #expect(task["status"].string == "completed")
            #expect(task["result"]["messaging:ab"]["status"].string == "ok")
            #expect(task["result"]["messaging:nope"]["status"].string == "error")
            try await server.call(.get, "/tasks/nope").expectError(404, code: 16)
            try await server.call(.post, "/channels/delete", body: #"{"cids": []}"#).expectError(400, code: 4)
            try await server.call(.post, "/channels/delete", body: #"{"cids": ["messaging:x"]}"#, token: try await server.token("alice"))
                .expectError(403, code: 17)
            #expect(try await server.ok(.get, "/unread?user_id=carol")["total_unread_count"].int == 0)
        }
    }

    @Test("users in bulk: conversations first, then the users; a task reports each user", arguments: StoreKind.all)
    func bulkDeleteUsers(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await setUp(server)
            try await server.createChannel("messaging:pair", members: ["alice", "mallory"], createdBy: "alice")
            try await server.createChannel("messaging:other", members: ["bob", "carol"], createdBy: "bob")
            try await server.send("messaging:pair", id: "p1", from: "alice")
            let answer = try await server.call(
                .post, "/users/delete",
                body: #"{"user_ids": ["alice", "ghost", "alice"], "user": "soft", "messages": "soft", "conversations": "soft", "calls": "", "files": false}"#)
            #expect(answer.status == 201)
            let task = try await server.ok(.get, "/tasks/\(try #require(try answer.json()["task_id"].string))")
            #expect(task["status"].string == "completed" && task["result"].keys == ["alice", "ghost"])
            #expect(task["result"]["alice"].value == .object(["status": .string("ok")]))
            #expect(task["result"]["ghost"]["status"].string == "error")
            // alice's conversation went; the group she was in and a pair without her stay.
            let left = try await server.ok(
                .post, "/channels", #"{"filter_conditions": {"cid": {"$in": ["messaging:pair", "messaging:ab", "messaging:other"]}}}"#)
            #expect(Set(left["channels"].array.map { $0["channel"]["cid"].string }) == ["messaging:ab", "messaging:other"])
            #expect(try await server.ok(.get, "/unread?user_id=mallory")["total_unread_count"].int == 0)
            let group = try await server.ok(.post, "/channels/messaging/ab/query", #"{"state": true}"#)
            #expect(group["members"].array.map { $0["user_id"].string } == ["bob", "carol"])
            #expect(group["messages"].array.first { $0["id"].string == "ab1" }?["type"].string == "deleted")
            #expect(try await server.ok(.post, "/channels/messaging/other/query", "{}")["members"].array.count == 2)
            // Soft: alice is still a user.
            #expect(try await server.ok(.get, #"/users?payload={"filter_conditions":{"id":"alice"}}"#)["users"].array.count == 1)
        }
    }

    /// Stream's modes, as Ticks honours them or refuses them before deleting anything.
    static let bulkDeleteModes: [(body: String, status: Int)] = [
        (#"{"user_ids": ["bob"], "user": "hard", "messages": "hard", "conversations": "hard"}"#, 201),
        (#"{"user_ids": ["bob"], "user": "", "messages": "", "conversations": ""}"#, 201),
        (#"{"user_ids": ["bob"]}"#, 201),
        (#"{"user_ids": ["bob"], "user": "hard", "messages": "hard"}"#, 400),
        (#"{"user_ids": ["bob"], "user": "hard", "conversations": "hard"}"#, 400),
        (#"{"user_ids": ["bob"], "messages": "hard"}"#, 400),
        (#"{"user_ids": ["bob"], "user": "pruning"}"#, 400),
        (#"{"user_ids": ["bob"], "messages": "pruning"}"#, 400),
        (#"{"user_ids": ["bob"], "conversations": "wipe"}"#, 400),
        (#"{"user_ids": ["bob"], "new_channel_owner_id": "carol"}"#, 400),
        (#"{"user_ids": []}"#, 400),
        (#"{"user_ids": ["b\u0000b"]}"#, 400),
        (#"{"user_ids": ["bob"], "user": 1}"#, 400),
        (#"{"user": "soft"}"#, 400),
    ]

    @Test("users in bulk: each of Stream's modes is honoured or refused before anything is deleted", arguments: bulkDeleteModes)
    func bulkDeleteUserModes(body: String, status: Int) async throws {
        try await TestServer.run { server in
            try await setUp(server)
            let answer = try await server.call(.post, "/users/delete", body: body)
            if status == 201 {
                #expect(answer.status == 201)
            } else {
                try answer.expectError(status, code: 4)
                let group = try await server.ok(.post, "/channels/messaging/ab/query", #"{"state": true}"#)
                #expect(group["members"].array.count == 3)
            }
            try await server.call(.post, "/users/delete", body: body, token: try await server.token("carol"))
                .expectError(403, code: 17)
        }
    }

    @Test("channel types carry commands and Ticks' permissions; permissions cannot be changed")
    func channelTypes() async throws {
        try await TestServer.run { server in
            let messaging = try await server.ok(.get, "/channeltypes/messaging")
            #expect(messaging["commands"].array.map { $0["name"].string }.contains("giphy"))
            #expect(messaging["permissions"].array.contains { $0["roles"].array.map(\.string) == ["admin"] })
            let created = try await server.ok(.post, "/channeltypes", #"{"name": "support", "commands": ["giphy"]}"#)
            #expect(created["commands"].array.map { $0["name"].string } == ["giphy"])
            try await server.call(.post, "/channeltypes", body: #"{"name": "s2", "commands": ["nope"]}"#).expectError(400, code: 4)
            try await server.call(.put, "/channeltypes/support", body: #"{"permissions": []}"#).expectError(400, code: 4)
        }
    }

    @Test("routes and ids: 'query' is reserved, percent-encoded ids work, an admin manages only channels they belong to", arguments: StoreKind.all)
    func routesAndIDs(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await setUp(server)
            try await server.call(.post, "/channels/messaging/query/query", body: #"{"data": {"members": ["alice"]}}"#)
                .expectError(400, code: 4)
            let notAllowed = try await server.call(.get, "/channels/messaging/query")
            #expect(notAllowed.status == 405 && notAllowed.headers[.allow] == "POST")
            try await server.send("messaging:ab", id: "ab3", from: "alice")
            // A distinct channel's id, percent-encoded as clients encode `!`.
            let made = try await server.ok(.post, "/channels/messaging/query", #"{"data": {"members": ["alice", "bob"]}, "user_id": "alice"}"#)
            let id = try #require(made["channel"]["id"].string)
            try await server.send("messaging:\(id)", id: "e1", from: "alice")
            let encoded = id.replacingOccurrences(of: "!", with: "%21")
            let many = try await server.ok(.get, "/channels/messaging/\(encoded)/messages?ids=e1")
            #expect(many["messages"].array.map { $0["id"].string } == ["e1"])
            try await server.call(.post, "/channels/messaging/query", body: #"{"data": {"members": ["carol", "carol"]}}"#)
                .expectError(400, code: 4)
            // GET /unread: the channel with the newest message first.
            let unread = try await server.ok(.get, "/unread?user_id=bob")
            #expect(unread["channels"].array.map { $0["channel_id"].string } == ["messaging:\(id)", "messaging:ab"])
            // An admin manages a channel once a member, not before.
            try await server.ok(.post, "/users", #"{"users": {"root": {"id": "root", "role": "admin"}}}"#)
            let root = try await server.token("root")
            try await server.call(.patch, "/channels/messaging/ab", body: #"{"set": {"motd": "x"}}"#, token: root)
                .expectError(403, code: 17)
            try await server.ok(.post, "/channels/messaging/ab", #"{"add_members": ["root"]}"#)
            try await server.ok(.patch, "/channels/messaging/ab", #"{"set": {"motd": "x"}}"#, token: root)
            try await server.ok(.post, "/channels/messaging/ab/truncate", "{}", token: root)
            try await server.ok(.delete, "/channels/messaging/ab", token: root)
            // Made again, it starts afresh: no last message, not truncated.
            try await server.createChannel("messaging:ab", members: ["alice", "bob"])
            let again = try await server.state("messaging:ab")["channel"]
            #expect(!again["last_message_at"].exists && !again["truncated_at"].exists)
        }
    }

    @Test("deleting a user: server tokens only; they leave every channel and their deleted messages are unread for no one", arguments: StoreKind.all)
    func userDeletion(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await setUp(server)
            try await server.call(.delete, "/users/bob", token: try await server.token("alice")).expectError(403, code: 17)
            try await server.call(.delete, "/users/ghost").expectError(404, code: 16)
            #expect(try await server.ok(.get, "/unread?user_id=carol")["total_unread_count"].int == 2)
            let deleted = try await server.ok(.delete, "/users/bob?mark_messages_deleted=true")
            #expect(deleted["user"]["id"].string == "bob")
            let state = try await server.state("messaging:ab")
            #expect(state["members"].array.map { $0["user_id"].string } == ["alice", "carol"])
            #expect(!state["read"].array.contains { $0["user"]["id"].string == "bob" })
            #expect(state["messages"].array.first { $0["id"].string == "ab2" }?["type"].string == "deleted")
            #expect(try await server.ok(.get, "/unread?user_id=carol")["total_unread_count"].int == 1)
            try await server.ok(.delete, "/users/bob?hard_delete=true")
            try await server.call(.get, "/unread?user_id=bob").expectError(404, code: 16)
        }
    }
}
