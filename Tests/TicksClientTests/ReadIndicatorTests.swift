import Foundation
import Testing
import TicksProtocol

@testable import TicksClient

/// The platform-neutral read indicator for every state, built from channel
/// states exactly as the client builds them from the server's answers.
@Suite("Read indicator model")
struct ReadIndicatorTests {
    static let start: Int64 = 1_800_000_000_000_000

    /// A channel of `members` where alice wrote m1…m3 and each reader's
    /// cursors point at the given messages (read at `start` + the given seconds).
    static func channel(
        members: [String], reads: [String: (read: String?, delivered: String?, at: Int64)] = [:],
        readEvents: Bool = true, deliveryEvents: Bool = true, outbox: [OutboxEntry] = [],
        policy: GroupPolicy = .anyMember, allReached: (read: String?, delivered: String?) = (nil, nil)
    ) -> ChatChannel {
        let now = Timestamp(microseconds: start)
        let config = ChannelConfig(
            name: "messaging", readEvents: readEvents, deliveryEvents: deliveryEvents, createdAt: now, updatedAt: now)
        let users = Dictionary(uniqueKeysWithValues: members.map { ($0, User(id: $0, name: $0.capitalized)) })
        let messages = (1...3).map { index in
            Message(
                id: "m\(index)", cid: ChannelID(type: "messaging", id: "g"), text: "text \(index)",
                user: users["alice"]!,
                createdAt: Timestamp(microseconds: start + Int64(index)), updatedAt: now)
        }
        var readStates = [
            ReadState(
                user: users["alice"]!, lastRead: now, lastReadMessageID: "m3", unreadMessages: 0,
                firstUnreadMessageID: nil, lastDeliveredAt: now, lastDeliveredMessageID: "m3")
        ]
        for (userID, cursor) in reads {
            let at = Timestamp(microseconds: start + cursor.at * 1_000_000)
            readStates.append(
                ReadState(
                    user: users[userID]!, lastRead: cursor.read == nil ? nil : at, lastReadMessageID: cursor.read,
                    unreadMessages: nil, firstUnreadMessageID: nil, lastDeliveredAt: cursor.delivered == nil ? nil : at,
                    lastDeliveredMessageID: cursor.delivered))
        }
        var state = ChannelState(
            channel: Channel(
                id: "g", type: "messaging", createdAt: now, updatedAt: now, createdBy: nil, memberCount: members.count,
                lastMessageAt: now, config: config, custom: [:]),
            members: members.map { Member(user: users[$0]!, createdAt: now) }, messages: messages, read: readStates,
            watcherCount: 0, membership: nil)
        state.readByAllUpTo = allReached.read
        state.deliveredToAllUpTo = allReached.delivered
        var model = ChannelModel(cid: ChannelID(type: "messaging", id: "g"))
        _ = model.load(state, currentUserID: "alice")
        return model.snapshot(
            currentUserID: "alice", currentUser: users["alice"], outbox: outbox, policy: policy)
    }

    static func entry(_ id: String, _ state: OutboxEntry.State) -> OutboxEntry {
        OutboxEntry(
            id: id, userID: "alice", cid: "messaging:g", text: "local", custom: "{}", createdAt: start + 10,
            state: state, attempts: state == .failed ? 4 : 0,
            lastError: state == .failed ? "the server could not be reached" : nil)
    }

