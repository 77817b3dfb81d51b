import Foundation
import NIOCore
import Testing
import TicksTestSupport

@testable import TicksServer

/// The bus's notification payload, written by hand, read by `JSONDecoder`,
/// across a rolling upgrade: entries with a trace context (`traceparent`,
/// `tracestate`) and without, with each recipient's counts and with the
/// endings of the release before, must be read by nodes of either release.
@Suite("Event bus payload")
struct EventBusPayloadTests {
    typealias Entry = PostgresEventBus.Entry
    typealias Batch = PostgresEventBus.Batch

    static let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    /// What a node of the release before traces wrote, byte for byte.
    static let previousRelease = #"{"node":"n1","entries":[{"frame":"{\"type\":\"message.read\"}","users":["alice"]}]}"#

    /// The entry as the release before traces declared it.
    struct PreviousEntry: Decodable {
        var frame: String
        var users: [String]
        var endings: [String]?
    }

    struct PreviousBatch: Decodable {
        var node: String
        var entries: [PreviousEntry]?
    }

    @Test func anEntryOfThePreviousReleaseIsReadWithoutATraceContext() throws {
        let batch = try JSONCoding.decode(Batch.self, from: Self.previousRelease)
        let entry = try #require(batch.entries?.first)
        #expect(entry.users == ["alice"] && entry.traceparent == nil && entry.tracestate == nil)
    }

    static func queued(_ event: EncodedEvent, to users: [String], trace: TraceContext? = nil) throws
        -> PostgresEventBus.Queued
    {
        try #require(PostgresEventBus.entry(event, to: users, trace: trace))
    }

