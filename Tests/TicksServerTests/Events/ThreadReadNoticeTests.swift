import Synchronization
import Testing
import TicksProtocol
import TicksReceipts

@testable import TicksServer

/// Who hears a thread marked read (`ThreadReadNotice`, Events/ReceiptHearing.swift):
/// every member when the reader's reads are visible to others (R8, R10), else the reader alone.
@Suite("Who hears a thread marked read")
struct ThreadReadNoticeTests {
    static let start = Timestamp(microseconds: 1_000_000)
    static let channel = ChannelRecord(
        pk: 1, cid: ChannelID(type: "messaging", id: "t"), createdBy: "amy", custom: [:], lastSeq: 3,
        lastMessageAt: start, memberCount: 3, createdAt: start, updatedAt: start)
    static let read = ThreadRead(
        parent: MessageRecord(
            id: "p1", channelPK: 1, cid: channel.cid, seq: 1, userID: "amy", text: "parent", custom: [:],
            createdAt: start, replyCount: 2),
        readAt: start + .seconds(5), lastReadMessageID: "r2")

    static func config(readEvents: Bool) -> ChannelConfig {
        ChannelConfig(
            name: "messaging", readEvents: readEvents, deliveryEvents: true, createdAt: start, updatedAt: start)
    }

    static let privateReads = PrivacySettings(readReceipts: .init(enabled: false))

    /// The recipients, and whether the member list was asked for.
    static func recipients(of notice: ThreadReadNotice) async -> (ids: [String], askedForMembers: Bool) {
        let asked = Mutex(false)
        let ids = await notice.recipients {
            asked.withLock { $0 = true }
            return ["amy", "bob", "cat"]
        }
        return (ids, asked.withLock { $0 })
    }

    @Test(
        "visible reads go to every member; private reads, or read events off, to the reader alone",
        arguments: [
            (PrivacySettings?.none, true, ["amy", "bob", "cat"]),
            (privateReads, true, ["bob"]),
            (PrivacySettings?.none, false, ["bob"]),
            (privateReads, false, ["bob"]),
        ])
    func audience(privacy: PrivacySettings?, readEvents: Bool, expected: [String]) async {
        let reader = User(id: "bob", privacySettings: privacy)
        let notice = ThreadReadNotice(
            Self.read, by: reader, in: Self.channel, config: Self.config(readEvents: readEvents))
        let (ids, asked) = await Self.recipients(of: notice)
        #expect(ids == expected)
        // The member list is read only when the others hear it.
        #expect(asked == (expected.count > 1))
        #expect(notice.toOthers == (expected.count > 1))
    }

    @Test("the event is message.read with the thread, at the thread's read time and reply")
    func event() {
        let notice = ThreadReadNotice(
            Self.read, by: User(id: "bob"), in: Self.channel, config: Self.config(readEvents: true))
        #expect(notice.event.type == .messageRead)
        #expect(notice.event.cid == ChannelID(type: "messaging", id: "t"))
        #expect(notice.event.createdAt == Self.read.readAt)
        #expect(notice.event.lastReadMessageID == "r2")
        #expect(notice.event.thread?.parentMessageID == "p1")
        #expect(notice.event.thread?.replyCount == 2)
        #expect(notice.event.user?.id == "bob")
    }

    @Test("a channel type that is gone tells no one but the reader")
    func missingConfig() async {
        let notice = ThreadReadNotice(Self.read, by: User(id: "bob"), in: Self.channel, config: nil)
        #expect(await Self.recipients(of: notice).ids == ["bob"])
    }
}