    func indicator(_ channel: ChatChannel, _ id: String, options: ReadIndicatorOptions = .default) throws
        -> ReadIndicator
    {
        channel.readIndicator(for: try #require(channel.message(withID: id)), options: options)
    }

    @Test("pending and failed come from the outbox: a clock, and an error mark")
    func localStates() throws {
        let channel = Self.channel(
            members: ["alice", "bob"], outbox: [Self.entry("p1", .pending), Self.entry("f1", .failed)])
        let pending = try indicator(channel, "p1")
        #expect((pending.state, pending.checkmarks, pending.symbol) == (.pending, 0, "…"))
        #expect(pending.accessibilityLabel == "Sending")
        let failed = try indicator(channel, "f1")
        #expect((failed.state, failed.tint, failed.symbol) == (.failed, .error, "!"))
        #expect(channel.message(withID: "f1")?.localState == .failed(reason: "the server could not be reached"))
        // Local messages come after the server's.
        #expect(channel.messages.map(\.id) == ["m1", "m2", "m3", "p1", "f1"])
    }

    @Test("sent: one grey check; delivered: two grey; read: two blue")
    func checkmarks() throws {
        let channel = Self.channel(
            members: ["alice", "bob"], reads: ["bob": (read: "m1", delivered: "m2", at: 5)])
        let read = try indicator(channel, "m1")
        #expect((read.state, read.checkmarks, read.tint, read.symbol) == (.read, 2, .blue, "✓✓"))
        #expect(read.readCount == nil, "no count in a one-to-one channel")
        #expect(read.accessibilityLabel == "Read")
        let delivered = try indicator(channel, "m2")
        #expect((delivered.state, delivered.checkmarks, delivered.tint) == (.delivered, 2, .grey))
        let sent = try indicator(channel, "m3")
        #expect((sent.state, sent.checkmarks, sent.tint, sent.symbol) == (.sent, 1, .grey, "✓"))
    }

    @Test("groups: the read count, the last three readers most recent first, and N more")
    func groupReaders() throws {
        let members = ["alice", "bob", "carol", "dave", "erin", "frank"]
        let channel = Self.channel(
            members: members,
            reads: [
                "bob": ("m3", "m3", 1), "carol": ("m3", "m3", 4), "dave": ("m2", "m3", 3), "erin": ("m3", "m3", 2),
                "frank": (nil, "m3", 6),
            ])
        let m2 = try indicator(channel, "m2")
        #expect(m2.state == .read)
        #expect(m2.readCount == 4)
        #expect(m2.lastReaders.map(\.id) == ["carol", "dave", "erin"])
        #expect(m2.moreReadersCount == 1)
        #expect(m2.moreReadersLabel == "and 1 more")
        #expect(m2.accessibilityLabel == "Read by 4")
        #expect(m2.lastReaders.first?.initials == "C")
        let m3 = try indicator(channel, "m3")
        #expect(m3.readCount == 3)
        #expect(m3.moreReadersLabel == nil)
        let message = try #require(channel.message(withID: "m3"))
        #expect(channel.deliveredReads(for: message).map(\.user.id) == ["frank", "dave"])
        #expect(message.deliveredCount == 5)
    }

    @Test("the all-members policy: read only when every other member read, as the server says (R13)")
    func allMembers() throws {
        let channel = Self.channel(
            members: ["alice", "bob", "carol"], reads: ["bob": ("m3", "m3", 1), "carol": (nil, "m2", 2)],
            policy: .allMembers, allReached: (nil, "m2"))
        #expect(try indicator(channel, "m2").state == .delivered)
        #expect(try indicator(channel, "m3").state == .sent)
        // A large channel: the members loaded have all read m3, but the server knows of others who have not.
        let large = Self.channel(
            members: ["alice", "bob", "carol"], reads: ["bob": ("m3", "m3", 1), "carol": ("m3", "m3", 2)],
            policy: .allMembers, allReached: ("m1", "m3"))
        #expect(try indicator(large, "m1").state == .read)
        #expect(try indicator(large, "m2").state == .delivered)
        #expect(try indicator(large, "m3").state == .delivered)
        // Any member still counts the members loaded.
        let any = Self.channel(
            members: ["alice", "bob", "carol"], reads: ["bob": ("m3", "m3", 1), "carol": ("m3", "m3", 2)],
            policy: .anyMember, allReached: ("m1", "m3"))
        #expect(try indicator(any, "m3").state == .read)
    }

    @Test("hidden: others' messages, read events off (R8), or turned off by the app")
    func hidden() throws {
        let quiet = Self.channel(members: ["alice", "bob"], reads: ["bob": ("m3", "m3", 1)], readEvents: false)
        #expect(try indicator(quiet, "m1") == .hidden)
        #expect(quiet.message(withID: "m1")?.deliveryStatus == nil)
        let channel = Self.channel(members: ["alice", "bob"], reads: ["bob": ("m3", "m3", 1)])
        #expect(try indicator(channel, "m1", options: ReadIndicatorOptions(isEnabled: false)) == .hidden)
    }

    @Test("R9: with delivery events off, never delivered")
    func noDelivered() throws {
        let channel = Self.channel(
            members: ["alice", "bob"], reads: ["bob": (nil, "m3", 1)], deliveryEvents: false)
        #expect(try indicator(channel, "m3").state == .sent)
        #expect(channel.deliveredReads(for: try #require(channel.message(withID: "m3"))).isEmpty)
    }

    @Test("customisable: fewer avatars, no count, or a mapping of one's own")
    func customised() throws {
        let channel = Self.channel(
            members: ["alice", "bob", "carol"], reads: ["bob": ("m3", "m3", 1), "carol": ("m3", "m3", 2)])
        let one = try indicator(channel, "m1", options: ReadIndicatorOptions(maxReaders: 1, showsReadCount: false))
        #expect(one.lastReaders.map(\.id) == ["carol"])
        #expect(one.moreReadersLabel == "and 1 more")
        #expect(one.readCount == nil)
        let mapped = try indicator(
            channel, "m1",
            options: ReadIndicatorOptions(customize: { indicator, _, _ in
                var copy = indicator
                copy.accessibilityLabel = "Gelesen von \(indicator.readCount ?? 0)"
                return copy
            }))
        #expect(mapped.accessibilityLabel == "Gelesen von 2")
    }
}
