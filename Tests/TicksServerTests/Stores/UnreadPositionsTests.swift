import Foundation
import Testing
import TicksProtocol
import TicksReceipts

@testable import TicksServer

/// Unread counts by positions (`v15-unread-positions`, docs/storage.md
/// "Counts as of a position, totals summed"): a send moves its channel's `counted` and
/// writes no other member's row; a member's count is their kept count plus
/// what counted since it was kept. An upgraded PostgreSQL database keeps
/// counts as the release before did until `PATCH /app` turns positions on,
/// and back to kept every count is folded into the kept one, as that release
/// reads it. Every step is checked against the count made afresh
/// (`InterleavingTests.expectNothingToRecount`).
@Suite("Unread counts by positions")
struct UnreadPositionsTests {
    static let everyone = ReceiptAudience(fullChannelLimit: 100)

    /// Each member's kept count and the channel's `counted` it was kept at, by user id; and the channel's `counted`.
    static func rows(_ store: SQLStore, _ channel: ChannelRecord) async throws
        -> (members: [String: [Int64]], counted: Int64)
    {
        try await store.engine.read {
            Step.rows("SELECT user_id, unread, counted_at FROM member WHERE channel_pk = \(channel.pk)").then { rows in
                Step.row("SELECT counted FROM channel WHERE pk = \(channel.pk)").map { counted in
                    (
                        Dictionary(uniqueKeysWithValues: try rows.map { (try $0.text(0), [try $0.int(1), try $0.int(2)]) }),
                        try counted?.int(0) ?? -1
                    )
                }
            }
        }
    }

    /// a, b and c in channel `id`, made at `now`.
    static func channel(_ store: SQLStore, _ id: String, now: Timestamp) async throws -> ChannelRecord {
        _ = try await store.upsertUsers([User(id: "a"), User(id: "b"), User(id: "c")], now: now)
        return try await store.createChannel(
            ChannelID(type: "messaging", id: id), createdBy: "a", memberIDs: ["a", "b", "c"], custom: [:], now: now
        ).0
    }

    static func send(_ store: SQLStore, _ id: String, by author: String, to channel: ChannelRecord, parentID: String? = nil)
        async throws
    {
        var message = NewMessage(id: id, userID: author, text: id, custom: [:])
        message.parentID = parentID
        _ = try await store.sendMessage(message, to: channel, now: .now())
    }

    static func unread(_ store: SQLStore, _ userIDs: [String]) async throws -> [Int] {
        var counts: [Int] = []
        for userID in userIDs { counts.append(try await store.unreadTotals(of: userID).messages) }
        return counts
    }

    /// Channel `id` of a, b and c with a's `m1`; then a sends `m2`, held before the statement `at`
    /// matches while `other` runs (`InterleavingTests.interleave`, which tells what it waits on).
    static func sendHeld(
        _ kind: StoreKind, _ store: SQLStore, in id: String, at pause: @escaping @Sendable (String) -> Bool,
        against other: @escaping @Sendable (ChannelRecord) async throws -> Void, waitingOn: [String]
    ) async throws -> ChannelRecord {
        let channel = try await channel(store, id, now: .now())
        try await send(store, "m1", by: "a", to: channel)
        try await InterleavingTests.interleave(
            kind, store, at: InterleavingTests.Pause(before: pause),
            { try await send(store, "m2", by: "a", to: channel) }, against: { try await other(channel) },
            waitingOn: waitingOn)
        return channel
    }

    @Test("a send moves the channel's count and writes no other member's row; a reply in its thread alone, neither",
          arguments: StoreKind.all)
    func sendWritesNoMember(kind: StoreKind) async throws {
        try await kind.withStore { (store: SQLStore) async throws in
            #expect(try await store.appOptions().unreadCounting == .positions, "a new database counts by positions")
            let channel = try await Self.channel(store, "p1", now: .now())
            try await Self.send(store, "m1", by: "a", to: channel)
            try await Self.send(store, "m2", by: "a", to: channel)
            let after = try await Self.rows(store, channel)
            #expect(after.counted == 2)
            #expect(after.members["b"] == [0, 0] && after.members["c"] == [0, 0], "b's and c's rows as they were")
            #expect(after.members["a"] == [0, 2], "the author read their own: their count kept as of 2")
            #expect(try await Self.unread(store, ["a", "b", "c"]) == [0, 2, 2])

            var reply = NewMessage(id: "r1", userID: "b", text: "r", custom: [:])
            reply.parentID = "m1"
            _ = try await store.sendMessage(reply, to: channel, now: .now())
            #expect(try await Self.rows(store, channel).counted == 2, "a reply shown only in its thread counts there")
            #expect(try await Self.unread(store, ["a", "b", "c"]) == [0, 2, 2])
            _ = try await store.markRead("b", in: channel.cid, upTo: "m1", audience: Self.everyone, now: .now())
            #expect(try await Self.rows(store, channel).members["b"] == [1, 2], "kept afresh at the channel's count")
            #expect(try await Self.unread(store, ["a", "b", "c"]) == [0, 1, 2])
            try await InterleavingTests.expectNothingToRecount(store)
        }
    }

