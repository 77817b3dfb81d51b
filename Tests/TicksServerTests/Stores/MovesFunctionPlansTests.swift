import Testing
import TicksProtocol
import TicksReceipts

@testable import TicksServer

/// How PostgreSQL's moves and send functions (`MovesFunction`,
/// `SendFunction`) find their rows: by their keys, whatever the size of the
/// tables when a connection planned their statements (once, generically, at
/// its first call).
@Suite("The receipt and send functions' plans")
struct MovesFunctionPlansTests {
    /// Sequential scans by table in the current transaction (`pg_stat_xact_user_tables`).
    static func sequentialScans() -> StoreProgram<[String: Int64]> {
        Step.rows("SELECT relname, seq_scan FROM pg_stat_xact_user_tables WHERE schemaname = current_schema()").map {
            rows in
            Dictionary(uniqueKeysWithValues: try rows.map { (try $0.text(0), try $0.int(1)) })
        }
    }

    @Test(
        "PostgreSQL: a batch of marks read and delivered (a channel of two and a group, reciprocal receipts on), then a send, scan no table whole though their plans were made on a schema of a few rows",
        .enabled(if: PostgresTestDatabase.url != nil))
    func noSequentialScans() async throws {
        try await PostgresTestDatabase.withStore { store, _ in
            let now = Timestamp.now()
            _ = try await store.upsertUsers(["a", "b", "c"].map { User(id: $0) }, now: now)
            _ = try await store.updateAppOptions(.init(reciprocalReadReceipts: true))
            let (two, _) = try await store.createChannel(
                ChannelID(type: "messaging", id: "two"), createdBy: nil, memberIDs: ["a", "b"], custom: [:], now: now)
            let (group, _) = try await store.createChannel(
                ChannelID(type: "messaging", id: "group"), createdBy: nil, memberIDs: ["a", "b", "c"], custom: [:],
                now: now)
            for channel in [two, group] {
                for n in 1...3 {
                    // Each send's read by its author is a call of the function: the connection plans it here.
                    _ = try await store.sendMessage(
                        NewMessage(id: "\(channel.cid.id)\(n)", userID: "a", text: "t", custom: [:]), to: channel,
                        now: now)
                }
            }
            let audience = ReceiptAudience(fullChannelLimit: 100)
            let moves = [
                BatchedMove(kind: .delivered, userID: "b", channel: two.cid, messageID: "two2", at: now, audience: audience),
                BatchedMove(kind: .read, userID: "b", channel: group.cid, messageID: "group3", at: now, audience: audience),
                BatchedMove(kind: .read, userID: "c", channel: group.cid, messageID: nil, at: now, audience: audience),
            ]
            let schema = store.schema
            let (scans, rows) = try await store.engine.write {
                Self.sequentialScans().then { before in
                    Step.rows(StoreSQL.moves(moves, schema: schema)).then { rows in
                        Self.sequentialScans().map { after in
                            (after.filter { $0.value != before[$0.key, default: 0] }, rows.count)
                        }
                    }
                }
            }
            #expect(rows > moves.count, "the moves' rows, then what they reached and who hides their reads")
            #expect(scans.isEmpty, "tables scanned whole by the moves function: \(scans)")

            // A send in one call (`SendFunction`), which its caller makes under the channel's lock
            // (no other writer here).
            let current = try #require(try await store.channel(group.cid))
            let (sendScans, sent) = try await store.engine.write {
                Self.sequentialScans().then { before in
                    SQLStore.sendInOneCall(
                        NewMessage(id: "group4", userID: "b", text: "t", custom: [:]), custom: "{}", to: current,
                        now: now
                    ).then { outcome in
                        Self.sequentialScans().map { after in
                            (after.filter { $0.value != before[$0.key, default: 0] }, outcome != nil)
                        }
                    }
                }
            }
            #expect(sent, "the function sent it (nil: the program would have)")
            #expect(sendScans.isEmpty, "tables scanned whole by the send function: \(sendScans)")
        }
    }
}
