import Foundation
import PropertyBased
import Testing
import TicksProtocol

@testable import TicksServer

/// `EventJSON` writes the JSON `JSONCoding` (JSONEncoder) writes, for random
/// receipt events: every optional field present or not, text with quotes,
/// backslashes, control characters and any Unicode, users with privacy
/// settings and custom fields. The same JSON, not the same bytes: the
/// encoder writes an object's fields in an order of its own (a dictionary's),
/// the writer in the order the types declare them.
@Suite("EventJSON")
struct EventJSONTests {
    /// A small deterministic generator, seeded by the property's input.
    typealias SplitMix = SQLiteStoreTests.SplitMix

    static let pieces: [String] = [
        "a", "Z", "9", "\"", "\\", "/", "\n", "\t", "\r", "\u{8}", "\u{c}", "\u{0}", "\u{1f}", "\u{7f}", "é", "😀",
        "\u{2028}", " ", ":", "-",
    ]

    static func text(_ rng: inout SplitMix) -> String {
        (0..<Int.random(in: 0...12, using: &rng)).map { _ in pieces.randomElement(using: &rng)! }.joined()
    }

    static func maybe<T>(_ rng: inout SplitMix, _ make: (inout SplitMix) -> T) -> T? {
        Bool.random(using: &rng) ? make(&rng) : nil
    }

    static func time(_ rng: inout SplitMix) -> Timestamp {
        Timestamp(microseconds: Int64.random(in: 0...4_102_444_800_000_000, using: &rng))
    }

    static func json(_ rng: inout SplitMix, depth: Int = 0) -> JSONValue {
        switch Int.random(in: 0...(depth < 2 ? 6 : 4), using: &rng) {
        case 0: .null
        case 1: .bool(Bool.random(using: &rng))
        case 2: .int(Int64.random(in: .min ... .max, using: &rng))
        case 3, 4: .string(text(&rng))
        case 5: .array((0..<Int.random(in: 0...3, using: &rng)).map { _ in json(&rng, depth: depth + 1) })
        default:
            .object(
                Dictionary(
                    (0..<Int.random(in: 0...3, using: &rng)).map { _ in (text(&rng), json(&rng, depth: depth + 1)) }
                ) { a, _ in a })
        }
    }

    static func user(_ rng: inout SplitMix, custom: Bool) -> User {
        var user = User(id: text(&rng))
        user.name = maybe(&rng, text)
        user.image = maybe(&rng, text)
        user.role = maybe(&rng, text)
        user.createdAt = maybe(&rng, time)
        user.updatedAt = maybe(&rng, time)
        user.privacySettings = maybe(&rng) { rng in
            func toggle(_ rng: inout SplitMix) -> PrivacySettings.Toggle {
                .init(enabled: maybe(&rng) { Bool.random(using: &$0) })
            }
            return PrivacySettings(
                readReceipts: maybe(&rng, toggle), deliveryReceipts: maybe(&rng, toggle),
                typingIndicators: maybe(&rng, toggle))
        }
        if custom {
            for _ in 0..<Int.random(in: 1...3, using: &rng) { user.custom["x" + text(&rng)] = json(&rng) }
        }
        return user
    }

