import Foundation
import Testing
import TicksProtocol
import TicksReceipts

@testable import TicksServer

/// The hearers' privacy a change carries out of its transaction (`HearersPrivacy`, R15),
/// on both stores and through every path that writes a receipt: PostgreSQL's batched
/// moves read it inside `MovesFunction`, the other paths step by step.
@Suite("The hearers' privacy a change carries (R15)")
struct HearersPrivacyStoreTests {
    static let small = ReceiptAudience(fullChannelLimit: 100)
    static let hidden = PrivacySettings(readReceipts: .init(enabled: false))

    /// amy and dan hide their reads; amy wrote m1, bob m2, in a channel of amy, bob, cat and dan.
    static func seeded(_ store: SQLStore) async throws -> ChannelRecord {
        let now = Timestamp.now()
        _ = try await store.upsertUsers(
            [
                User(id: "amy", privacySettings: hidden), User(id: "bob"), User(id: "cat"),
                User(id: "dan", privacySettings: hidden),
            ], now: now)
        let (channel, _) = try await store.createChannel(
            ChannelID(type: "messaging", id: "hearers"), createdBy: "amy", memberIDs: ["amy", "bob", "cat", "dan"],
            custom: [:], now: now)
        for (id, author) in [("m1", "amy"), ("m2", "bob")] {
            _ = try await store.sendMessage(
                NewMessage(id: id, userID: author, text: id, custom: [:]), to: channel, now: .now())
        }
        return try #require(try await store.channel(channel.cid))
    }

    @Test("with R15 off a move carries nothing: no one sees reads as deliveries", arguments: StoreKind.all)
    func off(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let channel = try await Self.seeded(store)
            let read = try await store.markRead("cat", in: channel.cid, upTo: nil, audience: Self.small, now: .now())
            #expect(read.hearers == HearersPrivacy())
            #expect(read.recipients.sorted() == ["amy", "bob", "cat", "dan"])
        }
    }

    @Test("with R15 on each path carries the hearers who hide their reads", arguments: StoreKind.all)
    func eachPath(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let channel = try await Self.seeded(store)
            _ = try await store.updateAppOptions(.init(reciprocalReadReceipts: true))
            let expected = HearersPrivacy(reciprocal: true, hidingReads: ["amy", "dan"])
            // PostgreSQL: one delivered target and a mark read go through the batch's function.
            let delivered = try await store.markDelivered(
                "cat", [DeliveredTarget(channel: channel.cid, messageID: "m1")], audience: Self.small, now: .now())
            #expect(delivered.map(\.hearers) == [expected])
            let read = try await store.markRead("cat", in: channel.cid, upTo: "m1", audience: Self.small, now: .now())
            #expect(read.hearers == expected)
            // Mark all read and a thread read: step by step on both.
            let all = try await store.markAllRead("cat", audience: Self.small, now: .now())
            #expect(all.map(\.hearers) == [expected])
            let thread = try await store.markThreadRead("bob", in: channel, parentID: "m1", now: .now())
            #expect(thread.hearers == expected)
        }
    }

    @Test(
        "in a large channel only the hearers count: the authors the move covered, members or not",
        arguments: StoreKind.all)
    func largeChannel(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let channel = try await Self.seeded(store)
            _ = try await store.updateAppOptions(.init(reciprocalReadReceipts: true))
            let large = ReceiptAudience(fullChannelLimit: 2)
            // cat reads m1 (amy's) alone: amy hears it, dan does not.
            let read = try await store.markRead("cat", in: channel.cid, upTo: "m1", audience: large, now: .now())
            #expect(Set(read.recipients) == ["amy", "cat"])
            #expect(read.hearers == HearersPrivacy(reciprocal: true, hidingReads: ["amy"]))
            // dan writes m3 and leaves; cat reads on: dan, an author of what she read, still hears it.
            let current = try #require(try await store.channel(channel.cid))
            _ = try await store.sendMessage(
                NewMessage(id: "m3", userID: "dan", text: "m3", custom: [:]), to: current, now: .now())
            _ = try await store.removeMembers(["dan"], from: current, now: .now())
            let on = try await store.markRead("cat", in: channel.cid, upTo: "m3", audience: large, now: .now())
            #expect(Set(on.recipients) == ["bob", "cat", "dan"])
            #expect(on.hearers == HearersPrivacy(reciprocal: true, hidingReads: ["dan"]))
        }
    }

    @Test("a play carries the privacy of the members and of its author, who may have left", arguments: StoreKind.all)
    func play(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let channel = try await Self.seeded(store)
            _ = try await store.updateAppOptions(.init(reciprocalReadReceipts: true))
            let current = try #require(try await store.channel(channel.cid))
            _ = try await store.removeMembers(["amy"], from: current, now: .now())
            let (m1, _) = try #require(try await store.message(id: "m1"))
            let play = try await store.markPlayed(m1, by: "bob", now: .now())
            #expect(play.hearers == HearersPrivacy(reciprocal: true, hidingReads: ["amy", "dan"]))
        }
    }

    @Test("a send carries the privacy of the authors it made read by all", arguments: StoreKind.all)
    func send(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let now = Timestamp.now()
            _ = try await store.upsertUsers([User(id: "amy", privacySettings: Self.hidden), User(id: "bob")], now: now)
            let (channel, _) = try await store.createChannel(
                ChannelID(type: "messaging", id: "pair"), createdBy: "amy", memberIDs: ["amy", "bob"], custom: [:],
                now: now)
            _ = try await store.updateAppOptions(.init(reciprocalReadReceipts: true))
            _ = try await store.sendMessage(
                NewMessage(id: "p1", userID: "amy", text: "t", custom: [:]), to: channel, now: now)
            // bob's answer reads amy's message: read by all, told to amy, who hides her reads.
            let current = try #require(try await store.channel(channel.cid))
            let answer = try await store.sendMessage(
                NewMessage(id: "p2", userID: "bob", text: "t", custom: [:]), to: current, now: .now())
            #expect(answer.reachedAll.filter { $0.kind == .read }.map(\.author) == ["amy"])
            #expect(answer.hearers == HearersPrivacy(reciprocal: true, hidingReads: ["amy"]))
        }
    }
}
