import Foundation
import Testing
import TicksClient
import TicksTestSupport

/// Channel lists, unread totals, mark all read and history paging, against a real server.
@Suite("Channel lists and history")
struct ChannelListTests {
    func ids(_ list: ChatChannelList) -> [String] { list.channels.map(\.cid.id) }

    func wait(
        _ list: ChannelListController, _ what: String, sourceLocation: SourceLocation = #_sourceLocation,
        until condition: @escaping @Sendable (ChatChannelList) -> Bool
    ) async throws -> ChatChannelList {
        try await eventually(what, sourceLocation: sourceLocation) {
            let state = await list.state
            return condition(state) ? state : nil
        }
    }

    @Test("newest message first; new channels join, left ones go; unread per channel and the totals; mark all read")
    func liveList() async throws {
        try await LiveServer.with { server in
            try await server.upsert("alice", "bob", "carol")
            for id in ["c1", "c2", "c3"] { try await server.createChannel("messaging:\(id)", members: ["alice", "bob"]) }
            try await server.send("messaging:c1", id: "m1", from: "bob")
            try await server.send("messaging:c3", id: "m3", from: "bob")
            let alice = try await server.connected("alice")
            let list = await alice.channels()
            try await list.load()
            var state = await list.state
            #expect(ids(state) == ["c3", "c1", "c2"])
            #expect(state.channels.map(\.unreadCount) == [1, 1, 0])
            #expect(state.channels[0].lastMessage?.id == "m3")
            #expect(state.channels[0].displayName(currentUserID: "alice") == "Bob")
            #expect(!state.hasMore && state.isLoaded)
            #expect(state.totalUnreadCount == 2 && state.unreadChannels == 2)

            // A message moves its channel to the top, and counts.
            try await server.send("messaging:c2", id: "m2", from: "bob")
            state = try await wait(list, "c2 on top") { $0.channels.first?.cid.id == "c2" }
            #expect(state.channels.first?.unreadCount == 1)
            #expect(state.totalUnreadCount == 3 && state.unreadChannels == 3)
            // A channel made with alice joins (notification.added_to_channel); one she leaves goes.
            try await server.createChannel("messaging:c4", members: ["alice", "carol"])
            try await wait(list, "c4 joined") { $0.channels.first?.cid.id == "c4" }
            state = try await wait(list, "c4's members") { $0.channels.first?.members.count == 2 }
            #expect(state.channels.first?.members.map(\.id).sorted() == ["alice", "carol"])
            try await server.removeMembers("messaging:c1", ["alice"])
            state = try await wait(list, "c1 gone") { !$0.channels.contains { $0.cid.id == "c1" } }
            #expect(ids(state) == ["c4", "c2", "c3"])
            // An own message shows with its ticks in the row.
            let c3 = await alice.channel(ChannelID(type: "messaging", id: "c3"))
            try await c3.send("hi", id: "own1")
            state = try await wait(list, "own message on top") {
                $0.channels.first?.lastMessage?.id == "own1" && $0.channels.first?.lastMessage?.deliveryStatus == .sent
            }
            #expect(state.channels.first?.unreadCount == 0, "sending reads the channel (R4)")
            try await server.markRead("messaging:c3", "bob")
            try await wait(list, "own message read") { $0.channels.first?.lastMessage?.deliveryStatus == .read }

            try await alice.markAllRead()
            state = await list.state
            #expect(state.channels.allSatisfy { $0.unreadCount == 0 })
            #expect(state.totalUnreadCount == 0 && state.unreadChannels == 0)
            #expect(await alice.unreadTotals == ChatUnreadTotals(totalUnreadCount: 0, unreadChannels: 0))
            #expect(try await alice.unreadCounts().totalUnreadCount == 0)
            await alice.disconnect()
        }
    }

    @Test("pages: each channel once, in order; a channel past the loaded pages joins when a message puts it first")
    func paging() async throws {
        try await LiveServer.with { server in
            try await server.upsert("alice", "bob")
            for index in 1...5 {
                try await server.createChannel("messaging:p\(index)", members: ["alice", "bob"])
                try await server.send("messaging:p\(index)", id: "p\(index)-1", from: "bob")
            }
            try await server.createChannel("team:t1", members: ["alice", "bob"])
            let alice = try await server.connected("alice") { $0.channelListPageSize = 2 }
            let list = await alice.channels(filter: .type("messaging"))
            try await list.load()
            #expect(ids(await list.state) == ["p5", "p4"])
            #expect(await list.state.hasMore)
            // p1, not loaded yet, gets a message: it now sorts first, so it joins.
            try await server.send("messaging:p1", id: "p1-2", from: "bob")
            try await wait(list, "p1 on top") { $0.channels.first?.cid.id == "p1" }
            // p2 gets one too but a team channel does not match the filter.
            try await server.send("team:t1", id: "t1-1", from: "bob")
            try await list.loadMore()
            try await list.loadMore()
            let state = await list.state
            #expect(ids(state) == ["p1", "p5", "p4", "p3", "p2"])
            #expect(!state.hasMore)
            await alice.disconnect()
        }
    }

