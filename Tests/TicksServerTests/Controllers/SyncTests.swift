import Foundation
import Testing
import TicksProtocol
import TicksTestSupport

@testable import TicksServer

/// `POST /sync` on every store: what a client missed since a time, as
/// events, with the visibility rules, its bounds and its errors.
@Suite("Sync after offline")
struct SyncTests {
    /// alice, bob and carol in messaging:s with old1 (alice), old2, old3
    /// (bob); bob has read old1. Returns the server time after which the
    /// client went offline: `old3`'s `created_at`.
    func setUp(_ server: TestServer) async throws -> Timestamp {
        try await server.upsert("alice", "bob", "carol", "dave")
        try await server.createChannel("messaging:s", members: ["alice", "bob", "carol"], createdBy: "alice")
        try await server.send("messaging:s", id: "old1", from: "alice")
        try await server.send("messaging:s", id: "old2", from: "bob")
        try await server.markRead("messaging:s", "bob", upTo: "old1")
        let last = try await server.send("messaging:s", id: "old3", from: "bob")
        return try #require(last["message"]["created_at"].time)
    }

    func sync(
        _ server: TestServer, as user: String, _ cids: [String], since: Timestamp, extra: String = ""
    ) async throws -> JSON {
        let list = cids.map { "\"\($0)\"" }.joined(separator: ",")
        let body = #"{"channel_cids": [\#(list)], "last_sync_at": "\#(since.rfc3339)"\#(extra)}"#
        return try await server.ok(.post, "/sync", body, token: try await server.token(user))
    }

    func types(_ answer: JSON) -> [String] {
        answer["events"].array.compactMap { $0["type"].string }
    }