    static func event(seed: UInt64, custom: Bool) -> Event {
        var rng = SplitMix(state: seed)
        let types: [EventType] = [
            .messageRead, .messageDelivered, .notificationMarkRead, .messageReadByAll, .messageDeliveredToAll,
            .messagePlayed, .healthCheck, .typingStart, .typingStop,
        ]
        // Any text either side: the writer escapes a cid's type and id as the encoder does.
        let cid = maybe(&rng) { rng in
            ChannelID(type: Bool.random(using: &rng) ? "messaging" : text(&rng), id: text(&rng))
        }
        var event = Event(
            type: types.randomElement(using: &rng)!, createdAt: time(&rng), cid: cid,
            user: maybe(&rng) { user(&$0, custom: custom) })
        func number(_ rng: inout SplitMix) -> Int { Int.random(in: -5...Int.max, using: &rng) }
        event.connectionID = maybe(&rng, text)
        event.watcherCount = maybe(&rng, number)
        event.unreadCount = maybe(&rng, number)
        event.totalUnreadCount = maybe(&rng, number)
        event.unreadChannels = maybe(&rng, number)
        event.unreadMessages = maybe(&rng, number)
        event.lastReadMessageID = maybe(&rng, text)
        event.lastReadAt = maybe(&rng, time)
        event.firstUnreadMessageID = maybe(&rng, text)
        event.lastDeliveredAt = maybe(&rng, time)
        event.lastDeliveredMessageID = maybe(&rng, text)
        event.hardDelete = maybe(&rng) { Bool.random(using: &$0) }
        event.messageID = maybe(&rng, text)
        event.thread = maybe(&rng) { rng in
            MessageThread(
                parentMessageID: text(&rng), channelCID: text(&rng), createdByUserID: text(&rng),
                replyCount: number(&rng), createdAt: time(&rng))
        }
        event.unreadThreads = maybe(&rng, number)
        event.threadID = maybe(&rng, text)
        event.unreadThreadMessages = maybe(&rng, number)
        event.playedAt = maybe(&rng, time)
        event.parentID = maybe(&rng, text)
        return event
    }

    /// Both as JSON values, to compare.
    static func same(_ written: some DataProtocol, _ encoded: Data) throws -> Bool {
        try JSONDecoder().decode(JSONValue.self, from: Data(written))
            == JSONDecoder().decode(JSONValue.self, from: encoded)
    }

    @Test("the same JSON as JSONEncoder for random events, fields in the order the type declares them")
    func sameJSON() async throws {
        await propertyCheck(count: 3000, input: Gen<UInt64>.value()) { seed in
            let event = Self.event(seed: seed, custom: false)
            let fast = try #require(EventJSON.bytes(event))
            #expect(try Self.same(fast, JSONCoding.data(event)), "\(String(decoding: fast, as: UTF8.self))")
        }
        // The order, and the escapes as JSONEncoder writes them.
        var event = Event(
            type: .messageRead, createdAt: Timestamp(microseconds: 1), cid: ChannelID(type: "messaging", id: "a"),
            user: User(id: "u/\"\\\u{0}\u{1f}\n"))
        event.lastReadMessageID = "m"
        #expect(
            String(decoding: try #require(EventJSON.bytes(event)), as: UTF8.self) == #"""
                {"type":"message.read","created_at":"1970-01-01T00:00:00.000001Z","cid":"messaging:a","channel_type":"messaging",\#
                "channel_id":"a","user":{"id":"u/\"\\\u0000\u001f\n","role":"user","banned":false,"online":false},\#
                "last_read_message_id":"m"}
                """#)
    }

    @Test("the same JSON with custom fields on the user")
    func sameJSONWithCustomFields() async throws {
        await propertyCheck(count: 1000, input: Gen<UInt64>.value()) { seed in
            var event = Self.event(seed: seed, custom: true)
            if event.user == nil { event.user = User(id: "u", custom: ["k": .string("v")]) }
            let fast = try #require(EventJSON.bytes(event))
            #expect(try Self.same(fast, JSONCoding.data(event)))
        }
    }

    @Test("what the writer leaves to the encoder goes to it; the answer to mark read keeps its shape")
    func fallsBackToTheEncoder() throws {
        var event = Event(
            type: .messageRead, createdAt: Timestamp(microseconds: 1), cid: ChannelID(type: "messaging", id: "a"),
            user: User(id: "u", custom: ["score": .double(0.5)]))
        #expect(EventJSON.bytes(event) == nil)
        #expect(try Self.same(EventJSON.data(event), JSONCoding.data(event)))
        event.user = User(id: "u")
        event.member = Member(user: User(id: "u"), createdAt: Timestamp(microseconds: 1))
        #expect(EventJSON.bytes(event) == nil)
        #expect(try Self.same(EventJSON.data(event), JSONCoding.data(event)))

        struct Answer: Encodable { var event: Event? }
        for event in [Self.event(seed: 7, custom: false), event, nil] {
            #expect(
                try Self.same(
                    EventAnswer.data(event, duration: "1.23ms"),
                    JSONCoding.data(Timed(body: Answer(event: event), duration: "1.23ms"))))
        }
    }
}