    @Test("counts stay right through a change of how sends count, each way; back to kept they are the kept counts",
          arguments: StoreKind.all)
    func changeEachWay(kind: StoreKind) async throws {
        try await kind.withStore { (store: SQLStore) async throws in
            let channel = try await Self.channel(store, "p2", now: .now())
            for id in ["m1", "m2"] { try await Self.send(store, id, by: "a", to: channel) }
            _ = try await store.markRead("b", in: channel.cid, upTo: "m1", audience: Self.everyone, now: .now())
            #expect(try await Self.unread(store, ["b", "c"]) == [1, 2])

            let kept = try await store.updateAppOptions(.init(unreadCounting: .kept))
            #expect(kept.unreadCounting == .kept)
            var rows = try await Self.rows(store, channel)
            #expect(rows.counted == 0, "every position back to 0")
            #expect(rows.members["b"] == [1, 0] && rows.members["c"] == [2, 0], "folded: the kept count is the count")
            try await Self.send(store, "m3", by: "a", to: channel)
            rows = try await Self.rows(store, channel)
            #expect(rows.counted == 0 && rows.members["b"] == [2, 0] && rows.members["c"] == [3, 0], "kept, as before")
            #expect(try await Self.unread(store, ["a", "b", "c"]) == [0, 2, 3])
            try await InterleavingTests.expectNothingToRecount(store)

            _ = try await store.updateAppOptions(.init(unreadCounting: .positions))
            try await Self.send(store, "m4", by: "b", to: channel)
            rows = try await Self.rows(store, channel)
            #expect(rows.counted == 1 && rows.members["c"] == [3, 0], "c's row untouched by b's send")
            #expect(try await Self.unread(store, ["a", "b", "c"]) == [1, 0, 4])
            _ = try await store.markRead("c", in: channel.cid, upTo: nil, audience: Self.everyone, now: .now())
            _ = try await store.markUnread("c", in: channel, from: "m4", now: .now())
            #expect(try await Self.unread(store, ["c"]) == [1])
            try await InterleavingTests.expectNothingToRecount(store)
            // And back again: folded, every kept count is the count, as of position 0.
            _ = try await store.updateAppOptions(.init(unreadCounting: .kept))
            rows = try await Self.rows(store, channel)
            #expect(rows.counted == 0 && rows.members.values.allSatisfy { $0[1] == 0 }, "\(rows)")
            #expect(rows.members["a"]?[0] == 1 && rows.members["b"]?[0] == 0 && rows.members["c"]?[0] == 1)
        }
    }

    @Test("PATCH /app unread_counting: a server token's change shows in GET /app; a bad value is 400",
          arguments: StoreKind.all)
    func endpoint(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            #expect(try await server.ok(.get, "/app")["app"]["unread_counting"].string == "positions")
            for body in [#"{"unread_counting": "sums"}"#, #"{"unread_counting": 1}"#, #"{"unread_counting": null}"#] {
                try await server.call(.patch, "/app", body: body).expectError(400, code: 4)
            }
            try await server.ok(.patch, "/app", #"{"unread_counting": "kept"}"#)
            #expect(try await server.ok(.get, "/app")["app"]["unread_counting"].string == "kept")
        }
    }

