import Foundation
import NIOCore

/// A WebSocket text frame waiting in a connection's buffer.
///
/// Its bytes are shared: an event for many connections is encoded once and
/// every buffer holds a reference to the same storage, not a copy. Only the
/// few bytes that differ per recipient (their unread counts) are their own.
public struct OutboundFrame: Sendable {
    /// The bytes every recipient shares: the whole frame when `personal` is nil.
    let shared: ByteBuffer
    /// The end of this recipient's frame, appended to `shared`.
    let personal: ByteBuffer?

    init(shared: ByteBuffer, personal: ByteBuffer? = nil) {
        self.shared = shared
        self.personal = personal
    }

    /// A frame for one connection alone (`health.check`, errors).
    init(_ text: String) {
        self.init(shared: ByteBuffer(string: text))
    }

    var byteCount: Int { shared.readableBytes + (personal?.readableBytes ?? 0) }

    /// The memory the frame holds: NIO rounds every buffer's storage up to a
    /// power of two, so a frame of 33 KB occupies 64 KiB.
    var allocatedBytes: Int { shared.capacity + (personal?.capacity ?? 0) }

    /// The frame as one buffer: the shared storage itself unless part of it is personal.
    var buffer: ByteBuffer {
        guard let personal else { return shared }
        var whole = ByteBuffer()
        whole.reserveCapacity(byteCount)
        whole.writeImmutableBuffer(shared)
        whole.writeImmutableBuffer(personal)
        return whole
    }
}

/// An event encoded once for all its recipients.
///
/// Most events are the same for everyone who gets them. `message.new` (and
/// `notification.message_new`) differs only in the recipient's unread counts,
/// so the message (the large part) is encoded once as `shared`, a JSON object
/// without its closing brace, and each recipient's counts end their copy:
/// `,"unread_count":1,…}`, written only for the recipients a connection
/// here takes it to (a channel of 1,000 members wrote 1,000 endings for
/// every send, whoever was connected: BENCHMARKS.md, "Sends into one large channel").
public struct EncodedEvent: Sendable {
    let shared: ByteBuffer
    /// What ends each recipient's copy; nil when `shared` is the whole frame for all.
    let personal: Personal?
    /// Which of each recipient's connections it goes to.
    var audience: ConnectionAudience = .everyConnection

    /// The parts of an event that differ per recipient.
    enum Personal: Sendable {
        /// Each recipient's unread counts.
        case counts([String: UnreadEnding])
        /// Each recipient's ending as written, closing brace included: what a
        /// node of the release before puts on the bus (`PostgresEventBus`).
        case endings([String: ByteBuffer])
        /// Each recipient's counts in the channel `channelPK`, to be read by the
        /// node that holds their connections (`RecipientCountsReader`): how a
        /// new message goes on the bus, for every member, with no counts in it.
        case countsToRead(channelPK: Int64)

        /// `userID`'s ending; nil when the event is not for them (or their counts are still to read).
        func ending(for userID: String) -> ByteBuffer? {
            switch self {
            case .counts(let counts): counts[userID]?.bytes
            case .endings(let endings): endings[userID]
            case .countsToRead: nil
            }
        }
    }

    /// An event that is the same for every recipient.
    init(_ data: Data) {
        self.shared = ByteBuffer(bytes: data)
        self.personal = nil
    }

    /// `object` (a JSON object) with each recipient's `counts` added at its end.
    init(object: Data, counts: [String: UnreadEnding], audience: ConnectionAudience = .everyConnection) throws {
        try self.init(object: object, personal: .counts(counts), audience: audience)
    }

    /// `object` (a JSON object) left open at its end, for each recipient's `personal` ending.
    private init(object: Data, personal: Personal, audience: ConnectionAudience) throws {
        guard object.last == UInt8(ascii: "}") else { throw EncodingError.invalidValue(object, .init(codingPath: [], debugDescription: "an event must encode as a JSON object")) }
        self.init(shared: ByteBuffer(bytes: object.dropLast()), personal: personal, audience: audience)
    }