    @Test("history: older pages with their receipts, until the beginning")
    func history() async throws {
        try await LiveServer.with { server in
            try await server.upsert("alice", "bob")
            try await server.createChannel("messaging:h", members: ["alice", "bob"])
            for index in 1...45 {
                try await server.send("messaging:h", id: "h\(index)", from: index % 3 == 0 ? "bob" : "alice")
            }
            try await server.markRead("messaging:h", "bob", upTo: "h10")
            try await server.markDelivered("bob", [("messaging:h", "h20")])
            // The bob messages after h10 keep his read cursor at h10: his own sends move it (R4).
            let alice = try await server.connected("alice") { $0.messagePageSize = 20 }
            let channel = await alice.channel(ChannelID(type: "messaging", id: "h"))
            try await channel.load()
            var state = try await channel.state
            #expect(state.messages.map(\.id) == (26...45).map { "h\($0)" })
            #expect(state.hasOlderMessages)
            #expect(try await channel.loadOlder() == 20)
            #expect(try await channel.loadOlder() == 5)
            #expect(try await channel.loadOlder() == 0)
            state = try await channel.state
            #expect(state.messages.map(\.id) == (1...45).map { "h\($0)" })
            #expect(!state.hasOlderMessages)
            // Bob sent h45 last: his read cursor is there (R4), so every own message reads as read.
            let own = state.messages.filter(\.isSentByCurrentUser)
            #expect(own.allSatisfy { $0.deliveryStatus == .read })
            // Before bob's own sends: h10 read, h20 delivered.
            try await server.upsert("carol")
            try await server.createChannel("messaging:h2", members: ["alice", "carol"])
            for index in 1...30 { try await server.send("messaging:h2", id: "k\(index)", from: "alice") }
            try await server.markRead("messaging:h2", "carol", upTo: "k5")
            try await server.markDelivered("carol", [("messaging:h2", "k8")])
            let second = await alice.channel(ChannelID(type: "messaging", id: "h2"))
            try await second.load()
            try await second.loadOlder()
            state = try await second.state
            #expect(state.messages.count == 30)
            #expect(state.message(withID: "k5")?.deliveryStatus == .read)
            #expect(state.message(withID: "k6")?.deliveryStatus == .delivered)
            #expect(state.message(withID: "k8")?.deliveryStatus == .delivered)
            #expect(state.message(withID: "k9")?.deliveryStatus == .sent)
            #expect(state.message(withID: "k30")?.deliveryStatus == .sent)
            await alice.disconnect()
        }
    }

    @Test("receipts(for:) names the message's channel even when it is not loaded")
    func receiptsChannel() async throws {
        try await LiveServer.with { server in
            try await server.upsert("alice", "bob")
            try await server.createChannel("messaging:r", members: ["alice", "bob"])
            try await server.send("messaging:r", id: "r1", from: "alice")
            try await server.markRead("messaging:r", "bob")
            let alice = try await server.connected("alice")
            let receipts = try await alice.receipts(for: "r1")
            #expect(receipts.readBy.first?.cid == ChannelID(type: "messaging", id: "r"))
            await alice.disconnect()
        }
    }

    @Test("receipt privacy: reads hidden from others but delivery shown; deliveries off stop this device marking")
    func privacy() async throws {
        try await LiveServer.with { server in
            try await server.upsert("alice", "bob")
            try await server.createChannel("messaging:pv", members: ["alice", "bob"])
            let alice = try await server.connected("alice")
            // This device of bob's marks nothing delivered itself: only his read can deliver.
            let bob = try await server.connected("bob") { $0.marksDelivered = false }
            let cid = ChannelID(type: "messaging", id: "pv")
            let mine = await alice.channel(cid)
            try await mine.load()
            let his = await bob.channel(cid)
            try await his.load()
            let before = await bob.receiptPrivacy
            #expect(before.sharesReads && before.sharesDeliveries)

            try await bob.setReceiptPrivacy(read: false, delivery: true)
            let after = await bob.receiptPrivacy
            #expect(!after.sharesReads && after.sharesDeliveries)
            try await mine.send("secret", id: "s1")
            try await his.wait("s1 arrived") { $0.message(withID: "s1") != nil }
            try await his.markRead()
            // Alice's tick turns ✓✓ live (the private read delivers), never blue.
            try await mine.wait("delivered") { $0.message(withID: "s1")?.deliveryStatus == .delivered }
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await mine.status(of: "s1") == .delivered)

            // Another device of bob's, which would mark delivered, stops once delivery receipts are off.
            let phone = try await server.connected("bob")
            try await phone.setReceiptPrivacy(read: true, delivery: false)
            let onPhone = await phone.channel(cid)
            try await onPhone.load()
            let calls = server.markDeliveredCalls
            try await mine.send("another", id: "s2")
            try await onPhone.wait("s2 arrived") { $0.message(withID: "s2") != nil }
            try await Task.sleep(for: .milliseconds(1500))
            #expect(server.markDeliveredCalls == calls)
            #expect(try await mine.status(of: "s2") == .sent)
            for client in [alice, bob, phone] { await client.disconnect() }
        }
    }
}
