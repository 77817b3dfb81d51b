import Foundation
import Testing
import TicksClient
import TicksTestSupport

/// Edited, deleted and threaded messages as a real client sees them from a
/// real server: the new states, with receipts unchanged.
@Suite("Edits, deletes and threads in the SDK")
struct LifecycleTests {
    let group = ChannelID(type: "messaging", id: "club")

    @Test("an edit shows on every member's client with its receipts unchanged; a delete shows as deleted and is never unread")
    func editAndDelete() async throws {
        try await LiveServer.with { server in
            try await server.upsert("alice", "bob", "carol")
            try await server.createChannel("messaging:club", members: ["alice", "bob", "carol"])
            let alice = try await server.connected("alice")
            let club = await alice.channel(group)
            try await club.load()
            let bob = try await server.connected("bob")
            let bobClub = await bob.channel(group)
            try await bobClub.load()

            try await club.send("Meet at 6", id: "c1")
            try await club.send("Bring snacks", id: "c2")
            // `send` returns with the message pending in alice's outbox: bob can mark it read once it is sent.
            _ = try await club.wait("c1 sent") { ($0.message(withID: "c1")?.deliveryStatus ?? .pending) != .pending }
            try await bobClub.markRead(upTo: "c1")
            let read = try await club.wait("c1 read by bob") { $0.message(withID: "c1")?.readCount == 1 }
            #expect(read.message(withID: "c1")?.deliveryStatus == .read)

            // The edit reaches bob's client; alice's c1 is still read by bob.
            try await club.edit(messageId: "c1", text: "Meet at 7")
            let edited = try await bobClub.wait("the edit on bob's client") { $0.message(withID: "c1")?.text == "Meet at 7" }
            #expect(edited.message(withID: "c1")?.editedAt != nil)
            let mine = try await club.state
            #expect(mine.message(withID: "c1")?.readCount == 1 && mine.message(withID: "c1")?.deliveryStatus == .read)
            let exact = try await alice.receipts(for: "c1")
            #expect(exact.readBy.map(\.user.id) == ["bob"])

            // c2 is unread for bob and carol; deleted, it is unread for nobody.
            #expect(try await bob.unreadCounts().totalUnreadCount == 1)
            try await club.delete(messageId: "c2")
            let deleted = try await bobClub.wait("the delete on bob's client") { $0.message(withID: "c2")?.isDeleted == true }
            #expect(deleted.message(withID: "c2") != nil)
            #expect(try await bob.unreadCounts().totalUnreadCount == 0)
            await alice.disconnect()
            await bob.disconnect()
        }
    }

    @Test("explainUnread tells the count served and the rule of each message after the cursor")
    func explainUnread() async throws {
        try await LiveServer.with { server in
            try await server.upsert("alice", "bob")
            try await server.createChannel("messaging:club", members: ["alice", "bob"])
            let alice = try await server.connected("alice")
            let club = await alice.channel(group)
            try await club.load()
            try await server.send("messaging:club", id: "e1", from: "alice")
            try await server.send("messaging:club", id: "e2", from: "alice")
            try await club.delete(messageId: "e2")
            let bob = try await server.connected("bob")
            let explained = try await bob.explainUnread(group)
            #expect(explained.unreadCount == 1 && explained.counted == 1 && explained.isConsistent)
            #expect(explained.messages.map(\.messageId) == ["e1", "e2"])
            #expect(explained.messages.map(\.rule) == [.counted, .deleted])
            #expect(explained.counts[.counted] == 1 && explained.counts[.deleted] == 1 && explained.counts[.own] == 0)
            #expect(explained.lastRead != nil && explained.lastReadMessageId == nil)
            #expect(try await bob.unreadCounts().channels[group] == explained.unreadCount)
            await alice.disconnect()
            await bob.disconnect()
        }
    }

    @Test("a thread has its own unread count: replies leave the channel's alone, reading the thread clears it")
    func threads() async throws {
        try await LiveServer.with { server in
            try await server.upsert("alice", "bob")
            try await server.createChannel("messaging:club", members: ["alice", "bob"])
            let alice = try await server.connected("alice")
            let club = await alice.channel(group)
            try await club.load()
            let bob = try await server.connected("bob")
            let bobClub = await bob.channel(group)
            try await bobClub.load()

            try await club.send("Ideas for the trip?", id: "p1")
            try await bobClub.wait("p1 on bob's client") { $0.message(withID: "p1") != nil }
            try await bobClub.markRead()
            try await bobClub.reply(to: "p1", text: "The lake", id: "r1")
            let parent = try await club.wait("the reply count") { $0.message(withID: "p1")?.replyCount == 1 }
            // The reply is in the thread, not in the channel's list.
            #expect(parent.message(withID: "r1") == nil)
            #expect(try await club.replies(to: "p1").map(\.id) == ["r1"])
            let counts = try await alice.unreadCounts()
            #expect(counts.threads == ["p1": 1] && counts.totalUnreadCount == 0)
            // Bob's read reaches alice's client by its event, in its own time (a loaded machine was slower).
            try await club.wait("bob's read of p1") { $0.message(withID: "p1")?.deliveryStatus == .read }
            try await club.markThreadRead(parentId: "p1")
            #expect(try await alice.unreadCounts().threads.isEmpty)
            // Bob's channel read state did not move: p1 is still read by him.
            #expect(try await club.state.message(withID: "p1")?.deliveryStatus == .read)
            await alice.disconnect()
            await bob.disconnect()
        }
    }

    @Test("every thread read in one call: the totals' thread count is 0 here at once, and on the user's other device from its event")
    func allThreadsRead() async throws {
        try await LiveServer.with { server in
            try await server.upsert("alice", "bob")
            try await server.createChannel("messaging:club", members: ["alice", "bob"])
            try await server.createChannel("messaging:team", members: ["alice", "bob"])
            for (cid, parent, reply) in [("messaging:club", "p1", "r1"), ("messaging:team", "p2", "r2")] {
                try await server.send(cid, id: parent, from: "alice")
                try await server.wireCall(
                    .post, "/channels/\(server.path(cid))/message",
                    #"{"message": {"id": "\#(reply)", "text": "re", "parent_id": "\#(parent)", "user_id": "bob"}}"#,
                    as: nil)
            }
            let phone = try await server.connected("alice")
            let laptop = try await server.connected("alice")
            #expect(try await phone.unreadCounts().threads == ["p1": 1, "p2": 1])
            #expect(await laptop.unreadTotals.unreadThreads == nil)

            #expect(try await phone.markAllThreadsRead() == 2)
            #expect(await phone.unreadTotals.unreadThreads == 0)
            _ = try await eventually("notification.mark_threads_read on the laptop") {
                await laptop.unreadTotals.unreadThreads == 0 ? true : nil
            }
            #expect(try await laptop.unreadCounts().threads.isEmpty)
            #expect(try await phone.markAllThreadsRead() == 0)
            await phone.disconnect()
            await laptop.disconnect()
        }
    }
}
