import Foundation
import Testing
import TicksProtocol
import TicksReceipts

@testable import TicksServer

/// What deleting, editing and truncating do to read state and receipts
/// (docs/receipt-rules.md, "Deleting, editing, truncating"), on every store.
@Suite("Message and channel lifecycle keep receipts right")
struct LifecycleStoreTests {
    let everyone = ReceiptAudience(fullChannelLimit: 100)

    /// Channel `id` with members a, b, c and messages m1…m`count` by a.
    func channel(_ store: any TicksStore, _ id: String, messages count: Int) async throws -> ChannelRecord {
        _ = try await store.upsertUsers([User(id: "a"), User(id: "b"), User(id: "c")], now: .now())
        let (channel, _) = try await store.createChannel(
            ChannelID(type: "messaging", id: id), createdBy: "a", memberIDs: ["a", "b", "c"], custom: [:], now: .now())
        for index in 1...count {
            _ = try await store.sendMessage(
                NewMessage(id: "\(id)-m\(index)", userID: "a", text: "t\(index)", custom: [:]), to: channel, now: .now())
        }
        return try #require(try await store.channel(ChannelID(type: "messaging", id: id)))
    }

    func unread(_ store: any TicksStore, _ user: String, in channel: ChannelRecord) async throws -> (Int, String?) {
        let state = try #require(try await store.member(user, of: channel))
        return (state.unread, state.firstUnreadMessageID)
    }