    @Test("what alice missed comes back as the events that told it live, oldest first", arguments: StoreKind.all)
    func missed(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            let since = try await setUp(server)
            try await server.send("messaging:s", id: "new1", from: "bob", text: "while you were out")
            try await server.send("messaging:s", id: "new2", from: "bob")
            try await server.ok(.post, "/messages/old2", #"{"message": {"text": "edited", "user_id": "bob"}}"#)
            try await server.ok(.delete, "/messages/old3")
            try await server.markRead("messaging:s", "carol", upTo: "new1")
            try await server.ok(.post, "/channels/messaging/s", #"{"add_members": ["dave"]}"#)
            // Bob leaves: his reads go with him (R6), so none of his is told.
            try await server.ok(.post, "/channels/messaging/s", #"{"remove_members": ["bob"]}"#)

            let answer = try await sync(server, as: "alice", ["messaging:s"], since: since)
            #expect(
                types(answer) == [
                    "message.new", "message.new", "message.updated", "message.deleted", "message.read", "member.added",
                    "message.read", "member.removed", "message.read_by_all", "message.delivered_to_all",
                    "channel.updated",
                ])
            let events = answer["events"].array
            #expect(events[0]["message"]["id"].string == "new1")
            #expect(events[0]["message"]["text"].string == "while you were out")
            #expect(events[1]["message"]["id"].string == "new2")
            // The counts each message.new carries are alice's latest: old2, new1 and new2 (old3 is deleted).
            #expect(events[0]["unread_count"].int == 3)
            #expect(events[0]["total_unread_count"].int == 3)
            #expect(events[0]["unread_channels"].int == 1)
            #expect(events[2]["message"]["text"].string == "edited")
            #expect(events[2]["message_id"].string == "old2")
            #expect(events[3]["message"]["type"].string == "deleted")
            #expect(events[3]["hard_delete"].bool == false)
            #expect(events[4]["user"]["id"].string == "carol")
            #expect(events[4]["last_read_message_id"].string == "new1")
            #expect(events[5]["member"]["user_id"].string == "dave")
            // R5: dave has read what was there when he joined.
            #expect(events[6]["user"]["id"].string == "dave")
            #expect(events[6]["last_read_message_id"].string == "new2")
            #expect(events[7]["member"]["user_id"].string == "bob")
            // R13: with bob gone, carol and dave have read alice's old1, the last move stamping it.
            #expect(events[8]["message_id"].string == "old1" && events[9]["message_id"].string == "old1")
            #expect(events[8]["created_at"] == events[7]["created_at"])
            #expect(events[10]["channel"]["member_count"].int == 3)
            for (earlier, later) in zip(events, events.dropFirst()) {
                #expect(try #require(earlier["created_at"].time) <= #require(later["created_at"].time))
            }
            #expect(events.allSatisfy { $0["cid"].string == "messaging:s" })
            #expect(answer["reload_cids"].array.isEmpty)
            #expect(answer["remaining_cids"].array.isEmpty)
            #expect(!answer["inaccessible_cids"].exists)
        }
    }

    @Test("sync names who edited, deleted, updated, truncated and deleted, as the live events do", arguments: StoreKind.all)
    func actors(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            let since = try await setUp(server)
            try await server.createChannel("messaging:t", members: ["alice", "bob"], createdBy: "alice")
            try await server.createChannel("messaging:u", members: ["alice", "bob"], createdBy: "alice")
            try await server.ok(.post, "/messages/old1", #"{"message": {"text": "edited", "user_id": "alice"}}"#)
            try await server.ok(.delete, "/messages/old2?deleted_by=bob")
            try await server.ok(.post, "/channels/messaging/s", #"{"data": {"color": "red"}, "user_id": "carol"}"#)
            try await server.ok(.post, "/channels/messaging/t/truncate", #"{"user_id": "bob"}"#)
            try await server.ok(.delete, "/channels/messaging/u", token: try await server.token("alice"))
            // Deleted by the app (a server token naming no one): no user.
            try await server.ok(.delete, "/messages/old3")

            let answer = try await sync(server, as: "bob", ["messaging:s", "messaging:t", "messaging:u"], since: since)
            let told = answer["events"].array.filter { !["message.read", "member.added"].contains($0["type"].string) }
                .map { "\($0["cid"].string ?? "") \($0["type"].string ?? "") \($0["message_id"].string ?? "-") \($0["user"]["id"].string ?? "nobody")" }
            #expect(Set(told) == [
                "messaging:s message.updated old1 alice", "messaging:s message.deleted old2 bob",
                "messaging:s message.deleted old3 nobody", "messaging:s channel.updated - carol",
                "messaging:t channel.truncated - bob", "messaging:t channel.updated - bob",
                "messaging:u channel.deleted - alice",
            ] && told.count == 7)
            // A later change that names no updater (a message moves the channel's time) names no one again.
            try await server.send("messaging:s", id: "new1", from: "alice")
            let later = try await sync(server, as: "bob", ["messaging:s"], since: since)
            #expect(later["events"].array.first { $0["type"].string == "channel.updated" }?["user"].exists == false)
        }
    }

    @Test("a user's own read state comes back with their counts; nothing missed is no events", arguments: StoreKind.all)
    func ownState(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            let since = try await setUp(server)
            #expect(try await sync(server, as: "carol", ["messaging:s"], since: since)["events"].array.isEmpty)
            // Carol read on another device while this one was away.
            try await server.markRead("messaging:s", "carol", upTo: "old2")
            let answer = try await sync(server, as: "carol", ["messaging:s"], since: since)
            #expect(types(answer) == ["message.read", "notification.mark_read"])
            let notification = answer["events"][1]
            #expect(notification["last_read_message_id"].string == "old2")
            #expect(notification["unread_count"].int == 1)
            #expect(notification["total_unread_count"].int == 1)
            // Only delivered: told to herself as message.delivered.
            try await server.markDelivered("carol", [("messaging:s", "old3")])
            let delivered = try await sync(server, as: "carol", ["messaging:s"], since: since)
            #expect(types(delivered) == ["message.read", "notification.mark_read", "message.delivered"])
            #expect(delivered["events"][2]["last_delivered_message_id"].string == "old3")
        }
    }

