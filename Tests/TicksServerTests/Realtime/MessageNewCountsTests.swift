import Foundation
import Logging
import Synchronization
import Testing
import TicksProtocol
import TicksTestSupport

@testable import TicksServer

/// `message.new`'s counts are read by the node that holds the recipients'
/// connections, after the commit, for those connected to it alone
/// (`EventPublisher.messageNew`, `RecipientCountsReader`): a send into a
/// large channel reads no one's counts when no member is connected, and a
/// read that fails leaves the counts out, never the message.
@Suite("message.new's counts, read per node")
struct MessageNewCountsTests {
    static let start = Timestamp(microseconds: 1_000_000)
    static let channel = ChannelRecord(
        pk: 7, cid: ChannelID(type: "messaging", id: "big"), createdBy: "amy", custom: [:], lastSeq: 1,
        lastMessageAt: start, memberCount: 1_000, createdAt: start, updatedAt: start)
    static let config = ChannelConfig(
        name: "messaging", readEvents: true, deliveryEvents: true, createdAt: start, updatedAt: start)

    static func outcome(members: [String]) -> SendOutcome {
        SendOutcome(
            message: MessageRecord(
                id: "m1", channelPK: channel.pk, cid: channel.cid, seq: 1, userID: "amy", text: "hi", custom: [:],
                createdAt: start),
            created: true, recipients: members)
    }

    /// A publisher on a hub of its own, with `read` as its counts reader; the channels and users
    /// each call of the reader asked for.
    static func publisher(_ read: @escaping RecipientCountsReader) -> (EventPublisher, ConnectionHub) {
        let hub = ConnectionHub(
            bufferBytes: 1 << 20, maxConnectionsPerUser: 5, metrics: ServerMetrics(), logger: Logger(label: "test"))
        return (EventPublisher(hub: hub, bus: nil, counts: read, metrics: ServerMetrics(), logger: Logger(label: "test")), hub)
    }

    static func first(_ frames: AsyncStream<OutboundFrame>) async throws -> JSON {
        var iterator = frames.makeAsyncIterator()
        let frame = try #require(await iterator.next())
        return try JSON(parsing: String(buffer: frame.buffer))
    }

    @Test("with 1,000 members and two of them connected, the counts of those two are read, once, and each gets theirs")
    func onlyTheConnected() async throws {
        let asked = Mutex<[(Int64, [String]?)]>([])
        let (publisher, hub) = Self.publisher { channelPK, users in
            asked.withLock { $0.append((channelPK, users)) }
            return (users ?? []).enumerated().map { index, user in
                RecipientUnread(userID: user, channelUnread: index + 1, totals: UnreadTotals(messages: 10 + index, channels: 2))
            }
        }
        let members = ["amy"] + (1..<1_000).map { "member\($0)" }
        let (bob, bobFrames) = try hub.register(userID: "member5")
        let (cat, catFrames) = try hub.register(userID: "member999")
        try await publisher.messageNew(Self.outcome(members: members), channel: Self.channel, config: Self.config, users: [:])
        #expect(asked.withLock { $0.map(\.0) } == [Self.channel.pk])
        #expect(asked.withLock { $0.first?.1 } == ["member5", "member999"])
        let forBob = try await Self.first(bobFrames)
        let forCat = try await Self.first(catFrames)
        #expect(forBob["type"].string == "message.new" && forBob["message"]["id"].string == "m1")
        #expect(forBob["unread_count"].int == 1 && forBob["total_unread_count"].int == 10 && forBob["unread_channels"].int == 2)
        #expect(forCat["unread_count"].int == 2 && forCat["total_unread_count"].int == 11)
        #expect(publisher.metrics.registry.emitToString().contains("ticks_message_new_counts_missing_total 0\n"))
        hub.unregister(bob)
        hub.unregister(cat)
    }

    @Test("with no member connected (and no other node), nothing is read and nothing is built")
    func nobodyConnected() async throws {
        let asked = Atomic<Int>(0)
        let (publisher, _) = Self.publisher { _, _ in
            asked.add(1, ordering: .relaxed)
            return []
        }
        try await publisher.messageNew(
            Self.outcome(members: (0..<1_000).map { "member\($0)" }), channel: Self.channel, config: Self.config, users: [:])
        #expect(asked.load(ordering: .relaxed) == 0)
    }

    struct Away: Error {}

    @Test("counts that cannot be read are left out; the message still reaches the member, and one left out of the answer")
    func aFailedRead() async throws {
        for fails in [true, false] {
            let (publisher, hub) = Self.publisher { _, users in
                if fails { throw Away() }
                // The member who left meanwhile has no counts any more.
                return (users ?? []).filter { $0 != "leaver" }.map {
                    RecipientUnread(userID: $0, channelUnread: 3, totals: UnreadTotals(messages: 3, channels: 1))
                }
            }
            let (bob, bobFrames) = try hub.register(userID: "bob")
            let (leaver, leaverFrames) = try hub.register(userID: "leaver")
            try await publisher.messageNew(
                Self.outcome(members: ["amy", "bob", "leaver"]), channel: Self.channel, config: Self.config, users: [:])
            let forBob = try await Self.first(bobFrames)
            let forLeaver = try await Self.first(leaverFrames)
            #expect(forBob["message"]["id"].string == "m1" && forLeaver["message"]["id"].string == "m1")
            #expect(forBob["unread_count"].int == (fails ? nil : 3))
            #expect(forLeaver["unread_count"].int == nil)
            let missing = fails ? 2 : 1
            #expect(publisher.metrics.registry.emitToString().contains("ticks_message_new_counts_missing_total \(missing)\n"))
            hub.unregister(bob)
            hub.unregister(leaver)
        }
    }