    @Test func anEntryWithATraceContextIsReadByThePreviousRelease() throws {
        let event = EncodedEvent(Data(#"{"type":"message.read"}"#.utf8))
        let trace = TraceContext(traceparent: Self.traceparent, tracestate: "vendor=opaque")
        let payload = PostgresEventBus.batch(
            PostgresEventBus.opening(of: "n2"), entries: [try Self.queued(event, to: ["alice"], trace: trace)])
        let old = try JSONCoding.decode(PreviousBatch.self, from: payload)
        #expect(old.entries?.first?.users == ["alice"])
        #expect(old.entries?.first?.frame == #"{"type":"message.read"}"#)
        let new = try JSONCoding.decode(Batch.self, from: payload)
        #expect(new.entries?.first?.traceparent == Self.traceparent)
        #expect(new.entries?.first?.tracestate == "vendor=opaque")
    }

    @Test func anUntracedEntryCarriesNoTraceFields() throws {
        let queued = try Self.queued(EncodedEvent(Data("{}".utf8)), to: ["a"])
        #expect(!String(decoding: queued.json, as: UTF8.self).contains("trace"))
    }

    /// Text a JSON writer must escape: quotes, backslashes, every control
    /// character, and text beyond ASCII.
    static let awkward = #"a"b\c/d"# + "\n\r\t\u{8}\u{c}\u{0}\u{1f}\u{7f} nœud 🚀"

    /// Every kind of entry, written by hand, reads back as it was published:
    /// by this release (`Entry`), and, its frame a whole JSON object, by the release before.
    @Test(arguments: [false, true], [ConnectionAudience.everyConnection, .watchers("messaging:x"), .notWatching(EventBusPayloadTests.awkward)])
    func anEntryReadsBackAsPublished(traced: Bool, audience: ConnectionAudience) throws {
        let object = try JSONSerialization.data(
            withJSONObject: ["type": "message.new", "text": Self.awkward], options: [.sortedKeys])
        let users = ["alice", Self.awkward, "carol"]
        let counts = [
            "alice": UnreadEnding(channel: 1, messages: 2, channels: 3),
            Self.awkward: UnreadEnding(channel: 0, messages: Int(Int32.max), channels: 1),
            // carol has no counts: the event is not for her.
        ]
        let trace = traced ? TraceContext(traceparent: Self.traceparent, tracestate: Self.awkward) : nil
        let event = try EncodedEvent(object: object, counts: counts, audience: audience)
        let queued = try Self.queued(event, to: users, trace: trace)
        #expect(queued.users == ["alice", Self.awkward])
        let payload = PostgresEventBus.batch(PostgresEventBus.opening(of: Self.awkward), entries: [queued, queued])
        let batch = try JSONCoding.decode(Batch.self, from: payload)
        #expect(batch.node == Self.awkward)
        let entry = try #require(batch.entries?.last)
        #expect(entry.users == ["alice", Self.awkward])
        #expect(entry.counts == [1, 2, 3, 0, Int(Int32.max), 1])
        #expect(entry.endings == nil)
        #expect(entry.traceparent == trace?.traceparent && entry.tracestate == trace?.tracestate)
        let received = PostgresEventBus.event(of: entry)
        #expect(received.audience == audience)
        for (user, ending) in counts {
            let frame = try #require(received.frame(for: user))
            let json = try JSON(parsing: String(buffer: frame.buffer))
            #expect(json["text"].string == Self.awkward)
            #expect(json["unread_count"].int == ending.channel)
            #expect(json["total_unread_count"].int == ending.messages)
            #expect(json["unread_channels"].int == ending.channels)
        }
        #expect(received.frame(for: "carol") == nil)
        // The release before sends the frame as it is: a whole object, without the counts.
        let old = try #require(try JSONCoding.decode(PreviousBatch.self, from: payload).entries?.last)
        let whole = try JSON(parsing: old.frame)
        #expect(whole["text"].string == Self.awkward && whole["unread_count"].int == nil)
    }

    @Test func anEventForEveryoneAndAWatchReadBack() throws {
        let frame = try JSONSerialization.data(withJSONObject: ["type": "message.read", "by": Self.awkward])
        let entry = try JSONCoding.decode(
            Entry.self, from: String(decoding: try Self.queued(EncodedEvent(frame), to: [Self.awkward]).json, as: UTF8.self))
        #expect(entry.frame == String(decoding: frame, as: UTF8.self) && entry.users == [Self.awkward])
        #expect(entry.counts == nil && entry.endings == nil && entry.watchers == nil && entry.unwatched == nil)
        #expect(PostgresEventBus.event(of: entry).frame(for: "anyone").map { String(buffer: $0.buffer) } == entry.frame)
        for watching in [false, true] {
            let change = WatchChange(connection: Self.awkward, user: "bob", cid: "messaging:" + Self.awkward, watching: watching)
            let queued = PostgresEventBus.entry(change)
            #expect(queued.users == ["bob"])
            let read = try JSONCoding.decode(Entry.self, from: String(decoding: queued.json, as: UTF8.self))
            #expect(read.watch == change && read.frame.isEmpty && read.users.isEmpty)
        }
        #expect(PostgresEventBus.entry(EncodedEvent(frame), to: [], trace: nil) == nil)
        let nobody = try EncodedEvent(object: Data("{}".utf8), counts: ["alice": UnreadEnding(channel: 1, messages: 1, channels: 1)])
        #expect(PostgresEventBus.entry(nobody, to: ["bob"], trace: nil) == nil)
    }

    /// A new message goes on the bus for every member with no counts (`countsToRead`): the frame a
    /// whole object (the release before sends it as it is), the channel's pk beside it; the receiving
    /// node adds the counts it reads for its connected members, and a member whose counts it could
    /// not read, or all of them when the read failed, get the message without counts.
    @Test(arguments: [ConnectionAudience.watchers("messaging:x"), .notWatching(EventBusPayloadTests.awkward)])
    func aMessageWhoseCountsEachNodeReads(audience: ConnectionAudience) throws {
        let object = try JSONSerialization.data(
            withJSONObject: ["type": "message.new", "text": Self.awkward], options: [.sortedKeys])
        let users = ["alice", Self.awkward, "carol"]
        let event = try EncodedEvent(object: object, countsToReadIn: Int64.max, audience: audience)
        // Nobody's frame before the counts are read: it never reaches a socket as it is.
        #expect(users.allSatisfy { event.frame(for: $0) == nil })
        let queued = try Self.queued(event, to: users)
        #expect(queued.users == users)
        let entry = try JSONCoding.decode(Entry.self, from: String(decoding: queued.json, as: UTF8.self))
        #expect(entry.countsOf == Int64.max && entry.counts == nil && entry.endings == nil && entry.users == users)
        #expect(try JSON(parsing: entry.frame)["text"].string == Self.awkward)
        let received = PostgresEventBus.event(of: entry)
        #expect(received.audience == audience)
        let counts = ["alice": UnreadEnding(channel: 1, messages: 2, channels: 3)]
        for (read, expected) in [(counts, [("alice", 1 as Int?), (Self.awkward, nil)]), (nil, [("alice", nil), (Self.awkward, nil)])] {
            let counted = received.counted(read, for: ["alice", Self.awkward])
            for (user, unread) in expected {
                let json = try JSON(parsing: String(buffer: try #require(counted.frame(for: user)).buffer))
                #expect(json["text"].string == Self.awkward && json["unread_count"].int == unread, "\(user)")
            }
        }
        // The release before reads the frame as a whole object, and sends it without counts.
        let old = try JSONCoding.decode(PreviousEntry.self, from: String(decoding: queued.json, as: UTF8.self))
        #expect(try JSON(parsing: old.frame)["unread_count"].int == nil)
    }

    /// A new message for every member of a large channel, unlisted (`SendOutcome.everyMember`):
    /// no users, the channel's pk and member count; lost, it resyncs everyone. Only a message whose
    /// counts are read in that very channel goes so.
    @Test func aMessageToEveryMember() throws {
        let event = try EncodedEvent(
            object: Data(#"{"type":"message.new","text":"hi"}"#.utf8), countsToReadIn: 42, audience: .watchers("messaging:x"))
        let queued = try #require(PostgresEventBus.entry(event, to: [], everyMember: 1_000, trace: nil))
        #expect(queued.users.isEmpty && queued.everyone)
        #expect(String(decoding: queued.json, as: UTF8.self).count < 200, "the entry grows with the members")
        let entry = try JSONCoding.decode(Entry.self, from: String(decoding: queued.json, as: UTF8.self))
        #expect(entry.users.isEmpty && entry.countsOf == 42 && entry.everyMember == 1_000 && entry.watchers == "messaging:x")
        // Ordinary entries name no such thing, and a lost one resyncs its users alone.
        let listed = try Self.queued(event, to: ["alice"])
        #expect(!listed.everyone)
        #expect(try JSONCoding.decode(Entry.self, from: String(decoding: listed.json, as: UTF8.self)).everyMember == nil)
    }

    /// A node of the release before writes each recipient's ending beside a
    /// frame without its closing brace; this release still reads it.
    @Test func endingsOfThePreviousReleaseAreDelivered() throws {
        let payload = #"{"node":"n1","entries":[{"frame":"{\"type\":\"message.new\"","users":["bob","carol"],"#
            + #""endings":[",\"unread_count\":1}",",\"unread_count\":2}"],"watchers":"messaging:x"}]}"#
        let entry = try #require(try JSONCoding.decode(Batch.self, from: payload).entries?.first)
        let event = PostgresEventBus.event(of: entry)
        #expect(event.audience == .watchers("messaging:x"))
        for (user, count) in [("bob", 1), ("carol", 2)] {
            let json = try JSON(parsing: String(buffer: try #require(event.frame(for: user)).buffer))
            #expect(json["type"].string == "message.new" && json["unread_count"].int == count)
        }
        #expect(event.frame(for: "dave") == nil)
    }

    /// Counts that do not match the users (or a frame that is not an
    /// object) leave the frame as it came: never a cut one.
    @Test(arguments: [[1, 2], [1, 2, 3, 4], []])
    func countsThatDoNotMatchLeaveTheFrameWhole(counts: [Int]) throws {
        let entry = Entry(frame: #"{"type":"message.new"}"#, users: ["bob"], counts: counts)
        let frame = try #require(PostgresEventBus.event(of: entry).frame(for: "bob"))
        #expect(String(buffer: frame.buffer) == entry.frame)
        let notAnObject = Entry(frame: "[1]", users: ["bob"], counts: [1, 2, 3])
        #expect(String(buffer: try #require(PostgresEventBus.event(of: notAnObject).frame(for: "bob")).buffer) == "[1]")
    }

    /// A node drops its own notifications without decoding them, whatever
    /// order the encoder gave the keys; another node's, however alike its
    /// name, and whatever its frames and users contain, are decoded.
    @Test(arguments: ["n1", "0b8e2c9a-5d6f-4e1a-9c3b-2f7d8e6a1b4c", #"a"b\c"#, "nœud/1", "", EventBusPayloadTests.awkward])
    func aNodeTellsItsOwnNotificationsWithoutDecodingThem(node: String) throws {
        let field = PostgresEventBus.ownField(of: node)
        // Frames and users that spell another node's field, escaped as frames are.
        let decoy = PostgresEventBus.ownField(of: node + "x")
        let entry = Entry(frame: "{\(field),\(decoy)}", users: ["node", node, field])
        let queued = try Self.queued(EncodedEvent(Data(entry.frame.utf8)), to: entry.users)
        // As this release writes its batches.
        let opening = PostgresEventBus.opening(of: node)
        for payload in [
            PostgresEventBus.batch(opening, entries: [queued]),
            PostgresEventBus.batch(opening) { $0.raw(#","stored":7"#) },
            PostgresEventBus.batch(opening) { $0.raw(#","resync":"#); $0.strings([node, field]) },
            PostgresEventBus.batch(opening) { $0.raw(#","resync_everyone":true"#) },
        ] {
            #expect(PostgresEventBus.isOwn(payload, field: field))
            #expect(try JSONCoding.decode(Batch.self, from: payload).node == node)
        }
        for other in [node + "x", node + "\"", "x" + node, String(node.dropLast()), "n2"] where other != node {
            let theirs = PostgresEventBus.batch(PostgresEventBus.opening(of: other), entries: [queued])
            #expect(!PostgresEventBus.isOwn(theirs, field: field), "\(theirs)")
        }
        // As the release before wrote them, with `JSONEncoder`.
        for _ in 0..<20 {  // the encoder's key order varies from run to run
            for batch in [
                Batch(node: node, entries: [entry]), Batch(node: node, stored: 7), Batch(node: node, resync: [node]),
                Batch(node: node, resyncEveryone: true),
            ] {
                let payload = try JSONCoding.string(batch)
                #expect(PostgresEventBus.isOwn(payload, field: field))
                #expect(try JSONCoding.decode(Batch.self, from: payload).node == node)
            }
            for other in [node + "x", node + "\"", "x" + node, String(node.dropLast()), "n2"] where other != node {
                let theirs = try JSONCoding.string(Batch(node: other, entries: [entry], resync: [node]))
                #expect(!PostgresEventBus.isOwn(theirs, field: field), "\(theirs)")
            }
        }
        let sortedData = try JSONSerialization.data(
            withJSONObject: ["entries": [], "node": node], options: [.sortedKeys, .withoutEscapingSlashes])
        let sorted = try #require(String(data: sortedData, encoding: .utf8))
        #expect(PostgresEventBus.isOwn(sorted, field: field))
        #expect(!PostgresEventBus.isOwn(Self.previousRelease, field: PostgresEventBus.ownField(of: "n")))
        #expect(PostgresEventBus.isOwn(Self.previousRelease, field: PostgresEventBus.ownField(of: "n1")))
    }

    /// A round of entries of these sizes, split as `send` splits it.
    static func split(_ sizes: [Int], overhead: Int = 60) -> [[Int]] {
        let entries = sizes.map { PostgresEventBus.Queued(json: Array(repeating: UInt8(ascii: "x"), count: $0), users: []) }
        return PostgresEventBus.batches(of: entries, overhead: overhead).map { $0.map(\.json.count) }
    }

    /// A notification holds 7,900 bytes: small entries share one while they
    /// fit; a run that does not fit is stored as one row, in order, up to 1 MiB.
    @Test func aRoundIsSplitIntoNotificationsAndStoredRuns() {
        let limit = PostgresEventBus.payloadLimit
        #expect(Self.split([]) == [])
        #expect(Self.split([100, 200]) == [[100, 200]])
        // Exactly full (60 + entries + a comma), then one byte over.
        #expect(Self.split([limit - 65, 4]) == [[limit - 65, 4]])
        #expect(Self.split([limit - 65, 5]) == [[limit - 65], [5]])
        #expect(Self.split([3_000, 3_000, 3_000]) == [[3_000, 3_000], [3_000]])
        // A send to a large channel between small events: one stored run, the small ones after it riding along.
        #expect(Self.split([100, 40_000, 40_000, 100, 100]) == [[100], [40_000, 40_000, 100, 100]])
        // A stored run ends at storedBatchBytes; an entry larger alone is a batch alone.
        let big = PostgresEventBus.storedBatchBytes / 2
        #expect(Self.split([big, big, big]) == [[big], [big], [big]])
        #expect(Self.split([big - 100, big - 100, 200]) == [[big - 100, big - 100], [200]])
        #expect(Self.split([3 * big, 100]) == [[3 * big], [100]])
        // Whatever the sizes, every entry once, in order, and no batch of several past its bound.
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let sizes = (0..<Int.random(in: 0...40, using: &generator)).map { _ in
                Bool.random(using: &generator) ? Int.random(in: 1...9_000, using: &generator) : Int.random(in: 1...600_000, using: &generator)
            }
            let batches = Self.split(sizes)
            #expect(batches.flatMap { $0 } == sizes)
            for batch in batches where batch.count > 1 {
                let size = 60 + batch.reduce(0, +) + batch.count - 1
                let bound = 60 + batch[0] > limit ? PostgresEventBus.storedBatchBytes : limit
                #expect(size <= bound, "\(batch)")
            }
        }
    }
}
