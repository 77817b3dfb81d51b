import Foundation
import HTTPTypes
import Testing
import TicksProtocol
import TicksTestSupport

@testable import TicksServer

/// `GET /unread/explain` and `POST /unread/recount` (docs/api.md, "Unread
/// counts"; R7): an explained count is the count served, and no history
/// leaves a kept count that a recount would change.
@Suite("Unread counts that explain themselves")
struct UnreadExplainTests {
    @Test("explain names the rule of each message after the cursor", arguments: StoreKind.all)
    func rules(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await server.upsert("alice", "bob", "carol", "dave")
            try await server.createChannel("messaging:g", members: ["alice", "bob", "carol"])
            try await server.send("messaging:g", id: "m1", from: "alice")
            try await server.send("messaging:g", id: "m2", from: "bob")
            try await server.send("messaging:g", id: "m3", from: "alice")
            try await server.ok(.delete, "/messages/m3")
            try await reply(server, "messaging:g", "r1", from: "alice", to: "m1", shown: false)
            try await reply(server, "messaging:g", "r2", from: "carol", to: "m1", shown: true)
            try await server.markUnread("messaging:g", "bob", from: "m1")

            let bob = try await server.token("bob")
            let answer = try await server.ok(.get, "/unread/explain?cid=messaging:g", token: bob)
            #expect(answer["cid"].string == "messaging:g" && answer["user_id"].string == "bob")
            #expect(answer["member"].bool == true)
            #expect(answer["unread_count"].int == 2 && answer["counted"].int == 2)
            #expect(answer["last_read_message_id"].value == .null && answer["last_read"].string != nil)
            let rules = answer["messages"].array.map { "\($0["id"].string ?? "?")=\($0["rule"].string ?? "?")" }
            #expect(rules == ["m1=counted", "m2=own", "m3=deleted", "r1=thread_only", "r2=counted"])
            #expect(answer["messages"].array.map { $0["counted"].bool } == [true, false, false, false, true])
            #expect(answer["messages"][0]["created_at"].string != nil)
            #expect(answer["messages_after_cursor"].int == 5)
            let counts = answer["counts"]
            #expect(
                [counts["counted"].int, counts["own"].int, counts["deleted"].int, counts["thread_only"].int]
                    == [2, 1, 1, 1])
            #expect(try await servedCount(server, "bob", "messaging:g") == 2)

            // A server token names the user; after a read nothing is after the cursor.
            try await server.markRead("messaging:g", "carol")
            let carol = try await server.ok(.get, "/unread/explain?cid=messaging:g&user_id=carol")
            #expect(carol["unread_count"].int == 0 && carol["counted"].int == 0 && carol["messages"].array.isEmpty)
            #expect(carol["last_read_message_id"].string == "r2")

