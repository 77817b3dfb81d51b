import Foundation
import Testing
import TicksProtocol
import TicksReceipts

@testable import TicksServer

/// Threads keep a read state of their own: a reply shown only in its thread
/// moves thread read state, never the channel's (docs/receipt-rules.md, "Threads").
@Suite("Threads have their own read state")
struct ThreadStoreTests {
    let everyone = ReceiptAudience(fullChannelLimit: 100)

    func setUp(_ store: any TicksStore, _ id: String) async throws -> ChannelRecord {
        _ = try await store.upsertUsers([User(id: "a"), User(id: "b"), User(id: "c")], now: .now())
        let (channel, _) = try await store.createChannel(
            ChannelID(type: "messaging", id: id), createdBy: "a", memberIDs: ["a", "b", "c"], custom: [:], now: .now())
        _ = try await store.sendMessage(NewMessage(id: "\(id)-p", userID: "a", text: "parent", custom: [:]), to: channel, now: .now())
        // Everyone has read the parent.
        for user in ["b", "c"] {
            _ = try await store.markRead(user, in: channel.cid, upTo: nil, audience: everyone, now: .now())
        }
        return try #require(try await store.channel(ChannelID(type: "messaging", id: id)))
    }

    func reply(_ store: any TicksStore, _ id: String, by user: String, to parent: String, in channel: ChannelRecord, shown: Bool = false)
        async throws
    {
        _ = try await store.sendMessage(
            NewMessage(id: id, userID: user, text: "reply", custom: [:], parentID: parent, showInChannel: shown),
            to: channel, now: .now())
    }

    func threads(_ store: any TicksStore, _ user: String) async throws -> [String] {
        try #require(try await store.unreadCounts(of: [user])[user]).threads.map { "\($0.parentID) \($0.unread)" }
    }

