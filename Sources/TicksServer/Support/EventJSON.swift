import Foundation
import TicksProtocol

/// Receipt events written straight to JSON bytes, without `JSONEncoder`:
/// every receipt sends three or four small events and answers with one,
/// and the encoder's generic machinery was a tenth of the server's CPU on
/// the receipt path (BENCHMARKS.md, issue 26). The JSON is what
/// `JSONCoding.data` writes, fields in the order the types declare them (the
/// encoder's order is a dictionary's); `EventJSONTests` holds the two
/// together for random events. An event carrying an object this writer leaves to the
/// encoder (a message, a channel, a member, the connecting user) or a
/// custom field holding a fractional number goes to the encoder.
enum EventJSON {
    /// `event` as JSON, the fast way when it can be.
    static func data(_ event: Event) throws -> Data {
        if let bytes = bytes(event) { return Data(bytes) }
        return try JSONCoding.data(event)
    }

    /// `event`'s bytes; nil when it needs the encoder.
    static func bytes(_ event: Event) -> [UInt8]? {
        guard event.me == nil, event.message == nil, event.member == nil, event.channel == nil else { return nil }
        var writer = Writer()
        writer.raw("{")
        writer.key("type")
        writer.string(event.type.rawValue)
        writer.raw(",")
        writer.key("created_at")
        writer.string(event.createdAt.rfc3339)
        writer.field("cid", event.cid?.rawValue)
        writer.field("channel_type", event.channelType)
        writer.field("channel_id", event.channelID)
        if let user = event.user {
            writer.raw(",")
            writer.key("user")
            guard writer.user(user) else { return nil }
        }
        writer.field("connection_id", event.connectionID)
        writer.field("watcher_count", event.watcherCount)
        writer.field("unread_count", event.unreadCount)
        writer.field("total_unread_count", event.totalUnreadCount)
        writer.field("unread_channels", event.unreadChannels)
        writer.field("unread_messages", event.unreadMessages)
        writer.field("last_read_message_id", event.lastReadMessageID)
        writer.field("last_read_at", event.lastReadAt?.rfc3339)
        writer.field("first_unread_message_id", event.firstUnreadMessageID)
        writer.field("last_delivered_at", event.lastDeliveredAt?.rfc3339)
        writer.field("last_delivered_message_id", event.lastDeliveredMessageID)
        if let hardDelete = event.hardDelete {
            writer.raw(",")
            writer.key("hard_delete")
            writer.raw(hardDelete ? "true" : "false")
        }
        writer.field("message_id", event.messageID)
        if let thread = event.thread {
            writer.raw(",")
            writer.key("thread")
            writer.raw("{")
            writer.key("parent_message_id")
            writer.string(thread.parentMessageID)
            writer.field("channel_cid", thread.channelCID)
            writer.field("created_by_user_id", thread.createdByUserID)
            writer.field("reply_count", thread.replyCount)
            writer.field("created_at", thread.createdAt.rfc3339)
            writer.raw("}")
        }
        writer.field("unread_threads", event.unreadThreads)
        writer.field("thread_id", event.threadID)
        writer.field("unread_thread_messages", event.unreadThreadMessages)
        writer.field("played_at", event.playedAt?.rfc3339)
        writer.field("parent_id", event.parentID)
        writer.raw("}")
        return writer.out
    }

    /// JSON written into bytes, escaped as `JSONEncoder` escapes (slashes left as they are).
    struct Writer {
        var out: [UInt8] = []

        init() { out.reserveCapacity(512) }

        mutating func raw(_ text: StaticString) {
            text.withUTF8Buffer { out.append(contentsOf: $0) }
        }

        mutating func key(_ name: StaticString) {
            raw("\"")
            raw(name)
            raw("\":")
        }

        /// `,"name":value` when there is a value.
        mutating func field(_ name: StaticString, _ value: String?) {
            guard let value else { return }
            raw(",")
            key(name)
            string(value)
        }