    @Test("a deleted message is never unread: it leaves the counts of those who had not read it", arguments: StoreKind.all)
    func deletedIsNotUnread(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let channel = try await channel(store, "del", messages: 3)
            _ = try await store.markRead("c", in: channel.cid, upTo: "del-m2", audience: everyone, now: .now())
            _ = try await store.deleteMessage(id: "del-m1", hard: false, by: nil, now: .now())
            // b had read nothing: m1 leaves their count; c had read m1 already: no change.
            #expect(try await unread(store, "b", in: channel) == (2, "del-m2"))
            #expect(try await unread(store, "c", in: channel) == (1, "del-m3"))
            #expect(try await store.unreadTotals(of: "b") == UnreadTotals(messages: 2, channels: 1))
            // Deleting it again, or hard, changes nothing more.
            _ = try await store.deleteMessage(id: "del-m1", hard: true, by: nil, now: .now())
            #expect(try await unread(store, "b", in: channel) == (2, "del-m2"))
            _ = try await store.deleteMessage(id: "del-m3", hard: true, by: nil, now: .now())
            #expect(try await unread(store, "c", in: channel) == (0, nil))
            #expect(try await store.unreadTotals(of: "c") == UnreadTotals(messages: 0, channels: 0))
            // Reading past a deleted message counts only the ones left.
            _ = try await store.markRead("b", in: channel.cid, upTo: "del-m2", audience: everyone, now: .now())
            #expect(try await unread(store, "b", in: channel) == (0, nil))
            // A hard-deleted message is gone; a soft-deleted one is still there, marked.
            #expect(try await store.message(id: "del-m1") == nil)
            #expect(try await store.receipts(forMessage: "del-m3") == nil)
            let remaining = try await store.messages(ids: ["del-m1", "del-m2", "del-m3"], in: channel)
            #expect(remaining.map(\.id) == ["del-m2"])
            // Its id stays used.
            await #expect(throws: StoreError.messageIDOfRemovedMessage("del-m1")) {
                _ = try await store.sendMessage(
                    NewMessage(id: "del-m1", userID: "a", text: "again", custom: [:]), to: channel, now: .now())
            }
        }
    }

    @Test("an edit changes the text, never a cursor or a receipt time", arguments: StoreKind.all)
    func editKeepsReceipts(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let channel = try await channel(store, "edit", messages: 2)
            _ = try await store.markDelivered(
                "b", [DeliveredTarget(channel: channel.cid, messageID: "edit-m2")], audience: everyone, now: .now())
            _ = try await store.markRead("c", in: channel.cid, upTo: "edit-m1", audience: everyone, now: .now())
            let before = try #require(try await store.receipts(forMessage: "edit-m1"))
            let statesBefore = try await store.snapshot(of: channel, messageLimit: 0, page: .newest).members
            let edited = try await store.editMessage(id: "edit-m1", by: nil, now: .now()) { _ in
                MessageEdit(text: "changed", custom: ["k": .string("v")])
            }
            #expect(edited.text == "changed" && edited.updatedAt != nil)
            let after = try #require(try await store.receipts(forMessage: "edit-m1"))
            #expect(after.message.text == "changed")
            #expect(
                after.entries.sorted { $0.userID < $1.userID }.map { "\($0.userID) \($0.deliveredAt!) \($0.readAt.map(String.init(describing:)) ?? "-")" }
                    == before.entries.sorted { $0.userID < $1.userID }.map {
                        "\($0.userID) \($0.deliveredAt!) \($0.readAt.map(String.init(describing:)) ?? "-")"
                    })
            #expect(try await store.snapshot(of: channel, messageLimit: 0, page: .newest).members == statesBefore)
        }
    }

    @Test("truncating resets every unread count and drops the receipts of the removed messages", arguments: StoreKind.all)
    func truncationResets(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let channel = try await channel(store, "trunc", messages: 4)
            let other = try await self.channel(store, "keep", messages: 1)
            _ = try await store.markRead("c", in: channel.cid, upTo: "trunc-m2", audience: everyone, now: .now())
            let truncated = try await store.truncateChannel(channel, hard: false, by: nil, now: .now())
            #expect(truncated.truncatedSeq == 4 && truncated.truncatedAt != nil)
            for user in ["b", "c"] {
                #expect(try await unread(store, user, in: channel) == (0, nil))
                // The other channel's unread message still counts.
                #expect(try await store.unreadTotals(of: user) == UnreadTotals(messages: 1, channels: 1))
                let log = store
                #expect(try await log.loggedMoves(channelPK: channel.pk, userID: user, kind: .read).isEmpty)
            }
            #expect(try await store.receipts(forMessage: "trunc-m3") == nil)
            #expect(try await store.message(id: "trunc-m1") == nil)
            #expect(try await store.snapshot(of: truncated, messageLimit: 10, page: .newest).messages.isEmpty)
            // Receipts go on as before for what is sent afterwards.
            _ = try await store.sendMessage(
                NewMessage(id: "trunc-m5", userID: "a", text: "after", custom: [:]), to: truncated, now: .now())
            #expect(try await unread(store, "b", in: channel) == (1, "trunc-m5"))
            let read = try await store.markRead("b", in: channel.cid, upTo: nil, audience: everyone, now: .now())
            #expect(read.update.changed && read.state.unread == 0)
            let receipts = try #require(try await store.receipts(forMessage: "trunc-m5"))
            #expect(receipts.entries.map(\.userID) == ["b"])
            // Marking unread from a removed message is refused.
            await #expect(throws: StoreError.self) {
                _ = try await store.markUnread("b", in: channel, from: "trunc-m2", now: .now())
            }
            _ = other
        }
    }

    @Test("mark unread from a time: the first message sent at or after it, never a move forward", arguments: StoreKind.all)
    func markUnreadFromTime(kind: StoreKind) async throws {
        try await kind.withStore { store in
            _ = try await store.upsertUsers([User(id: "a"), User(id: "b")], now: .now())
            let (channel, _) = try await store.createChannel(
                ChannelID(type: "messaging", id: "ut"), createdBy: "a", memberIDs: ["a", "b"], custom: [:], now: .now())
            let start = Timestamp(microseconds: 1_800_000_000_000_000)
            func at(_ second: Int64) -> Timestamp { Timestamp(microseconds: start.microseconds + second * 1_000_000) }
            for (index, second) in [10, 20, 30].enumerated() {
                _ = try await store.sendMessage(
                    NewMessage(id: "ut-m\(index + 1)", userID: "a", text: "t", custom: [:]), to: channel, now: at(Int64(second)))
            }
            func unreadAfter(_ time: Timestamp) async throws -> (Int, String?) {
                _ = try await store.markRead("b", in: channel.cid, upTo: nil, audience: everyone, now: at(40))
                _ = try await store.markUnread("b", in: channel, from: .time(time), now: at(41))
                return try await unread(store, "b", in: channel)
            }
            #expect(try await unreadAfter(at(20)) == (2, "ut-m2"))
            #expect(try await unreadAfter(at(15)) == (2, "ut-m2"))
            #expect(try await unreadAfter(at(0)) == (3, "ut-m1"))
            #expect(try await unreadAfter(at(31)) == (0, nil))
            // A deleted message is passed over; the time still names the ones after it.
            _ = try await store.deleteMessage(id: "ut-m2", hard: false, by: nil, now: at(42))
            #expect(try await unreadAfter(at(20)) == (1, "ut-m3"))
            // Never forward: b, read up to m1 only, keeps m2's place when asked from after m3.
            _ = try await store.markUnread("b", in: channel, from: "ut-m1", now: at(43))
            _ = try await store.markUnread("b", in: channel, from: .time(at(35)), now: at(44))
            #expect(try await unread(store, "b", in: channel) == (2, "ut-m1"))
        }
    }

    /// The interleaving `POST /users/delete` meets: it read the channel as a
    /// conversation (two members), then a third member joined before the
    /// delete. The store decides again under the channel's lock.
    @Test("a conversation is deleted only if it still is one when the store looks", arguments: StoreKind.all)
    func conversationDeletion(kind: StoreKind) async throws {
        try await kind.withStore { store in
            _ = try await store.upsertUsers([User(id: "a"), User(id: "b"), User(id: "c")], now: .now())
            let cid = ChannelID(type: "messaging", id: "pair")
            let (read, _) = try await store.createChannel(cid, createdBy: "a", memberIDs: ["a", "b"], custom: [:], now: .now())
            #expect(read.memberCount == 2)
            _ = try await store.addMembers(["c"], to: read, maxMembers: 100, now: .now())
            #expect(try await store.deleteConversation(read, of: "a", hard: false, now: .now()) == nil)
            #expect(try await store.channel(cid)?.memberCount == 3)
            _ = try await store.removeMembers(["c"], from: read, now: .now())
            // Two members again, but not the user's conversation.
            #expect(try await store.deleteConversation(read, of: "c", hard: false, now: .now()) == nil)
            #expect(try await store.channel(cid) != nil)
            let members = try await store.deleteConversation(read, of: "a", hard: true, now: .now())
            #expect(Set(members ?? []) == ["a", "b"])
            #expect(try await store.channel(cid) == nil)
        }
    }

    @Test("a deleted channel leaves no read state and no receipt log; soft deleted, the cid starts again empty", arguments: StoreKind.all, [false, true])
    func channelDeletion(kind: StoreKind, hard: Bool) async throws {
        try await kind.withStore { store in
            let channel = try await channel(store, "gone", messages: 3)
            _ = try await store.markRead("b", in: channel.cid, upTo: "gone-m2", audience: everyone, now: .now())
            #expect(try await store.unreadTotals(of: "c") == UnreadTotals(messages: 3, channels: 1))
            let members = try await store.deleteChannel(channel, hard: hard, by: nil, now: .now())
            #expect(Set(members) == ["a", "b", "c"])
            #expect(try await store.channel(ChannelID(type: "messaging", id: "gone")) == nil)
            for user in ["a", "b", "c"] {
                #expect(try await store.unreadTotals(of: user) == UnreadTotals(messages: 0, channels: 0))
                #expect(try await store.member(user, of: channel) == nil)
                let log = store
                for kind in CursorKind.allCases {
                    #expect(try await log.loggedMoves(channelPK: channel.pk, userID: user, kind: kind).isEmpty)
                }
                #expect(try await store.unreadCounts(of: [user])[user]?.channels == [])
            }
            #expect(try await store.message(id: "gone-m1") == nil)
            await #expect(throws: StoreError.self) {
                _ = try await store.markRead("b", in: channel.cid, upTo: nil, audience: everyone, now: .now())
            }
            let (again, created) = try await store.createChannel(
                ChannelID(type: "messaging", id: "gone"), createdBy: "b", memberIDs: ["b", "c"], custom: [:], now: .now())
            #expect(created && again.memberCount == 2)
            // A new key: nothing stored under the old one can reach the new channel.
            #expect(again.pk != channel.pk)
            #expect(try await store.snapshot(of: again, messageLimit: 10, page: .newest).messages.isEmpty)
            #expect(try await unread(store, "c", in: again) == (0, nil))
        }
    }

    @Test("unread counts per user: totals and the channels with unread, deleted channels left out", arguments: StoreKind.all)
    func unreadCounts(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let first = try await channel(store, "u1", messages: 2)
            _ = try await channel(store, "u2", messages: 1)
            _ = try await store.markRead("b", in: first.cid, upTo: "u1-m1", audience: everyone, now: .now())
            let counts = try await store.unreadCounts(of: ["b", "c", "nobody"])
            #expect(counts["nobody"] == nil)
            #expect(counts["b"]?.totals == UnreadTotals(messages: 2, channels: 2))
            // Newest activity first.
            #expect(counts["b"]?.channels.map { "\($0.channel) \($0.unread) \($0.lastReadMessageID ?? "-")" } == [
                "messaging:u2 1 -", "messaging:u1 1 u1-m1",
            ])
            #expect(counts["c"]?.totals == UnreadTotals(messages: 3, channels: 2))
        }
    }

    @Test(
        "a deleted user leaves no read state, receipt log or thread state; their deleted messages leave every count",
        arguments: StoreKind.all, [false, true])
    func userDeletion(kind: StoreKind, hard: Bool) async throws {
        try await kind.withStore { store in
            let channel = try await channel(store, "ud", messages: 1)
            _ = try await store.sendMessage(NewMessage(id: "ud-b1", userID: "b", text: "from b", custom: [:]), to: channel, now: .now())
            _ = try await store.sendMessage(
                NewMessage(id: "ud-b2", userID: "b", text: "reply", custom: [:], parentID: "ud-m1"), to: channel, now: .now())
            #expect(try await unread(store, "c", in: channel) == (2, "ud-m1"))
            #expect(try await store.unreadCounts(of: ["a"])["a"]?.threads.map(\.unread) == [1])
            let pks = try await store.deleteUser("b", hard: hard, messages: true, now: .now())
            #expect(pks == [channel.pk])
            #expect(try await store.member("b", of: channel) == nil)
            #expect(try await store.channel(ChannelID(type: "messaging", id: "ud"))?.memberCount == 2)
            let log = store
            for kind in CursorKind.allCases {
                #expect(try await log.loggedMoves(channelPK: channel.pk, userID: "b", kind: kind).isEmpty)
            }
            // b's message no longer counts for c; a's still does.
            #expect(try await unread(store, "c", in: channel) == (1, "ud-m1"))
            #expect(try await store.unreadTotals(of: "c") == UnreadTotals(messages: 1, channels: 1))
            // b's reply no longer counts in a's thread, and b has no thread read state left.
            #expect(try await store.unreadCounts(of: ["a"])["a"]?.threads == [])
            if !hard { #expect(try await store.unreadCounts(of: ["b"])["b"]?.threads == []) }
            #expect(try await store.users(ids: ["b"]).isEmpty == hard)
            #expect(try await store.message(id: "ud-b1")?.message.deletedAt != nil || hard)
            if hard { #expect(try await store.message(id: "ud-b1") == nil) }
            await #expect(throws: StoreError.unknownUser("ghost")) {
                _ = try await store.deleteUser("ghost", hard: hard, messages: false, now: .now())
            }
        }
    }
}