            // Refusals, in Stream's format.
            try await server.call(.get, "/unread/explain?cid=messaging:g&user_id=carol", token: bob)
                .expectError(403, code: 17)
            try await server.call(.get, "/unread/explain?cid=messaging:g").expectError(400, code: 4)
            try await server.call(.get, "/unread/explain?user_id=bob").expectError(400, code: 4)
            try await server.call(.get, "/unread/explain?cid=messaging:none", token: bob).expectError(404, code: 16)
            try await server.call(.get, "/unread/explain?cid=messaging:g", token: try await server.token("dave"))
                .expectError(403, code: 17)
            // A server token asking for a non-member: no read state, nothing counted.
            let dave = try await server.ok(.get, "/unread/explain?cid=messaging:g&user_id=dave")
            #expect(dave["member"].bool == false && dave["unread_count"].int == 0 && dave["messages"].array.isEmpty)
            #expect(dave["last_read"].value == .null)
            try await server.call(.get, "/unread/explain?cid=messaging:g&user_id=nobody").expectError(404, code: 16)
        }
    }

    @Test("explain lists the newest 100 after the cursor and counts them all", arguments: StoreKind.all)
    func bounded(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await server.upsert("alice", "bob")
            try await server.createChannel("messaging:long", members: ["alice", "bob"])
            for index in 1...(SQLStore.explainPage + 20) {
                try await server.send("messaging:long", id: "l\(index)", from: "alice")
            }
            let answer = try await server.ok(.get, "/unread/explain?cid=messaging:long&user_id=bob")
            let total = SQLStore.explainPage + 20
            #expect(answer["unread_count"].int == total && answer["counted"].int == total)
            let ids = answer["messages"].array.compactMap { $0["id"].string }
            #expect(ids == ((total - 99)...total).map { "l\($0)" })
        }
    }

    @Test("recount sets right drift made by a direct update, and says what it fixed", arguments: StoreKind.all)
    func recountFixesDrift(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await server.upsert("alice", "bob", "carol")
            try await server.createChannel("messaging:d", members: ["alice", "bob", "carol"])
            try await server.send("messaging:d", id: "d1", from: "alice")
            try await reply(server, "messaging:d", "d2", from: "alice", to: "d1", shown: false)
            try await reply(server, "messaging:d", "d3", from: "bob", to: "d1", shown: false)
            #expect(try await server.ok(.post, "/unread/recount", "{}")["fixed"].array.isEmpty)

            let store = try #require(server.store as? SQLStore)
            try await store.engine.write {
                Step.execute("UPDATE member SET unread = unread + 3 WHERE user_id = 'bob'").then { _ in
                    // Carol's count set outright, as of the channel's position now (`StoreSQL.keptNow`).
                    Step.execute(
                        """
                        UPDATE member SET unread = 6, counted_at = (SELECT counted FROM channel WHERE pk = member.channel_pk)
                        WHERE user_id = 'carol'
                        """)
                }.then { _ in Step.execute("UPDATE thread_read SET unread = 5 WHERE user_id = 'alice'") }
            }
            let drifted = try await server.ok(.get, "/unread/explain?cid=messaging:d&user_id=bob")
            #expect(drifted["unread_count"].int == 4 && drifted["counted"].int == 1)
            // The totals are sums of the members' counts: they drift with them, and are set right with them.
            #expect(try await server.ok(.get, "/unread?user_id=carol")["total_unread_count"].int == 6)

            let bob = try await server.token("bob")
            try await server.call(.post, "/unread/recount", body: "{}", token: bob).expectError(403, code: 17)
            let fixed = try await server.ok(.post, "/unread/recount", #"{"user_ids": ["bob", "carol", "alice"]}"#)
            #expect(fixed["users_checked"].int == 3 && fixed["fixed_count"].int == 3)
            let lines = Set(
                fixed["fixed"].array.map {
                    "\($0["user_id"].string ?? "") \($0["cid"].string ?? "-") \($0["field"].string ?? "") "
                        + "\($0["was"].int ?? -1)→\($0["now"].int ?? -1)"
                })
            #expect(
                lines == [
                    "bob messaging:d unread 4→1", "carol messaging:d unread 6→1",
                    "alice messaging:d thread_unread 5→1",
                ])
            #expect(try await servedCount(server, "bob", "messaging:d") == 1)
            #expect(try await server.ok(.get, "/unread?user_id=carol")["channels"].array.count == 1)
            #expect(try await server.ok(.get, "/unread?user_id=carol")["total_unread_count"].int == 1)
            #expect(try await server.ok(.post, "/unread/recount")["fixed"].array.isEmpty)
            let metrics = try await server.call(.get, "/metrics").body
            #expect(metrics.contains("ticks_unread_drift_fixed_total 3"))
        }
    }

    @Test("a recount lists the first 1,000 fixes and counts them all, batch after batch")
    func listedFixesAreBounded() {
        let fix = UnreadFix(
            userID: "u", cid: ChannelID(type: "messaging", id: "d"), parentID: nil, field: .unread, was: 1, now: 0)
        var total = UnreadRecount(usersChecked: 0, fixes: [])
        for _ in 1...15 { total.add(UnreadRecount(usersChecked: 100, fixes: Array(repeating: fix, count: 90))) }
        total.add(UnreadRecount(usersChecked: 1, fixes: Array(repeating: fix, count: 1_200)))
        #expect(total.usersChecked == 1_501)
        #expect(total.fixedCount == 15 * 90 + 1_200)
        #expect(total.fixes.count == UnreadRecount.listedFixes)
        #expect(UnreadRecount(usersChecked: 1, fixes: Array(repeating: fix, count: 1_001)).fixes.count == 1_000)
    }

    @Test("recount refuses bad input", arguments: StoreKind.all)
    func recountInput(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await server.upsert("alice")
            try await server.call(.post, "/unread/recount", body: #"{"user_ids": []}"#).expectError(400, code: 4)
            try await server.call(.post, "/unread/recount", body: #"{"user_ids": "alice"}"#).expectError(400, code: 4)
            let many = (0...100).map { "\"u\($0)\"" }.joined(separator: ",")
            try await server.call(.post, "/unread/recount", body: #"{"user_ids": [\#(many)]}"#).expectError(
                400, code: 4)
            try await server.call(.post, "/unread/recount", body: #"{"user_ids": ["a b"]}"#).expectError(400, code: 4)
            let answer = try await server.ok(.post, "/unread/recount", #"{"user_ids": ["alice", "ghost"]}"#)
            #expect(answer["users_checked"].int == 1 && answer["fixed"].array.isEmpty)
        }
    }

    /// Found by the random histories: a soft-deleted user kept the totals of
    /// the channels they left with the delete (`GET /unread` answered
    /// `total_unread_count` 1 and no channel).
    @Test("a deleted user keeps no totals of the channels they left", arguments: StoreKind.all)
    func deletedUserTotals(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await server.upsert("alice", "bob")
            try await server.createChannel("messaging:x", members: ["alice", "bob"])
            try await server.send("messaging:x", id: "x1", from: "alice")
            try await server.ok(.delete, "/users/bob")
            let served = try await server.ok(.get, "/unread?user_id=bob")
            #expect(served["total_unread_count"].int == 0 && served["channels"].array.isEmpty, "\(served)")
            #expect(try await server.ok(.post, "/unread/recount")["fixed"].array.isEmpty)
        }
    }

    /// A thread's parent author who left and came back joins the thread again at its next reply.
    @Test("a returning parent author's thread count is what a recount makes it", arguments: StoreKind.all)
    func returningAuthor(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await server.upsert("alice", "bob")
            try await server.createChannel("messaging:t", members: ["alice", "bob"])
            try await server.send("messaging:t", id: "t1", from: "alice")
            try await reply(server, "messaging:t", "t2", from: "bob", to: "t1", shown: false)
            try await server.removeMembers("messaging:t", ["alice"])
            try await server.addMembers("messaging:t", ["alice"])
            try await reply(server, "messaging:t", "t3", from: "bob", to: "t1", shown: false)
            let recount = try await server.ok(.post, "/unread/recount")
            #expect(recount["fixed"].array.isEmpty, "\(recount)")
        }
    }

    /// After every seeded random history, on every store: a recount finds
    /// nothing to fix, and each member's explained count is the kept one and
    /// `GET /unread`'s.
    @Test("no drift after random histories", arguments: StoreKind.all, [1, 2, 3, 4] as [UInt64])
    func noDrift(kind: StoreKind, seed: UInt64) async throws {
        try await TestServer.run(kind) { server in
            var random = SQLiteStoreTests.SplitMix(state: seed)
            var history = History(users: (0..<4).map { "u\($0)" }, cids: (0..<3).map { "messaging:h\($0)" })
            try await server.upsert("u0", "u1", "u2", "u3")
            for cid in history.cids {
                try await server.createChannel(cid, members: Array(history.users.prefix(3)))
                history.members[cid] = Set(history.users.prefix(3))
            }
            for step in 0..<120 {
                let done = try await history.step(step, &random, server)
                #expect(done.status < 500, "step \(step): \(done.what) → \(done.status) \(done.body)")
            }
            let recount = try await server.ok(.post, "/unread/recount")
            #expect(recount["fixed"].array.isEmpty, "seed \(seed): \(recount["fixed"])")
            try await expectExplained(server, history)
        }
    }

    /// A random history of the calls that move unread counts.
    struct History {
        var users: [String]
        var cids: [String]
        var members: [String: Set<String>] = [:]
        var messages: [String: [String]] = [:]
        var next = 0

        mutating func step(_ step: Int, _ random: inout SQLiteStoreTests.SplitMix, _ server: TestServer) async throws
            -> (what: String, status: Int, body: String)
        {
            let cid = cids.randomElement(using: &random)!
            let path = "/channels/" + cid.replacingOccurrences(of: ":", with: "/")
            let user = users.randomElement(using: &random)!
            let member = members[cid, default: []].sorted().randomElement(using: &random) ?? user
            let message = messages[cid, default: []].randomElement(using: &random)
            let roll = Int.random(in: 0..<100, using: &random)
            let (what, method, uri, body): (String, HTTPRequest.Method, String, String?)
            switch roll {
            case 0..<35:
                next += 1
                let id = "h\(next)"
                let parent = Bool.random(using: &random) ? message.map { #", "parent_id": "\#($0)""# } ?? "" : ""
                let shown = parent.isEmpty ? "" : #", "show_in_channel": \#(Bool.random(using: &random))"#
                messages[cid, default: []].append(id)
                (what, method, uri, body) = (
                    "send", .post, "\(path)/message",
                    #"{"message": {"id": "\#(id)", "text": "t", "user": {"id": "\#(member)"}\#(parent)\#(shown)}}"#
                )
            case 35..<50:
                let upTo = Bool.random(using: &random) ? message.map { #", "message_id": "\#($0)""# } ?? "" : ""
                (what, method, uri, body) = ("read", .post, "\(path)/read", #"{"user": {"id": "\#(member)"}\#(upTo)}"#)
            case 50..<58:
                let thread = message.map { #", "thread_id": "\#($0)""# } ?? ""
                (what, method, uri, body) = (
                    "read thread", .post, "\(path)/read", #"{"user": {"id": "\#(member)"}\#(thread)}"#
                )
            case 58..<70:
                (what, method, uri, body) = (
                    "unread", .post, "\(path)/unread",
                    #"{"user": {"id": "\#(member)"}, "message_id": "\#(message ?? "none")"}"#
                )
            case 70..<80:
                let hard = Bool.random(using: &random)
                (what, method, uri, body) = ("delete", .delete, "/messages/\(message ?? "none")?hard=\(hard)", nil)
            case 80..<87:
                members[cid, default: []].insert(user)
                (what, method, uri, body) = ("add", .post, path, #"{"add_members": ["\#(user)"]}"#)
            case 87..<93:
                members[cid, default: []].remove(member)
                (what, method, uri, body) = ("remove", .post, path, #"{"remove_members": ["\#(member)"]}"#)
            case 93..<97:
                let hard = Bool.random(using: &random)
                (what, method, uri, body) = ("truncate", .post, "\(path)/truncate", #"{"hard_delete": \#(hard)}"#)
            case 97..<99:
                (what, method, uri, body) = ("read all", .post, "/channels/read", #"{"user": {"id": "\#(member)"}}"#)
            default:
                for cid in cids { members[cid]?.remove(user) }
                let messagesToo = Bool.random(using: &random)
                (what, method, uri, body) = (
                    "delete user", .delete, "/users/\(user)?mark_messages_deleted=\(messagesToo)", nil
                )
            }
            let reply = try await server.call(method, uri, body: body)
            return ("\(what) \(method) \(uri) \(body ?? "")", reply.status, reply.body)
        }
    }

    /// Every member's explained count is the kept one, counted afresh alike, and `GET /unread`'s.
    func expectExplained(_ server: TestServer, _ history: History) async throws {
        for user in history.users {
            let served = try await server.ok(.get, "/unread?user_id=\(user)")
            var total = 0
            for cid in history.cids {
                let explained = try await server.ok(.get, "/unread/explain?cid=\(cid)&user_id=\(user)")
                let kept = explained["unread_count"].int
                #expect(kept == explained["counted"].int, "\(user) in \(cid): \(explained)")
                let listed = served["channels"].array.first { $0["channel_id"].string == cid }?["unread_count"].int ?? 0
                #expect(kept == listed, "\(user) in \(cid): served \(listed), explained \(explained)")
                total += kept ?? 0
            }
            #expect(served["total_unread_count"].int == total, "\(user): \(served)")
        }
    }

    func servedCount(_ server: TestServer, _ user: String, _ cid: String) async throws -> Int {
        let served = try await server.ok(.get, "/unread?user_id=\(user)")
        return served["channels"].array.first { $0["channel_id"].string == cid }?["unread_count"].int ?? 0
    }

    /// A reply in `cid` (the channel of `parent`).
    func reply(_ server: TestServer, _ cid: String, _ id: String, from user: String, to parent: String, shown: Bool)
        async throws
    {
        try await server.ok(
            .post, "/channels/\(server.path(cid))/message",
            #"{"message": {"id": "\#(id)", "text": "re", "user": {"id": "\#(user)"}, "parent_id": "\#(parent)", "show_in_channel": \#(shown)}}"#
        )
    }
}
