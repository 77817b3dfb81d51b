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
/// Most events are the same for everyone who gets them. `message.new` differs
/// only in the recipient's unread counts, so the message (the large part) is
/// encoded once as `shared`, a JSON object without its closing brace, and
/// each recipient gets a small `personal` ending: `,"unread_count":1,…}`.
public struct EncodedEvent: Sendable {
    let shared: ByteBuffer
    /// Per recipient, the end of their copy; nil when `shared` is the whole frame for all.
    let personal: [String: ByteBuffer]?
    /// Which of each recipient's connections it goes to.
    var audience: ConnectionAudience = .everyConnection

    /// An event that is the same for every recipient.
    init(_ data: Data) {
        self.shared = ByteBuffer(bytes: data)
        self.personal = nil
    }

    /// `object` (a JSON object) with `endings[user]`'s fields added for each recipient.
    /// - Parameter endings: per recipient, `,"name":value,…` (without the closing brace).
    init(object: Data, endings: [String: String], audience: ConnectionAudience = .everyConnection) throws {
        guard object.last == UInt8(ascii: "}") else { throw EncodingError.invalidValue(object, .init(codingPath: [], debugDescription: "an event must encode as a JSON object")) }
        self.shared = ByteBuffer(bytes: object.dropLast())
        self.personal = endings.mapValues { ByteBuffer(string: $0 + "}") }
        self.audience = audience
    }

    init(shared: ByteBuffer, personal: [String: ByteBuffer]?, audience: ConnectionAudience = .everyConnection) {
        self.shared = shared
        self.personal = personal
        self.audience = audience
    }

    /// `userID`'s frame; nil when the event has personal parts and none for them.
    func frame(for userID: String) -> OutboundFrame? {
        guard let personal else { return OutboundFrame(shared: shared) }
        return personal[userID].map { OutboundFrame(shared: shared, personal: $0) }
    }

    /// What one recipient's frame weighs.
    func byteCount(for userID: String) -> Int {
        shared.readableBytes + (personal?[userID]?.readableBytes ?? 0)
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
