import Foundation
import Testing

@testable import TicksServer

/// The bus's notification payload across a rolling upgrade: entries with a
/// trace context (`traceparent`, `tracestate`) and entries without must be
/// read by nodes of either release, and the size the sender reckons for an
/// entry must not fall short of its JSON (a notification holds 8,000 bytes).
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

    @Test func anEntryWithATraceContextIsReadByThePreviousRelease() throws {
        var entry = Entry(frame: #"{"type":"message.read"}"#, users: ["alice"], endings: nil)
        entry.traceparent = Self.traceparent
        entry.tracestate = "vendor=opaque"
        let payload = try JSONCoding.string(Batch(node: "n2", entries: [entry]))
        let old = try JSONCoding.decode(PreviousBatch.self, from: payload)
        #expect(old.entries?.first?.users == ["alice"])
        #expect(old.entries?.first?.frame == entry.frame)
        let new = try JSONCoding.decode(Batch.self, from: payload)
        #expect(new.entries?.first?.traceparent == Self.traceparent)
        #expect(new.entries?.first?.tracestate == "vendor=opaque")
    }

    @Test func anUntracedEntryCarriesNoTraceFields() throws {
        let payload = try JSONCoding.string(Batch(node: "n1", entries: [Entry(frame: "{}", users: ["a"])]))
        #expect(!payload.contains("trace"))
    }

    /// A node drops its own notifications without decoding them, whatever
    /// order the encoder gave the keys; another node's, however alike its
    /// name, and whatever its frames and users contain, are decoded.
    @Test(arguments: ["n1", "0b8e2c9a-5d6f-4e1a-9c3b-2f7d8e6a1b4c", #"a"b\c"#, "nœud/1", ""])
    func aNodeTellsItsOwnNotificationsWithoutDecodingThem(node: String) throws {
        let field = try #require(PostgresEventBus.ownField(of: node))
        // Frames and users that spell another node's field, escaped as frames are.
        let decoy = try #require(PostgresEventBus.ownField(of: node + "x"))
        let entry = Entry(frame: "{\(field),\(decoy)}", users: ["node", node, field])
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
        #expect(!PostgresEventBus.isOwn(Self.previousRelease, field: nil))
    }

    @Test(arguments: [false, true])
    func theReckonedSizeCoversTheEncodedEntry(traced: Bool) throws {
        var entry = Entry(
            frame: #"{"type":"message.new","text":"\"quoted\" \\ back"}"#, users: ["alice", "bob"],
            endings: [#","unread_count":1}"#, #","unread_count":2}"#])
        if traced {
            entry.traceparent = Self.traceparent
            entry.tracestate = "a=1,b=\"2\""
        }
        let encoded = try JSONCoding.string(entry)
        #expect(PostgresEventBus.encodedSize(of: entry) >= encoded.utf8.count)
    }
}