    @Test(
        "R13: read and delivered by everyone is told as it stands when another member's cursor moved, as the user may see it",
        arguments: StoreKind.all)
    func reachedAll(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            let since = try await setUp(server)
            // alice's old1: bob read it before `since`; carol, who had nothing, receives it, then reads it.
            try await server.markDelivered("carol", [("messaging:s", "old1")])
            let delivered = try await sync(server, as: "alice", ["messaging:s"], since: since)
            #expect(types(delivered) == ["message.delivered", "message.delivered_to_all"])
            #expect(delivered["events"][1]["message_id"].string == "old1")
            try await server.markRead("messaging:s", "carol", upTo: "old1")
            let read = try await sync(server, as: "alice", ["messaging:s"], since: since)
            #expect(types(read) == ["message.read", "message.read_by_all", "message.delivered_to_all"])
            #expect(read["events"].array.dropFirst().allSatisfy { $0["message_id"].string == "old1" })
            let times = read["events"].array.compactMap { $0["created_at"].time }
            #expect(times.count == 3 && Set(times).count == 1, "stamped with the move that completed it")
            // bob's old2 and old3 are not read by alice: carol's read is all he is told.
            #expect(types(try await sync(server, as: "bob", ["messaging:s"], since: since)) == ["message.read"])
            // Nothing moved since: nothing told, not even where "everyone" stands.
            let after = try #require(read["events"][0]["created_at"].time)
            #expect(try await sync(server, as: "alice", ["messaging:s"], since: after)["events"].array.isEmpty)

            // R15: alice hides her reads while reciprocal receipts are on, so she sees reads as deliveries.
            try await server.ok(
                .post, "/users",
                #"{"users": {"alice": {"id": "alice", "privacy_settings": {"read_receipts": {"enabled": false}}}}}"#)
            try await server.ok(.patch, "/app", #"{"reciprocal_read_receipts": true}"#)
            let hider = try await sync(server, as: "alice", ["messaging:s"], since: since)
            #expect(types(hider) == ["message.delivered", "message.delivered_to_all"])
            try await server.ok(.patch, "/app", #"{"reciprocal_read_receipts": false}"#)

            // R9: a type without delivery events tells read by everyone alone.
            try await server.ok(.put, "/channeltypes/messaging", #"{"delivery_events": false}"#)
            #expect(
                types(try await sync(server, as: "alice", ["messaging:s"], since: since)) == [
                    "message.read", "message.read_by_all",
                ])
        }
    }

    @Test("R8 and R10: a private reader's reads reach only themselves; their delivery shows", arguments: StoreKind.all)
    func visibility(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            let since = try await setUp(server)
            try await server.ok(
                .post, "/users",
                #"{"users": {"carol": {"id": "carol", "privacy_settings": {"read_receipts": {"enabled": false}}}}}"#)
            try await server.markRead("messaging:s", "carol", upTo: "old3")
            let alice = try await sync(server, as: "alice", ["messaging:s"], since: since)
            // R13 counts a private reader by their delivered cursor, which alice sees already.
            #expect(types(alice) == ["message.delivered", "message.read_by_all", "message.delivered_to_all"])
            #expect(alice["events"][0]["user"]["id"].string == "carol")
            #expect(alice["events"][0]["last_delivered_message_id"].string == "old3")
            let carol = try await sync(server, as: "carol", ["messaging:s"], since: since)
            #expect(types(carol) == ["message.read", "notification.mark_read"])
            // A type without read events shows no one else's reads or deliveries (R8).
            try await server.createChannel("livestream:l", members: ["alice", "bob"])
            let quiet = try #require(try await server.send("livestream:l", id: "l1", from: "alice")["message"]["created_at"].time)
            try await server.markRead("livestream:l", "bob")
            #expect(try await sync(server, as: "alice", ["livestream:l"], since: quiet)["events"].array.isEmpty)
        }
    }

    @Test("channels gone, deleted or not the user's: told without a word of their content", arguments: StoreKind.all)
    func inaccessible(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            let since = try await setUp(server)
            try await server.createChannel("messaging:bobs", members: ["bob"], createdBy: "bob")
            try await server.createChannel("messaging:doomed", members: ["alice", "bob"])
            try await server.ok(.delete, "/channels/messaging/doomed")
            let answer = try await sync(
                server, as: "alice", ["messaging:bobs", "messaging:none", "messaging:doomed", "messaging:s"],
                since: since, extra: #", "with_inaccessible_cids": true"#)
            let byChannel = Dictionary(grouping: answer["events"].array) { $0["cid"].string ?? "" }
            #expect(byChannel["messaging:bobs"]?.map { $0["type"].string } == ["notification.removed_from_channel"])
            #expect(byChannel["messaging:none"]?.map { $0["type"].string } == ["notification.removed_from_channel"])
            #expect(byChannel["messaging:doomed"]?.map { $0["type"].string } == ["channel.deleted"])
            #expect(byChannel["messaging:s"] == nil)
            #expect(!answer["events"].array.contains { $0["channel"].exists || $0["message"].exists })
            #expect(Set(answer["inaccessible_cids"].array.compactMap(\.string)) == ["messaging:bobs", "messaging:none"])
            // A removed member learns it the same way.
            try await server.ok(.post, "/channels/messaging/s", #"{"remove_members": ["carol"]}"#)
            #expect(types(try await sync(server, as: "carol", ["messaging:s"], since: since)) == [
                "notification.removed_from_channel"
            ])
        }
    }

    /// An event without its `cid` (and `channel_id`, part of it): what else it says.
    func withoutCID(_ event: JSON) -> JSON {
        guard case .object(var object) = event.value else { return event }
        object["cid"] = nil
        object["channel_id"] = nil
        return JSON(.object(object))
    }

    @Test(
        "a deleted channel tells only those who were members when it was deleted; to anyone else it is a cid that never existed",
        arguments: StoreKind.all)
    func deletedToOutsiders(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            let since = try await setUp(server)
            // Carol leaves before the delete; dave was never a member.
            try await server.ok(.post, "/channels/messaging/s", #"{"remove_members": ["carol"]}"#)
            let deleted = try await server.ok(.delete, "/channels/messaging/s")
            let deletedAt = try #require(deleted["channel"]["deleted_at"].time)
            for outsider in ["carol", "dave"] {
                let answer = try await sync(
                    server, as: outsider, ["messaging:s", "messaging:never"], since: since,
                    extra: #", "with_inaccessible_cids": true"#)
                let events = answer["events"].array
                #expect(events.map { $0["cid"].string } == ["messaging:s", "messaging:never"], "\(answer)")
                #expect(events.allSatisfy { $0["type"].string == "notification.removed_from_channel" }, "\(answer)")
                // Word for word the same, the time included.
                #expect(withoutCID(events[0]) == withoutCID(events[1]), "\(answer)")
                #expect(
                    Set(answer["inaccessible_cids"].array.compactMap(\.string)) == ["messaging:s", "messaging:never"])
            }
            // Alice and bob were members when it was deleted: they still hear of it, at its time.
            for member in ["alice", "bob"] {
                let answer = try await sync(
                    server, as: member, ["messaging:s", "messaging:never"], since: since,
                    extra: #", "with_inaccessible_cids": true"#)
                let byChannel = Dictionary(grouping: answer["events"].array) { $0["cid"].string ?? "" }
                #expect(byChannel["messaging:s"]?.map { $0["type"].string } == ["channel.deleted"], "\(answer)")
                #expect(byChannel["messaging:s"]?.first?["created_at"].time == deletedAt)
                #expect(answer["inaccessible_cids"].array.compactMap(\.string) == ["messaging:never"])
            }
        }
    }

    @Test(
        "a deleted channel made again by another user starts empty: nothing of the old one reaches its members",
        arguments: StoreKind.all)
    func recreatedStartsEmpty(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await server.upsert("erin")
            let beforeAll = Timestamp.now()
            _ = try await setUp(server)
            // The old channel's history of every kind: custom data, messages, a reply and its thread
            // read state, reads and deliveries, a member who left, a truncation.
            try await server.ok(.patch, "/channels/messaging/s", #"{"set": {"color": "red"}}"#)
            try await server.ok(
                .post, "/channels/messaging/s/message",
                #"{"message": {"id": "reply1", "text": "re", "parent_id": "old1", "user": {"id": "bob"}}}"#)
            try await server.markRead("messaging:s", "carol", upTo: "old3")
            try await server.markDelivered("alice", [("messaging:s", "old3")])
            try await server.ok(.post, "/channels/messaging/s", #"{"remove_members": ["carol"]}"#)
            try await server.ok(.post, "/channels/messaging/s/truncate", "{}")
            try await server.send("messaging:s", id: "old4", from: "alice")
            try await server.ok(.delete, "/channels/messaging/s", token: try await server.token("alice"))

            // Dave makes messaging:s again, with bob and erin.
            let dave = try await server.token("dave")
            let made = try await server.call(
                .post, "/channels/messaging/s/query", body: #"{"data": {"members": ["dave", "bob", "erin"]}}"#,
                token: dave)
            #expect(made.status == 201, "\(made.body)")
            let channel = try made.json()
            #expect(channel["messages"].array.isEmpty)
            #expect(!channel["channel"]["color"].exists)
            #expect(!channel["channel"]["truncated_at"].exists)
            #expect(!channel["channel"]["deleted_at"].exists)
            #expect(channel["channel"]["created_by"]["id"].string == "dave")
            #expect(Set(channel["read"].array.compactMap { $0["user"]["id"].string }) == ["dave", "bob", "erin"])
            #expect(channel["read"].array.allSatisfy { !$0["last_read_message_id"].exists })

            for user in ["dave", "bob", "erin"] {
                let answer = try await sync(server, as: user, ["messaging:s"], since: beforeAll)
                let events = answer["events"].array
                // The new channel's members joining, and the channel: nothing else.
                #expect(Set(types(answer)) == ["member.added", "channel.updated"], "\(user): \(answer)")
                #expect(
                    Set(events.compactMap { $0["member"]["user_id"].string }) == ["dave", "bob", "erin"],
                    "\(user): \(answer)")
                #expect(!events.contains { $0["message"].exists || $0["last_read_message_id"].exists })
            }
            // Its unread counts know nothing of the old messages, and their ids are free.
            let unread = try await server.ok(.get, "/unread", token: try await server.token("bob"))
            #expect(unread["total_unread_count"].int == 0)
            try await server.call(.get, "/messages/old1").expectError(404, code: 16)
            try await server.send("messaging:s", id: "old1", from: "dave", text: "a new first")
            #expect(try await server.ok(.get, "/messages/old1")["message"]["text"].string == "a new first")
            #expect(try await server.receipts("old1", as: "dave")["receipts"].array.isEmpty)
        }
    }

    @Test("bounds: a channel past its limit is named for a reload, channels past the answer's are left for the next call")
    func bounds() async throws {
        var limits = ServerLimits.patient
        limits.syncEventsPerChannel = 5
        limits.syncEventsPerAnswer = 10
        try await TestServer.run(.standard, limits: limits) { server in
            try await server.upsert("alice", "bob")
            let cids = ["messaging:busy", "messaging:q1", "messaging:q2", "messaging:q3"]
            for cid in cids { try await server.createChannel(cid, members: ["alice", "bob"]) }
            let marker = try await server.send("messaging:busy", id: "marker", from: "alice")
            let since = try #require(marker["message"]["created_at"].time)
            for index in 1...6 { try await server.send("messaging:busy", id: "busy\(index)", from: "bob") }
            for channel in 1...3 {
                for index in 1...3 { try await server.send("messaging:q\(channel)", id: "q\(channel)-\(index)", from: "bob") }
            }
            // Each q channel: three message.new, bob's message.read (R4) and channel.updated, 5 in all.
            let first = try await sync(server, as: "alice", cids, since: since)
            #expect(first["reload_cids"].array.compactMap(\.string) == ["messaging:busy"])
            #expect(Set(first["events"].array.compactMap { $0["cid"].string }) == ["messaging:q1", "messaging:q2"])
            #expect(first["events"].array.count == 10)
            #expect(first["remaining_cids"].array.compactMap(\.string) == ["messaging:q3"])
            let second = try await sync(server, as: "alice", ["messaging:q3"], since: since)
            #expect(second["events"].array.count == 5)
            #expect(second["remaining_cids"].array.isEmpty)
            #expect(second["reload_cids"].array.isEmpty)
        }
    }

    @Test("bad requests: each a clear 400 or 403, in Stream's format")
    func badRequests() async throws {
        try await TestServer.run { server in
            let since = try await setUp(server)
            let alice = try await server.token("alice")
            let at = since.rfc3339
            let tooMany = (0...255).map { "\"messaging:c\($0)\"" }.joined(separator: ",")
            let old = Timestamp(microseconds: Timestamp.now().microseconds - 31 * 24 * 3600 * 1_000_000).rfc3339
            for body in [
                #"{"last_sync_at": "\#(at)"}"#,
                #"{"channel_cids": [], "last_sync_at": "\#(at)"}"#,
                #"{"channel_cids": [\#(tooMany)], "last_sync_at": "\#(at)"}"#,
                #"{"channel_cids": ["no-colon"], "last_sync_at": "\#(at)"}"#,
                #"{"channel_cids": ["messaging:s"]}"#,
                #"{"channel_cids": ["messaging:s"], "last_sync_at": "yesterday"}"#,
                #"{"channel_cids": ["messaging:s"], "last_sync_at": "\#(old)"}"#,
                #"{"channel_cids": "messaging:s", "last_sync_at": "\#(at)"}"#,
            ] {
                try await server.call(.post, "/sync", body: body, token: alice).expectError(400, code: 4)
            }
            // A server token must name the user; a user token cannot act for another.
            try await server.call(.post, "/sync", body: #"{"channel_cids": ["messaging:s"], "last_sync_at": "\#(at)"}"#)
                .expectError(400, code: 4)
            try await server.call(
                .post, "/sync", body: #"{"channel_cids": ["messaging:s"], "last_sync_at": "\#(at)", "user_id": "bob"}"#,
                token: alice
            ).expectError(403, code: 17)
            let asServer = try await server.ok(
                .post, "/sync", #"{"channel_cids": ["messaging:s"], "last_sync_at": "\#(at)", "user_id": "alice"}"#)
            #expect(asServer["events"].array.isEmpty)
        }
    }
}