        mutating func field(_ name: StaticString, _ value: Int?) {
            guard let value else { return }
            raw(",")
            key(name)
            integer(Int64(value))
        }

        mutating func integer(_ value: Int64) {
            out.append(contentsOf: String(value).utf8)
        }

        mutating func string(_ text: String) {
            out.append(UInt8(ascii: "\""))
            // Most text (ids, times) has nothing to escape: copied whole.
            guard text.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") })
            else {
                out.append(contentsOf: text.utf8)
                out.append(UInt8(ascii: "\""))
                return
            }
            for byte in text.utf8 {
                switch byte {
                case UInt8(ascii: "\""): raw("\\\"")
                case UInt8(ascii: "\\"): raw("\\\\")
                case 0x08: raw("\\b")
                case 0x09: raw("\\t")
                case 0x0A: raw("\\n")
                case 0x0C: raw("\\f")
                case 0x0D: raw("\\r")
                case 0..<0x20:
                    raw("\\u00")
                    out.append(Self.hex[Int(byte >> 4)])
                    out.append(Self.hex[Int(byte & 0xF)])
                default: out.append(byte)
                }
            }
            out.append(UInt8(ascii: "\""))
        }

        private static let hex = Array("0123456789abcdef".utf8)

        /// `["…","…"]`.
        mutating func strings(_ texts: [String]) {
            raw("[")
            for (index, text) in texts.enumerated() {
                if index > 0 { raw(",") }
                string(text)
            }
            raw("]")
        }

        /// What `string(text)` writes, in bytes, quotes included.
        static func size(of text: String) -> Int {
            var size = 2
            for byte in text.utf8 {
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), 0x08, 0x09, 0x0A, 0x0C, 0x0D: size += 2
                case 0..<0x20: size += 6
                default: size += 1
                }
            }
            return size
        }

        /// `User.encode(to:)`'s object; false when a custom field needs the encoder.
        mutating func user(_ user: User) -> Bool {
            raw("{")
            key("id")
            string(user.id)
            field("name", user.name)
            field("image", user.image)
            field("role", user.role ?? "user")
            if let privacy = user.privacySettings {
                raw(",")
                key("privacy_settings")
                raw("{")
                var first = true
                for (name, toggle) in [
                    ("read_receipts", privacy.readReceipts), ("delivery_receipts", privacy.deliveryReceipts),
                    ("typing_indicators", privacy.typingIndicators),
                ] {
                    guard let toggle else { continue }
                    if !first { raw(",") }
                    first = false
                    string(name)
                    raw(":{")
                    if let enabled = toggle.enabled {
                        key("enabled")
                        raw(enabled ? "true" : "false")
                    }
                    raw("}")
                }
                raw("}")
            }
            field("created_at", user.createdAt?.rfc3339)
            field("updated_at", user.updatedAt?.rfc3339)
            raw(",\"banned\":false,\"online\":false")
            for (name, value) in user.custom where !User.reserved.contains(name) {
                raw(",")
                string(name)
                raw(":")
                guard json(value) else { return false }
            }
            raw("}")
            return true
        }

        /// A custom value; false for a fractional number, whose digits are the encoder's to choose.
        mutating func json(_ value: JSONValue) -> Bool {
            switch value {
            case .null: raw("null")
            case .bool(let flag): raw(flag ? "true" : "false")
            case .int(let number): integer(number)
            case .double: return false
            case .string(let text): string(text)
            case .array(let values):
                raw("[")
                for (index, element) in values.enumerated() {
                    if index > 0 { raw(",") }
                    guard json(element) else { return false }
                }
                raw("]")
            case .object(let fields):
                raw("{")
                var first = true
                for (name, element) in fields {
                    if !first { raw(",") }
                    first = false
                    string(name)
                    raw(":")
                    guard json(element) else { return false }
                }
                raw("}")
            }
            return true
        }
    }
}