    @Test("an upgraded PostgreSQL database keeps counts while the release before may share it; held, it cannot turn positions on",
          .enabled(if: PostgresTestDatabase.url != nil))
    func upgraded() async throws {
        try await PostgresTestDatabase.withStore(migrationsUpTo: "v14-actors") { held, _ in
            // The release before, on its own schema: had it named `counted` or `counted_at`, these fail.
            let channel = try await Self.channel(held, "p3", now: .now())
            try await Self.send(held, "m1", by: "a", to: channel)
            try await Self.send(held, "m2", by: "a", to: channel)
            _ = try await held.markRead("b", in: channel.cid, upTo: "m1", audience: Self.everyone, now: .now())
            #expect(try await Self.unread(held, ["b", "c"]) == [1, 2])
            // This release's migrations on the database the held node serves.
            let engine = try #require(held.unbounded as? PostgresEngine)
            try await PostgresSchema.migrate(engine.transactions)
            var transactions = engine.transactions
            transactions.schema = .newest
            let newer = SQLStore(engine: PostgresEngine(transactions: transactions), deadline: StoreKind.deadline)
            try await newer.prepare()
            #expect(try await newer.appOptions().unreadCounting == .kept, "not a new database: counts kept")
            try await Self.send(newer, "m3", by: "a", to: channel)
            #expect(try await Self.rows(newer, channel).members["b"] == [2, 0], "the held node reads member.unread")
            #expect(try await Self.unread(held, ["b", "c"]) == [2, 3])
            let error = await #expect(throws: StoreError.self) {
                try await held.updateAppOptions(.init(unreadCounting: .positions))
            }
            #expect(error.map { APIError($0).status } == .conflict)

            // No node of the release before is left: positions on, then back to kept for a rollback.
            _ = try await newer.updateAppOptions(.init(unreadCounting: .positions))
            try await Self.send(newer, "m4", by: "a", to: channel)
            #expect(try await Self.rows(newer, channel).members["c"] == [3, 0])
            #expect(try await Self.unread(newer, ["a", "b", "c"]) == [0, 3, 4])
            _ = try await newer.updateAppOptions(.init(unreadCounting: .kept))
            // The release before again: it adds a member at counted_at 0, and sends.
            _ = try await held.upsertUsers([User(id: "d")], now: .now())
            _ = try await held.addMembers(["d"], to: channel, maxMembers: 100, now: .now())
            try await Self.send(held, "m5", by: "a", to: channel)
            #expect(try await Self.unread(held, ["b", "c", "d"]) == [4, 5, 1])
            #expect(try await Self.unread(newer, ["b", "c", "d"]) == [4, 5, 1], "both releases serve the same counts")
            try await InterleavingTests.expectNothingToRecount(newer)
        }
    }

    @Test("a mark read while a send is in flight: the send, committed after the read's snapshot, still counts",
          arguments: StoreKind.all)
    func readAgainstSend(kind: StoreKind) async throws {
        try await kind.withStore { (store: SQLStore) async throws in
            // The send has moved `counted` and made its author's read, uncommitted (held before its
            // COMMIT). It holds no lock on b's or c's row (counting kept, it held every member's: the
            // NOWAIT would fail); b reads meanwhile (and waits only for R13's lock of the channel, which
            // the send holds too).
            _ = try await Self.sendHeld(
                kind, store, in: "p4", at: { $0 == "COMMIT" },
                against: { channel in
                    if kind == .postgres {
                        try await store.engine.write {
                            Step.execute(
                                """
                                SELECT 1 FROM member WHERE channel_pk = \(channel.pk) AND user_id IN ('b', 'c')
                                FOR UPDATE NOWAIT
                                """)
                        }
                    }
                    _ = try await store.markRead("b", in: channel.cid, upTo: nil, audience: Self.everyone, now: .now())
                },
                waitingOn: ["SELECT * FROM ticks_moves"])
            // PostgreSQL: b read m1 only (m2 was not committed); SQLite: the send, then the read.
            #expect(try await Self.unread(store, ["b", "c"]) == [kind == .postgres ? 1 : 0, 2])
            try await InterleavingTests.expectNothingToRecount(store)
        }
    }

    @Test("a change of how sends count waits for the sends in flight: the fold holds every one",
          arguments: StoreKind.all)
    func changeAgainstSend(kind: StoreKind) async throws {
        try await kind.withStore { (store: SQLStore) async throws in
            let channel = try await Self.sendHeld(
                kind, store, in: "p5", at: { $0 == "COMMIT" },
                against: { _ in _ = try await store.updateAppOptions(.init(unreadCounting: .kept)) },
                waitingOn: ["LOCK TABLE channel"])
            let rows = try await Self.rows(store, channel)
            #expect(rows.counted == 0 && rows.members.values.allSatisfy { $0[1] == 0 }, "every count folded: \(rows)")
            #expect(rows.members["b"]?[0] == 2 && rows.members["c"]?[0] == 2)
            try await InterleavingTests.expectNothingToRecount(store)
        }
    }
}