    init(shared: ByteBuffer, personal: Personal?, audience: ConnectionAudience = .everyConnection) {
        self.shared = shared
        self.personal = personal
        self.audience = audience
    }

    /// `object` (a JSON object) for members of the channel `channelPK` whose counts the nodes holding
    /// their connections read and add (`Personal.countsToRead`): what the bus carries of `message.new`.
    init(object: Data, countsToReadIn channelPK: Int64, audience: ConnectionAudience) throws {
        try self.init(object: object, personal: .countsToRead(channelPK: channelPK), audience: audience)
    }

    /// A new message whose counts were to read (`Personal.countsToRead`), for `users`, with their
    /// `counts`: a user with none (not read: one who left meanwhile; or nil, the read failed) gets
    /// the whole message without counts, so the message reaches every one of them.
    func counted(_ counts: [String: UnreadEnding]?, for users: [String]) -> EncodedEvent {
        guard case .countsToRead? = personal else { return self }
        guard let counts else {
            var whole = shared
            whole.writeString("}")
            return EncodedEvent(shared: whole, personal: nil, audience: audience)
        }
        guard users.contains(where: { counts[$0] == nil }) else {
            return EncodedEvent(shared: shared, personal: .counts(counts), audience: audience)
        }
        var endings: [String: ByteBuffer] = [:]
        endings.reserveCapacity(users.count)
        for user in users { endings[user] = counts[user]?.bytes ?? ByteBuffer(string: "}") }
        return EncodedEvent(shared: shared, personal: .endings(endings), audience: audience)
    }

    /// `userID`'s frame; nil when the event has personal parts and none for them.
    func frame(for userID: String) -> OutboundFrame? {
        guard let personal else { return OutboundFrame(shared: shared) }
        return personal.ending(for: userID).map { OutboundFrame(shared: shared, personal: $0) }
    }
}

/// Reads what `message.new` tells those of `userIDs` who are members of the channel `channelPK`
/// (every member, when nil): `TicksStore.recipientCounts`, on the node that holds their
/// connections, after the send committed.
public typealias RecipientCountsReader =
    @Sendable (_ channelPK: Int64, _ userIDs: [String]?) async throws -> [RecipientUnread]

/// A recipient's unread counts as their copy of `message.new` ends
/// (docs/events.md): the channel's, and their totals.
public struct UnreadEnding: Sendable, Equatable {
    /// `unread_count`: their unread messages in the channel.
    var channel: Int
    /// `total_unread_count`: in all their channels.
    var messages: Int
    /// `unread_channels`: their channels with unread messages.
    var channels: Int

    init(channel: Int, messages: Int, channels: Int) {
        self.channel = channel
        self.messages = messages
        self.channels = channels
    }

    init(_ recipient: RecipientUnread) {
        self.init(channel: recipient.channelUnread, messages: recipient.totals.messages, channels: recipient.totals.channels)
    }

    /// Each recipient's ending, by user.
    static func byUser(_ recipients: [RecipientUnread]) -> [String: UnreadEnding] {
        var counts: [String: UnreadEnding] = [:]
        counts.reserveCapacity(recipients.count)
        for recipient in recipients { counts[recipient.userID] = UnreadEnding(recipient) }
        return counts
    }

    /// `,"unread_count":…,"total_unread_count":…,"unread_channels":…}`, closing the event's object.
    var bytes: ByteBuffer {
        ByteBuffer(string: #","unread_count":\#(channel),"total_unread_count":\#(messages),"unread_channels":\#(channels)}"#)
    }
}

/// Which of a recipient's connections an event goes to (docs/events.md, "Watching").
public enum ConnectionAudience: Sendable, Equatable {
    /// All of them: notifications (`notification.*`), a user's own changes.
    case everyConnection
    /// Those watching the channel `cid`, and those that never watched any
    /// channel: the channel's events (`message.new`, receipts, members, typing).
    case watchers(String)
    /// Those that watch channels but not `cid`: `notification.message_new`.
    case notWatching(String)
}
