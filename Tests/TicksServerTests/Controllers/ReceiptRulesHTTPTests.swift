import Foundation
import Testing
import TicksProtocol

@testable import TicksServer

/// R1–R12 through the HTTP API, on an in-memory and an on-disk store.
@Suite("Receipt rules over HTTP")
struct ReceiptRulesHTTPTests {
    /// alice, bob and carol in messaging:g with m1…m3 from alice.
    func group(_ server: TestServer) async throws {
        try await server.upsert("alice", "bob", "carol")
        try await server.createChannel("messaging:g", members: ["alice", "bob", "carol"], createdBy: "alice")
        for id in ["m1", "m2", "m3"] { try await server.send("messaging:g", id: id, from: "alice") }
    }

    @Test("R1: marking read also marks delivered", arguments: StoreKind.all)
    func readImpliesDelivered(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await group(server)
            try await server.markRead("messaging:g", "bob", upTo: "m2")
            let bob = try #require(try await server.readState("messaging:g", of: "bob"))
            #expect(bob["last_read_message_id"].string == "m2")
            #expect(bob["last_delivered_message_id"].string == "m2")
            let receipts = try await server.receipts("m2")
            #expect(receipts["delivered_count"].int == 1)
            #expect(receipts["read_count"].int == 1)
            #expect(receipts["receipts"][0]["delivered_at"].time == receipts["receipts"][0]["read_at"].time)
        }
    }

    @Test("R2: an older target changes nothing and sends no event", arguments: StoreKind.all)
    func monotonic(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await group(server)
            try await server.markRead("messaging:g", "bob", upTo: "m3")
            let before = try #require(try await server.readState("messaging:g", of: "bob"))
            try await server.markRead("messaging:g", "bob", upTo: "m1")
            try await server.markDelivered("bob", [("messaging:g", "m1")])
            let after = try #require(try await server.readState("messaging:g", of: "bob"))
            #expect(after["last_read_message_id"].string == "m3")
            #expect(after["last_read"].time == before["last_read"].time)
            #expect(after["last_delivered_message_id"].string == "m3")
            #expect(try await server.receipts("m1")["receipts"][0]["read_at"].time == before["last_read"].time)
        }
    }

    @Test("R3: up to and including M; without M, up to the newest", arguments: StoreKind.all)
    func upToAndIncluding(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await group(server)
            try await server.markRead("messaging:g", "bob", upTo: "m2")
            #expect(try await server.receipts("m1")["read_count"].int == 1)
            #expect(try await server.receipts("m2")["read_count"].int == 1)
            #expect(try await server.receipts("m3")["read_count"].int == 0)
            let bob = try #require(try await server.readState("messaging:g", of: "bob"))
            #expect(bob["unread_messages"].int == 1)
            #expect(bob["first_unread_message_id"].string == "m3")
            try await server.markRead("messaging:g", "carol")
            let carol = try #require(try await server.readState("messaging:g", of: "carol"))
            #expect(carol["last_read_message_id"].string == "m3")
            #expect(carol["unread_messages"].int == 0)
            #expect(!carol["first_unread_message_id"].exists)
        }
    }

    @Test("R4: own messages are never unread; sending moves the sender's read cursor", arguments: StoreKind.all)
    func ownMessages(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await group(server)
            let alice = try #require(try await server.readState("messaging:g", of: "alice"))
            #expect(alice["unread_messages"].int == 0)
            #expect(alice["last_read_message_id"].string == "m3")
            // bob answers: his cursor moves to his message, past alice's three.
            try await server.send("messaging:g", id: "b1", from: "bob")
            let bob = try #require(try await server.readState("messaging:g", of: "bob"))
            #expect(bob["unread_messages"].int == 0)
            #expect(bob["last_read_message_id"].string == "b1")
            let aliceNow = try #require(try await server.readState("messaging:g", of: "alice"))
            #expect(aliceNow["unread_messages"].int == 1)
            #expect(aliceNow["first_unread_message_id"].string == "b1")
        }
    }

    @Test("R5: a new member has read everything already in the channel", arguments: StoreKind.all)
    func newMember(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await group(server)
            try await server.upsert("dave")
            try await server.ok(.post, "/channels/messaging/g", #"{"add_members": ["dave"], "message": null}"#)
            let dave = try #require(try await server.readState("messaging:g", of: "dave"))
            #expect(dave["unread_messages"].int == 0)
            #expect(dave["last_read_message_id"].string == "m3")
            let receipts = try await server.receipts("m1")
            #expect(receipts["read_count"].int == 1)
            #expect(receipts["receipts"][0]["user"]["id"].string == "dave")
            try await server.send("messaging:g", id: "m4", from: "alice")
            #expect(try await server.readState("messaging:g", of: "dave")?["unread_messages"].int == 1)
        }
    }

    @Test("R6: a removed member's reads go; a message read only by them is back to sent", arguments: StoreKind.all)
    func removedMember(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await group(server)
            try await server.markRead("messaging:g", "bob", upTo: "m3")
            try await server.markDelivered("carol", [("messaging:g", "m3")])
            #expect(try await server.receipts("m3")["read_count"].int == 1)
            try await server.ok(.post, "/channels/messaging/g", #"{"remove_members": ["bob"]}"#)
            let receipts = try await server.receipts("m3")
            #expect(receipts["read_count"].int == 0)
            #expect(receipts["delivered_count"].int == 1)
            #expect(receipts["receipts"].array.map { $0["user"]["id"].string } == ["carol"])
            #expect(try await server.readState("messaging:g", of: "bob") == nil)
            // Added again, bob starts afresh (R5), not with his old cursor log.
            try await server.ok(.post, "/channels/messaging/g", #"{"add_members": [{"user_id": "bob"}]}"#)
            let again = try await server.receipts("m3")["receipts"].array.first { $0["user"]["id"].string == "bob" }
            #expect(again?["read_at"].exists == true)
        }
    }

    @Test("R7: unread count and first unread, and mark unread moving the cursor back", arguments: StoreKind.all)
    func unreadCount(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await group(server)
            try await server.markRead("messaging:g", "bob")
            try await server.markUnread("messaging:g", "bob", from: "m2")
            let bob = try #require(try await server.readState("messaging:g", of: "bob"))
            #expect(bob["unread_messages"].int == 2)
            #expect(bob["first_unread_message_id"].string == "m2")
            #expect(bob["last_read_message_id"].string == "m1")
            #expect(bob["last_delivered_message_id"].string == "m3")
            let m2 = try await server.receipts("m2")
            #expect(m2["read_count"].int == 0)
            #expect(m2["delivered_count"].int == 1)
            // Read again: m2 gets the new read time, m1 keeps its first one.
            let m1Before = try await server.receipts("m1")["receipts"][0]["read_at"].time
            try await server.markRead("messaging:g", "bob")
            let m2Again = try await server.receipts("m2")["receipts"][0]
            #expect(try #require(m2Again["read_at"].time) > #require(m1Before))
            #expect(try await server.receipts("m1")["receipts"][0]["read_at"].time == m1Before)
            // Totals on the WebSocket's `me` come from the same rule.
            let totals = try await server.store.unreadTotals(of: "carol")
            #expect(totals == UnreadTotals(messages: 3, channels: 1))
        }
    }

    @Test("R8: read_events off keeps the reader's own state but shows others nothing", arguments: StoreKind.all)
    func readEventsOff(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await server.upsert("alice", "bob")
            try await server.createChannel("livestream:l", members: ["alice", "bob"])
            try await server.send("livestream:l", id: "l1", from: "alice")
            try await server.markRead("livestream:l", "bob")
            #expect(try await server.readState("livestream:l", of: "bob", as: "alice") == nil)
            let own = try #require(try await server.readState("livestream:l", of: "bob", as: "bob"))
            #expect(own["last_read_message_id"].string == "l1")
            #expect(own["unread_messages"].int == 0)
            let receipts = try await server.receipts("l1", as: "alice")
            #expect(receipts["read_count"].int == 0)
            #expect(receipts["receipts"].array.isEmpty)
        }
    }

    @Test("R9: delivery_events off: mark delivered is accepted and ignored", arguments: StoreKind.all)
    func deliveryEventsOff(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            let created = try await server.ok(.post, "/channeltypes", #"{"name": "quiet", "commands": ["all"]}"#)
            #expect(created["read_events"].bool == true)
            #expect(created["delivery_events"].bool == false)
            try await server.upsert("alice", "bob")
            try await server.createChannel("quiet:q", members: ["alice", "bob"])
            try await server.send("quiet:q", id: "q1", from: "alice")
            try await server.markDelivered("bob", [("quiet:q", "q1")])
            let receipts = try await server.receipts("q1", as: "alice")
            #expect(receipts["delivered_count"].int == 0)
            #expect(receipts["receipts"].array.isEmpty)
            let bob = try #require(try await server.readState("quiet:q", of: "bob", as: "alice"))
            #expect(!bob["last_delivered_at"].exists)
        }
    }

    @Test("R9: a channel type changed while serving applies to the next receipt", arguments: StoreKind.all)
    func channelTypeChangeApplies(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await server.upsert("alice", "bob")
            try await server.createChannel("messaging:t", members: ["alice", "bob"])
            try await server.send("messaging:t", id: "t1", from: "alice")
            try await server.markDelivered("bob", [("messaging:t", "t1")])
            #expect(try await server.receipts("t1", as: "alice")["delivered_count"].int == 1)

            try await server.ok(.put, "/channeltypes/messaging", #"{"delivery_events": false}"#)
            try await server.send("messaging:t", id: "t2", from: "alice")
            try await server.markDelivered("bob", [("messaging:t", "t2")])
            #expect(try await server.receipts("t2", as: "alice")["delivered_count"].int == 0)

            try await server.ok(.put, "/channeltypes/messaging", #"{"delivery_events": true}"#)
            try await server.markDelivered("bob", [("messaging:t", "t2")])
            #expect(try await server.receipts("t2", as: "alice")["delivered_count"].int == 1)
        }
    }

    @Test("R10: private read receipts: own unread counts kept, nobody else sees the read", arguments: StoreKind.all)
    func privateReceipts(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await server.upsert("alice")
            try await server.ok(
                .post, "/users",
                #"{"users": {"bob": {"id": "bob", "privacy_settings": {"read_receipts": {"enabled": false}}}}}"#)
            try await server.createChannel("messaging:p", members: ["alice", "bob"])
            try await server.send("messaging:p", id: "p1", from: "alice")
            try await server.markRead("messaging:p", "bob")
            let seenByAlice = try #require(try await server.readState("messaging:p", of: "bob", as: "alice"))
            #expect(!seenByAlice["last_read"].exists)
            #expect(seenByAlice["last_delivered_message_id"].string == "p1")
            let receipts = try await server.receipts("p1", as: "alice")
            #expect(receipts["read_count"].int == 0)
            #expect(receipts["delivered_count"].int == 1)
            let own = try #require(try await server.readState("messaging:p", of: "bob", as: "bob"))
            #expect(own["unread_messages"].int == 0)
            #expect(own["last_read_message_id"].string == "p1")
        }
    }

    @Test("R11: sending an existing id returns the stored message once", arguments: StoreKind.all)
    func idempotentSend(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await group(server)
            let first = try await server.call(
                .post, "/channels/messaging/g/message", body: #"{"message": {"id": "r1", "text": "once", "user_id": "bob"}}"#)
            let retry = try await server.call(
                .post, "/channels/messaging/g/message", body: #"{"message": {"id": "r1", "text": "twice", "user_id": "bob"}}"#)
            #expect(first.status == 201)
            #expect(retry.status == 200)
            #expect(try retry.json()["message"] == first.json()["message"])
            let messages = try await server.state("messaging:g")["messages"].array
            #expect(messages.map { $0["id"].string } == ["m1", "m2", "m3", "r1"])
            // The same id in another channel is refused, not silently mixed up.
            try await server.createChannel("messaging:other", members: ["bob"])
            try await server.call(
                .post, "/channels/messaging/other/message", body: #"{"message": {"id": "r1", "text": "x", "user_id": "bob"}}"#
            ).expectError(400, code: 4)
        }
    }

    @Test("R12: what was acknowledged is there after the store is reopened")
    func durable() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ticks-durable-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let path = folder.appendingPathComponent("ticks.sqlite").path
        let store = try SQLStore.sqlite(path: path, deadline: StoreKind.deadline)
        let now = Timestamp.now()
        _ = try await store.upsertUsers([User(id: "alice"), User(id: "bob")], now: now)
        let (channel, _) = try await store.createChannel(
            ChannelID(type: "messaging", id: "d"), createdBy: nil, memberIDs: ["alice", "bob"], custom: [:], now: now)
        _ = try await store.sendMessage(NewMessage(id: "d1", userID: "alice", text: "hi", custom: [:]), to: channel, now: now)
        _ = try await store.markRead(
            "bob", in: channel.cid, upTo: "d1", audience: ReceiptAudience(fullChannelLimit: 100), now: now)

        let reopened = try SQLStore.sqlite(path: path, deadline: StoreKind.deadline)
        let receipts = try #require(try await reopened.receipts(forMessage: "d1"))
        #expect(receipts.entries.map(\.userID) == ["bob"])
        #expect(receipts.entries.first?.readAt == now)
    }

    @Test("receipts list every current member but the author, most recent first, with exact times")
    func receiptsOrder() async throws {
        try await TestServer.run { server in
            try await group(server)
            try await server.markDelivered("carol", [("messaging:g", "m2")])
            try await server.markRead("messaging:g", "bob", upTo: "m2")
            let receipts = try await server.receipts("m2")
            let entries = receipts["receipts"].array
            #expect(entries.map { $0["user"]["id"].string } == ["bob", "carol"])
            #expect(entries[1]["read_at"].exists == false)
            #expect(try #require(entries[0]["read_at"].time) > #require(entries[1]["delivered_at"].time))
            #expect(receipts["read_count"].int == 1)
            #expect(receipts["delivered_count"].int == 2)
            // m3 was never delivered to carol: she is not listed.
            #expect(try await server.receipts("m3")["receipts"].array.isEmpty)
        }
    }

    @Test("mark all read reads every channel of the user")
    func markAllRead() async throws {
        try await TestServer.run { server in
            try await group(server)
            try await server.createChannel("messaging:h", members: ["alice", "bob"])
            try await server.send("messaging:h", id: "h1", from: "alice")
            #expect(try await server.store.unreadTotals(of: "bob") == UnreadTotals(messages: 4, channels: 2))
            try await server.ok(.post, "/channels/read", #"{"user": {"id": "bob"}}"#)
            #expect(try await server.store.unreadTotals(of: "bob") == UnreadTotals(messages: 0, channels: 0))
            #expect(try await server.receipts("h1")["read_count"].int == 1)
        }
    }
}
