import Foundation
import GRDB
import Synchronization
import Testing
import TicksTestSupport

@testable import TicksServer

/// Statements per operation on SQLite, counted (docs/storage.md, "Round trips
/// per operation"; tests/python/test_round_trips.py counts PostgreSQL's): the
/// server's requests over HTTP on an in-memory store, whose one connection
/// runs every read and write, traced by SQLite (`sqlite3_trace_v2`: each
/// statement as it starts stepping, BEGIN and COMMIT too). Each operation
/// runs `rounds` times after a first run; the statements it took must be
/// exactly the table's. A change that adds one fails here until it updates
/// the table on purpose.
@Suite("Round trips per operation")
struct RoundTripTests {
    static let rounds = 5

    /// The table in docs/storage.md: operation → count in `column`.
    static func documented(_ column: String) throws -> [String: Int] {
        let docs = URL(filePath: #filePath).deletingLastPathComponent().appending(path: "../../../docs/storage.md")
        let text = try String(contentsOf: docs, encoding: .utf8)
        let section = try #require(text.components(separatedBy: "### Round trips per operation").dropFirst().first)
        let rows = section.components(separatedBy: "\n#")[0].split(separator: "\n").filter { $0.hasPrefix("|") }.map {
            $0.trimmingCharacters(in: CharacterSet(charactersIn: "| ")).components(separatedBy: "|").map {
                $0.trimmingCharacters(in: .whitespaces)
            }
        }
        let index = try #require(rows.first?.firstIndex(of: column))
        var counts: [String: Int] = [:]
        for row in rows.dropFirst(2) { counts[row[0]] = Int(row[index]) }
        return counts
    }

    @Test("SQLite: the statements each operation steps are the documented ones")
    func sqliteStatements() async throws {
        let expected = try Self.documented("SQLite statements")
        // On a clock nobody advances: the app's settings, read again when a second old
        // (`AppOptionsCache`), are read once, not once per second of a slow run.
        let clock = ManualClock()
        try await TestServer.run(.memory, time: clock.timeSource, receiptLogRetention: ReceiptLogRetention(window: nil))
        {
            server in
            let store = try #require(server.store as? SQLStore)
            let engine = try #require((store.engine as? BoundedEngine)?.base as? SQLiteEngine)
            let stepped = Mutex<[String]>([])
            try await engine.writer.writeWithoutTransaction { db in
                db.trace(options: .statement) { event in
                    let sql = "\(event)"
                    stepped.withLock { $0.append(sql) }
                }
            }
            try await server.upsert("author", "reader", "other")
            // Three members: a move reads the channel's lowest cursors for R13 (two would not).
            try await server.createChannel(
                "messaging:trips", members: ["author", "reader", "other"], createdBy: "author")
            let ids = (0...Self.rounds).map { "trip\($0)" }
            func count(_ operation: String, _ call: (String) async throws -> Void) async throws {
                let before = stepped.withLock { $0.count }
                for id in ids.dropFirst() { try await call(id) }
                let took = stepped.withLock { Array($0[before...]) }
                let counted = Dictionary(took.map { (String($0.prefix(80)), 1) }, uniquingKeysWith: +)
                    .sorted { $0.key < $1.key }.map { "\($0.value)× \($0.key)" }
                #expect(
                    Double(took.count) / Double(Self.rounds) == Double(try #require(expected[operation])),
                    "\(operation): \(Double(took.count) / Double(Self.rounds)) statements per call:\n\(counted.joined(separator: "\n"))"
                )
            }
            // A first run of each, then the counted ones: every one moves a cursor (or plays a new message).
            _ = try await server.sendVoiceNote("messaging:trips", id: ids[0], from: "author")
            try await server.markDelivered("reader", [("messaging:trips", ids[0])])
            _ = try await server.markRead("messaging:trips", "reader", upTo: ids[0])
            _ = try await server.markPlayed(ids[0], by: "reader")
            try await count("send") { _ = try await server.sendVoiceNote("messaging:trips", id: $0, from: "author") }
            try await count("mark delivered") { try await server.markDelivered("reader", [("messaging:trips", $0)]) }
            try await count("mark read") { _ = try await server.markRead("messaging:trips", "reader", upTo: $0) }
            try await count("played") { _ = try await server.markPlayed($0, by: "reader") }
        }
    }

    /// A send's transaction ends before its members are read (`SQLStore.sendMessage`): the sends
    /// queued behind it in the channel wait for its commit, not for the list of its members.
    @Test("SQLite: a send reads whom message.new is for after its commit")
    func sendReadsMembersAfterCommit() async throws {
        try await TestServer.run(.memory, receiptLogRetention: ReceiptLogRetention(window: nil)) { server in
            let store = try #require(server.store as? SQLStore)
            let engine = try #require((store.engine as? BoundedEngine)?.base as? SQLiteEngine)
            try await server.upsert("author", "reader", "other")
            try await server.createChannel(
                "messaging:after", members: ["author", "reader", "other"], createdBy: "author")
            let stepped = Mutex<[String]>([])
            try await engine.writer.writeWithoutTransaction { db in
                db.trace(options: .statement) { event in stepped.withLock { $0.append("\(event)") } }
            }
            _ = try await server.sendVoiceNote("messaging:after", id: "after1", from: "author")
            let took = stepped.withLock { $0 }
            // `StoreSQL.memberIDs`' text up to its value, however the trace writes that.
            let rendered = SQLDialect.sqlite.render(StoreSQL.memberIDs(of: 0)).text
            let value = try #require(rendered.firstIndex(of: "?"))
            let members = String(rendered[..<value])
            let insert = try #require(took.firstIndex { $0.hasPrefix("INSERT INTO message ") }, "no message stored:\n\(took)")
            let commit = try #require(took[insert...].firstIndex { $0.hasPrefix("COMMIT") }, "no commit:\n\(took)")
            let read = try #require(
                took[insert...].firstIndex { $0.hasPrefix(members) }, "the send read no member list:\n\(took)")
            #expect(read > commit, "the member list was read inside the send's transaction:\n\(took)")
        }
    }
}