    @Test("a reply shown only in its thread counts in the thread, not the channel", arguments: StoreKind.all)
    func threadOnlyReply(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let channel = try await setUp(store, "t1")
            let cursorsBefore = try #require(try await store.member("b", of: channel)).cursors
            try await reply(store, "t1-r1", by: "b", to: "t1-p", in: channel)
            // The channel: nobody has anything unread, b's channel cursors did not move.
            for user in ["a", "b", "c"] {
                #expect(try #require(try await store.member(user, of: channel)).unread == 0)
                #expect(try await store.unreadTotals(of: user) == UnreadTotals(messages: 0, channels: 0))
            }
            #expect(try #require(try await store.member("b", of: channel)).cursors == cursorsBefore)
            // The thread: the parent's author has one unread reply; the replier none; c is no participant.
            #expect(try await threads(store, "a") == ["t1-p 1"])
            #expect(try await threads(store, "b") == [])
            #expect(try await threads(store, "c") == [])
            #expect(try await store.message(id: "t1-p")?.message.replyCount == 1)
            // The channel's messages leave the reply out; the thread has it.
            let snapshot = try await store.snapshot(of: channel, messageLimit: 10, page: .newest)
            #expect(snapshot.messages.map(\.id) == ["t1-p"])
            #expect(try await store.replies(to: "t1-p", before: nil, limit: 10).map(\.id) == ["t1-r1"])
            // a reads the thread: their thread is read, their channel cursors stay.
            let aBefore = try #require(try await store.member("a", of: channel)).cursors
            let read = try await store.markThreadRead("a", in: channel, parentID: "t1-p", now: .now())
            #expect(read.lastReadMessageID == "t1-r1")
            #expect(try await threads(store, "a") == [])
            #expect(try #require(try await store.member("a", of: channel)).cursors == aBefore)
            // c joins by reading; a second reply by c is unread for a and b.
            _ = try await store.markThreadRead("c", in: channel, parentID: "t1-p", now: .now())
            try await reply(store, "t1-r2", by: "c", to: "t1-p", in: channel)
            #expect(try await threads(store, "a") == ["t1-p 1"])
            #expect(try await threads(store, "b") == ["t1-p 1"])
            #expect(try await threads(store, "c") == [])
            // A deleted reply leaves the thread counts.
            _ = try await store.deleteMessage(id: "t1-r2", hard: false, by: nil, now: .now())
            #expect(try await threads(store, "a") == [])
            #expect(try await threads(store, "b") == [])
        }
    }

    @Test("a reply also shown in the channel counts in both", arguments: StoreKind.all)
    func shownReply(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let channel = try await setUp(store, "t2")
            try await reply(store, "t2-r1", by: "b", to: "t2-p", in: channel, shown: true)
            #expect(try #require(try await store.member("c", of: channel)).unread == 1)
            #expect(try #require(try await store.member("a", of: channel)).unread == 1)
            #expect(try #require(try await store.member("b", of: channel)).unread == 0)
            #expect(try await threads(store, "a") == ["t2-p 1"])
            let snapshot = try await store.snapshot(of: channel, messageLimit: 10, page: .newest)
            #expect(snapshot.messages.map(\.id) == ["t2-p", "t2-r1"])
            // Reading the channel does not read the thread, nor the other way round.
            _ = try await store.markRead("a", in: channel.cid, upTo: nil, audience: everyone, now: .now())
            #expect(try await threads(store, "a") == ["t2-p 1"])
        }
    }

    @Test("replies to replies and to other channels' messages are refused; leaving drops thread state", arguments: StoreKind.all)
    func refusalsAndRemoval(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let channel = try await setUp(store, "t3")
            let other = try await setUp(store, "t4")
            try await reply(store, "t3-r1", by: "b", to: "t3-p", in: channel)
            await #expect(throws: StoreError.nestedReply("t3-r1")) {
                try await reply(store, "t3-r2", by: "c", to: "t3-r1", in: channel)
            }
            await #expect(throws: StoreError.parentNotFound("t4-p")) {
                try await reply(store, "t3-r3", by: "c", to: "t4-p", in: channel)
            }
            _ = other
            #expect(try await threads(store, "a") == ["t3-p 1"])
            // A non-member's reply (a server token's) gives them no thread read state.
            _ = try await store.upsertUsers([User(id: "z")], now: .now())
            _ = try await store.sendMessage(
                NewMessage(id: "t3-z", userID: "z", text: "hi", custom: [:], parentID: "t3-p", byServer: true),
                to: channel, now: .now())
            try await reply(store, "t3-r5", by: "b", to: "t3-p", in: channel)
            #expect(try await threads(store, "z") == [])
            _ = try await store.markThreadRead("a", in: channel, parentID: "t3-p", now: .now())
            _ = try await store.removeMembers(["a"], from: channel, now: .now())
            #expect(try await threads(store, "a") == [])
            try await reply(store, "t3-r4", by: "c", to: "t3-p", in: channel)
            #expect(try await threads(store, "b") == ["t3-p 1"])
            _ = try await store.truncateChannel(channel, hard: false, by: nil, now: .now())
            #expect(try await threads(store, "b") == [])
        }
    }

    @Test(
        "every thread of a user read at once: each at its newest reply, counts 0, others' and the channels' untouched",
        arguments: StoreKind.all)
    func allThreadsRead(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let one = try await setUp(store, "t5")
            let two = try await setUp(store, "t6")
            try await reply(store, "t5-r1", by: "b", to: "t5-p", in: one)
            try await reply(store, "t5-r2", by: "c", to: "t5-p", in: one, shown: true)
            try await reply(store, "t6-r1", by: "b", to: "t6-p", in: two)
            _ = try await store.markThreadRead("c", in: two, parentID: "t6-p", now: .now())
            #expect(try await threads(store, "a") == ["t5-p 2", "t6-p 1"])
            #expect(try await threads(store, "b") == ["t5-p 1"])
            let totals = try await store.unreadTotals(of: "a")
            let cursors = try #require(try await store.member("a", of: one)).cursors

            let read = try #require(try await store.markThreadsRead("a", now: .now()))
            #expect(read.parentIDs == ["t5-p", "t6-p"])
            #expect(read.unreadThreads == 0)
            #expect(read.totals == totals)
            #expect(try await threads(store, "a") == [])
            // The channel's counts and cursors are the channel's: the reply shown there is still unread.
            #expect(try await store.unreadTotals(of: "a") == totals && totals.messages == 1)
            #expect(try #require(try await store.member("a", of: one)).cursors == cursors)
            // Others' thread read states stay.
            #expect(try await threads(store, "b") == ["t5-p 1"])
            // Nothing left to move: none moved; c's threads are read already, b's one is not.
            #expect(try await store.markThreadsRead("a", now: .now())?.parentIDs == [])
            #expect(try await store.markThreadsRead("c", now: .now())?.parentIDs == [])
            #expect(try await store.markThreadsRead("b", now: .now())?.parentIDs == ["t5-p"])
            #expect(try await threads(store, "b") == [])
            // Each thread cursor is at the newest reply: only a later one is unread.
            try await reply(store, "t5-r3", by: "b", to: "t5-p", in: one)
            let counts = try #require(try await store.unreadCounts(of: ["a"])["a"])
            #expect(counts.threads.map { "\($0.parentID) \($0.unread) \($0.lastReadMessageID ?? "-")" } == ["t5-p 1 t5-r2"])
            #expect(try await store.markThreadsRead("nobody", now: .now()) == nil)
        }
    }

    @Test("a sync tells the user's own thread read states that moved after the time, and no one else's", arguments: StoreKind.all)
    func syncedThreadReads(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let channel = try await setUp(store, "t7")
            try await reply(store, "t7-r1", by: "b", to: "t7-p", in: channel)
            try await reply(store, "t7-r2", by: "c", to: "t7-p", in: channel)
            let since = Timestamp.now()
            #expect(try await store.changes(in: channel.cid, for: "a", since: since, limit: 10).threadReads.isEmpty)
            _ = try await store.markThreadsRead("a", now: .now())
            _ = try await store.markThreadsRead("b", now: .now())
            let changes = try await store.changes(in: channel.cid, for: "a", since: since, limit: 10)
            #expect(changes.threadReads.map { "\($0.parent.id) \($0.lastReadMessageID ?? "-")" } == ["t7-p t7-r2"])
            #expect(try await store.changes(in: channel.cid, for: "c", since: since, limit: 10).threadReads.isEmpty)
        }
    }

    @Test("a thread marked unread counts every reply again but the reader's own and deleted ones", arguments: StoreKind.all)
    func threadMarkedUnread(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let channel = try await setUp(store, "tu")
            for (id, user) in [("tu-r1", "c"), ("tu-r2", "b"), ("tu-r3", "a"), ("tu-r4", "c")] {
                try await reply(store, id, by: user, to: "tu-p", in: channel)
            }
            _ = try await store.deleteMessage(id: "tu-r4", hard: false, by: nil, now: .now())
            _ = try await store.markThreadRead("b", in: channel, parentID: "tu-p", now: .now())
            #expect(try await threads(store, "b") == [])
            let unread = try await store.markThreadUnread("b", in: channel, parentID: "tu-p", now: .now())
            #expect(unread == ThreadMarkedUnread(parentID: "tu-p", unread: 2, unreadThreads: 1))
            #expect(try await threads(store, "b") == ["tu-p 2"])
            // The channel's counts stay: thread-only replies are not in them.
            #expect(try #require(try await store.member("b", of: channel)).unread == 0)
            // A later reply counts on top; reading the thread clears it again.
            try await reply(store, "tu-r5", by: "a", to: "tu-p", in: channel)
            #expect(try await threads(store, "b") == ["tu-p 3"])
            // Only a member, only a parent of the channel.
            await #expect(throws: StoreError.notMember(userID: "d", cid: channel.cid)) {
                _ = try await store.markThreadUnread("d", in: channel, parentID: "tu-p", now: .now())
            }
            await #expect(throws: StoreError.self) {
                _ = try await store.markThreadUnread("b", in: channel, parentID: "tu-r1", now: .now())
            }
            try await InterleavingTests.expectNothingToRecount(try #require(store as? SQLStore))
        }
    }
}