    static func unlisted() -> SendOutcome {
        var outcome = outcome(members: [])
        outcome.everyMember = true
        return outcome
    }

    /// What a reader was asked for, call by call (nil: every member).
    final class Asked: Sendable {
        let calls = Mutex<[[String]?]>([])
    }

    /// A reader of a channel whose members are `members` (in that order), answering as the store does.
    static func members(_ members: [String], asked: Asked) -> RecipientCountsReader {
        { _, users in
            asked.calls.withLock { $0.append(users) }
            return members.filter { users?.contains($0) ?? true }.map {
                RecipientUnread(userID: $0, channelUnread: 1, totals: UnreadTotals(messages: 5, channels: 1))
            }
        }
    }

    @Test("to every member, unlisted: the users connected here are asked for, once; the members among them get it with their counts")
    func everyMemberAmongTheConnected() async throws {
        let asked = Asked()
        let (publisher, hub) = Self.publisher(Self.members(["amy"] + (1..<1_000).map { "member\($0)" }, asked: asked))
        let (bob, bobFrames) = try hub.register(userID: "member5")
        let (eve, eveFrames) = try hub.register(userID: "stranger")
        try await publisher.messageNew(Self.unlisted(), channel: Self.channel, config: Self.config, users: [:])
        #expect(asked.calls.withLock { $0.map { $0?.sorted() } } == [["member5", "stranger"]])
        let forBob = try await Self.first(bobFrames)
        #expect(forBob["type"].string == "message.new" && forBob["unread_count"].int == 1 && forBob["total_unread_count"].int == 5)
        #expect(forBob["watcher_count"].int == 1)
        hub.unregister(eve)
        var strangers = eveFrames.makeAsyncIterator()
        #expect(await strangers.next() == nil, "a user who is no member got the message")
        hub.unregister(bob)
    }

    @Test("to every member, unlisted, on a node holding more users than the channel has members: every member's counts are read")
    func everyMemberOfASmallerChannel() async throws {
        let asked = Asked()
        var channel = Self.channel
        channel.memberCount = 2
        let (publisher, hub) = Self.publisher(Self.members(["amy", "bob"], asked: asked))
        let registered = try ["bob", "cat", "dan"].map { try hub.register(userID: $0) }
        try await publisher.messageNew(Self.unlisted(), channel: channel, config: Self.config, users: [:])
        #expect(asked.calls.withLock { $0.count == 1 && $0[0] == nil })
        let forBob = try await Self.first(registered[0].frames)
        #expect(forBob["type"].string == "message.new" && forBob["unread_count"].int == 1)
        for (user, (outbox, frames)) in zip(["cat", "dan"], registered.dropFirst()) {
            hub.unregister(outbox)
            var iterator = frames.makeAsyncIterator()
            #expect(await iterator.next() == nil, "\(user), no member, got the message")
        }
        hub.unregister(registered[0].outbox)
    }

    @Test("to every member, unlisted, with no one connected (and no other node): nothing is read")
    func everyMemberNobodyConnected() async throws {
        let asked = Asked()
        let (publisher, _) = Self.publisher(Self.members(["amy"], asked: asked))
        try await publisher.messageNew(Self.unlisted(), channel: Self.channel, config: Self.config, users: [:])
        #expect(asked.calls.withLock { $0.isEmpty })
    }

    @Test(
        "to every member, unlisted, when the read fails: whom it was for is unknown, so the connections that may be members' close",
        arguments: [1_000, 1])
    func everyMemberReadFails(memberCount: Int) async throws {
        let (publisher, hub) = Self.publisher { _, _ in throw Away() }
        var channel = Self.channel
        channel.memberCount = memberCount
        let registered = try ["bob", "cat"].map { try hub.register(userID: $0) }
        try await publisher.messageNew(Self.unlisted(), channel: channel, config: Self.config, users: [:])
        // Closed without a frame: each stream ends (with 1,000 members the users here were asked
        // for and are closed; with 1, every connection here is).
        for (_, frames) in registered {
            var iterator = frames.makeAsyncIterator()
            #expect(await iterator.next() == nil)
        }
    }

    @Test(
        "the store reads the counts of the members among any number of users: 260,000, past the values SQLite binds to a statement",
        arguments: StoreKind.all)
    func manyUsers(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let now = Timestamp(microseconds: 1_700_000_000_000_000)
            let members = ["amy", "bob", "cat"]
            _ = try await store.upsertUsers(members.map { User(id: $0) }, now: now)
            let (channel, _) = try await store.createChannel(
                ChannelID(type: "messaging", id: "many"), createdBy: "amy", memberIDs: members, custom: [:], now: now)
            _ = try await store.sendMessage(
                NewMessage(id: "m1", userID: "amy", text: "hi", custom: [:]), to: channel, now: Timestamp(microseconds: now.microseconds + 1))
            // The members spread over the list, at both ends and across a read's boundary.
            var users = (0..<260_000).map { "stranger\($0)" }
            users[0] = "bob"
            users[min(SQLStore.recipientCountsPerRead, users.count / 2)] = "cat"
            users[users.count - 1] = "amy"
            let counts = try await store.recipientCounts(in: channel.pk, among: users)
            #expect(Dictionary(uniqueKeysWithValues: counts.map { ($0.userID, $0.channelUnread) }) == ["amy": 0, "bob": 1, "cat": 1])
            #expect(counts.first { $0.userID == "bob" }?.totals == UnreadTotals(messages: 1, channels: 1))
            // Among no list: every member's, in join order.
            let every = try await store.recipientCounts(in: channel.pk, among: nil)
            #expect(every.map(\.userID) == members && every.map(\.channelUnread) == [0, 1, 1])
        }
    }
}
