import Foundation
import Testing
import TicksProtocol

@testable import TicksServer

/// `POST /threads/read` (docs/api.md, "MarkThreadsRead"): every thread of a
/// user read in one call, one `notification.mark_threads_read` to their own
/// connections, and their thread read states in `POST /sync`; on every store.
@Suite("Every thread read in one call")
struct ThreadsReadTests {
    /// alice's messages ab1 (in messaging:ab, with bob and carol) and cd1 (in
    /// messaging:cd, with bob) each got replies: alice has two unread threads,
    /// and in messaging:ab one unread message (carol's reply shown there too).
    func setUp(_ server: TestServer) async throws {
        try await server.upsert("alice", "bob", "carol", "mallory")
        try await server.createChannel("messaging:ab", members: ["alice", "bob", "carol"], createdBy: "alice")
        try await server.createChannel("messaging:cd", members: ["alice", "bob"], createdBy: "alice")
        try await server.createChannel("messaging:barrier", members: ["alice", "bob"], createdBy: "alice")
        try await server.send("messaging:ab", id: "ab1", from: "alice")
        try await server.send("messaging:cd", id: "cd1", from: "alice")
        for (cid, id, parent, user, shown) in [
            ("ab", "r1", "ab1", "bob", false), ("cd", "r2", "cd1", "bob", false), ("ab", "r3", "ab1", "carol", true),
        ] {
            try await server.ok(
                .post, "/channels/messaging/\(cid)/message",
                #"{"message": {"id": "\#(id)", "text": "re", "parent_id": "\#(parent)", "show_in_channel": \#(shown), "user": {"id": "\#(user)"}}}"#)
        }
    }

    /// Every event published before this call has reached `sockets` once they see the barrier message.
    func barrier(_ server: TestServer, _ sockets: TestSocket...) async throws {
        let id = "barrier-\(UUID().uuidString.prefix(8))"
        try await server.send("messaging:barrier", id: id, from: "alice")
        for socket in sockets {
            #expect(try await socket.next("message.new")["message"]["id"].string == id)
        }
    }

    func marks(_ socket: TestSocket) -> Int {
        socket.pending.filter { $0["type"].string == "notification.mark_threads_read" }.count
    }

    @Test(
        "one call marks every thread read, answers how many moved, and tells the user's own connections once",
        arguments: StoreKind.all)
    func marksAll(kind: StoreKind) async throws {
        try await TestServer.run(kind, .live) { server in
            try await setUp(server)
            let before = try await server.ok(.get, "/unread?user_id=alice")
            #expect(before["total_unread_threads_count"].int == 2 && before["total_unread_count"].int == 1)
            let phone = try await TestSocket.connect(server, as: "alice")
            let laptop = try await TestSocket.connect(server, as: "alice")
            let bob = try await TestSocket.connect(server, as: "bob")
            defer { [phone, laptop, bob].forEach { $0.close() } }

            let answer = try await server.ok(.post, "/threads/read", "{}", token: try await server.token("alice"))
            #expect(answer["marked_threads_count"].int == 2, "\(answer)")
            #expect(answer["duration"].string != nil)
            for socket in [phone, laptop] {
                let event = try await socket.next("notification.mark_threads_read")
                #expect(event["user"]["id"].string == "alice")
                #expect(event["unread_threads"].int == 0)
                #expect(event["total_unread_count"].int == 1 && event["unread_channels"].int == 1)
                #expect(!event["cid"].exists)
            }
            // One event each (`next` took it), and none for anyone else; no thread's message.read either.
            try await barrier(server, phone, laptop, bob)
            #expect(marks(phone) == 0 && marks(laptop) == 0 && marks(bob) == 0)
            #expect(!bob.pending.contains { $0["thread"].exists })
            let after = try await server.ok(.get, "/unread?user_id=alice")
            #expect(after["total_unread_threads_count"].int == 0 && after["threads"].array.isEmpty)
            #expect(after["total_unread_count"].int == 1)  // the channel's read state did not move

            // Nothing left: 0, and no event.
            let again = try await server.ok(.post, "/threads/read", #"{"user_id": "alice"}"#)
            #expect(again["marked_threads_count"].int == 0)
            try await barrier(server, phone)
            #expect(marks(phone) == 0)
            // A later reply is unread again, in its thread only.
            try await server.ok(
                .post, "/channels/messaging/cd/message",
                #"{"message": {"id": "r4", "text": "re", "parent_id": "cd1", "user": {"id": "bob"}}}"#)
            let later = try await server.ok(.get, "/unread?user_id=alice")
            #expect(later["threads"].array.map { "\($0["parent_message_id"].string ?? "") \($0["unread_count"].int ?? -1)" } == ["cd1 1"])
        }
    }

    @Test("who may call: a user token for its own user only; a server token names an existing user", arguments: StoreKind.all)
    func callers(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await setUp(server)
            let alice = try await server.token("alice")
            try await server.call(.post, "/threads/read", body: #"{"user_id": "bob"}"#, token: alice).expectError(403, code: 17)
            try await server.call(.post, "/threads/read", body: #"{"user": {"id": "bob"}}"#, token: alice).expectError(403, code: 17)
            try await server.call(.post, "/threads/read", body: "{}").expectError(400, code: 4)
            try await server.call(.post, "/threads/read", body: #"{"user_id": "nobody"}"#).expectError(404, code: 16)
            try await server.call(.post, "/threads/read", body: #"{"user_id": "bad id!"}"#).expectError(400, code: 4)
            // None of those changed anything.
            #expect(try await server.ok(.get, "/unread?user_id=bob")["total_unread_threads_count"].int == 1)
            #expect(try await server.ok(.get, "/unread?user_id=alice")["total_unread_threads_count"].int == 2)
            // bob's one unread thread (carol's reply in ab1), named by a server token; mallory has none.
            #expect(try await server.ok(.post, "/threads/read", #"{"user_id": "bob"}"#)["marked_threads_count"].int == 1)
            #expect(try await server.ok(.get, "/unread?user_id=bob")["total_unread_threads_count"].int == 0)
            #expect(try await server.ok(.get, "/unread?user_id=alice")["total_unread_threads_count"].int == 2)
            let none = try await server.ok(.post, "/threads/read", "{}", token: try await server.token("mallory"))
            #expect(none["marked_threads_count"].int == 0)
        }
    }

    @Test("a sync tells the user's own thread read states that moved after the time, as message.read with the thread",
        arguments: StoreKind.all)
    func synced(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await setUp(server)
            let since = Timestamp.now()
            try await server.ok(.post, "/threads/read", #"{"user_id": "alice"}"#)
            try await server.ok(.post, "/threads/read", #"{"user_id": "bob"}"#)
            let body = #"{"channel_cids": ["messaging:ab", "messaging:cd"], "last_sync_at": "\#(since.rfc3339)"}"#
            let answer = try await server.ok(.post, "/sync", body, token: try await server.token("alice"))
            let threads = answer["events"].array.filter { $0["thread"].exists }
            #expect(
                threads.map { "\($0["type"].string ?? "") \($0["cid"].string ?? "") \($0["user"]["id"].string ?? "") \($0["thread"]["parent_message_id"].string ?? "") \($0["last_read_message_id"].string ?? "")" }
                    .sorted() == ["message.read messaging:ab alice ab1 r3", "message.read messaging:cd alice cd1 r2"],
                "\(answer)")
            #expect(threads.allSatisfy { $0["thread"]["reply_count"].int != nil && $0["created_at"].time.map { $0 > since } == true })
            // From after the marks on: nothing of threads.
            let later = #"{"channel_cids": ["messaging:ab"], "last_sync_at": "\#(Timestamp.now().rfc3339)"}"#
            let none = try await server.ok(.post, "/sync", later, token: try await server.token("alice"))
            #expect(!none["events"].array.contains { $0["thread"].exists })
        }
    }
}
