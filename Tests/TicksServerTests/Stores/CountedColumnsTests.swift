import Foundation
import Testing
import TicksProtocol
import TicksReceipts

@testable import TicksServer

/// `v16-counted-columns`: R13's counted positions kept in generated columns
/// of their own, set only on the rows of a channel that has had more than
/// two members (`member.in_group`), so that a receipt in a channel of two
/// changes no indexed column and PostgreSQL updates its row in place.
/// Whichever rows are marked, the lowest positions are the same
/// (`AllMembersStoreTests.randomHistories` flips marks at random).
@Suite("R13's counted positions in columns of their own")
struct CountedColumnsTests {
    static let everyone = ReceiptAudience(fullChannelLimit: 100)

    /// Each member's mark and counted read position (nil: NULL).
    static func marks(_ store: SQLStore, _ channel: ChannelRecord) async throws -> [String: (inGroup: Bool, counted: Int64?)] {
        let column = StoreSQL.countedColumn(.read, deliveryEvents: true)
        let rows = try await store.engine.readOne {
            Step.rows("SELECT user_id, in_group, \(raw: column) FROM member WHERE channel_pk = \(channel.pk)").map { rows in
                try rows.map { (try $0.text(0), try $0.int(1) != 0, try $0.optionalInt(2)) }
            }
        }
        return Dictionary(uniqueKeysWithValues: rows.map { ($0.0, ($0.1, $0.2)) })
    }

    @Test("the third member marks the channel's rows; they stay marked when it shrinks; a channel of two is never marked", arguments: StoreKind.all)
    func marking(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let now = Timestamp(microseconds: 1_700_000_000_000_000)
            _ = try await store.upsertUsers(["a", "b", "c"].map { User(id: $0) }, now: now)
            let (channel, _) = try await store.createChannel(
                ChannelID(type: "messaging", id: "mk"), createdBy: nil, memberIDs: ["a", "b"], custom: [:], now: now)
            _ = try await store.sendMessage(NewMessage(id: "mk1", userID: "a", text: "t", custom: [:]), to: channel, now: now)
            _ = try await store.markRead("b", in: channel.cid, upTo: "mk1", audience: Self.everyone, now: now)
            var marks = try await Self.marks(store, channel)
            #expect(marks.mapValues(\.inGroup) == ["a": false, "b": false])
            #expect(marks.values.allSatisfy { $0.counted == nil })

            _ = try await store.addMembers(["c"], to: channel, maxMembers: 100, now: now)
            marks = try await Self.marks(store, channel)
            #expect(marks.mapValues(\.inGroup) == ["a": true, "b": true, "c": true])
            #expect(marks.mapValues(\.counted) == ["a": 1, "b": 1, "c": 1], "each row's read position (R4, R5)")

            _ = try await store.removeMembers(["c"], from: channel, now: now)
            _ = try await store.sendMessage(NewMessage(id: "mk2", userID: "a", text: "t", custom: [:]), to: channel, now: now)
            marks = try await Self.marks(store, channel)
            #expect(marks.mapValues(\.inGroup) == ["a": true, "b": true])
            #expect(marks.mapValues(\.counted) == ["a": 2, "b": 1], "the column follows the cursor it is made from")
        }
    }

    /// One receipt's `member` updates: all, and those PostgreSQL made in place (HOT: the row's
    /// new version on its page, no index entry). A backend's counts (`pg_stat_xact_user_tables`)
    /// also hold its earlier transactions' until it reports them, which it does only between
    /// transactions: the difference across the receipt, in one transaction, is the receipt's.
    static func updates(_ store: SQLStore, _ reader: String, upTo id: String, in channel: ChannelRecord) async throws
        -> (all: Int64, inPlace: Int64)
    {
        let move = BatchedMove(
            kind: .read, userID: reader, channel: channel.cid, messageID: id, at: .now(), audience: everyone)
        let schema = store.schema
        @Sendable func counts() -> StoreProgram<(all: Int64, inPlace: Int64)> {
            Step.row("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables WHERE relid = 'member'::regclass")
                .map { row in (all: try row?.int(0) ?? 0, inPlace: try row?.int(1) ?? 0) }
        }
        return try await store.engine.write {
            counts().then { before in
                Step.rows(StoreSQL.moves([move], schema: schema)).then { _ in
                    counts().map { after in (after.all - before.all, after.inPlace - before.inPlace) }
                }
            }
        }
    }

    static func receiptsInPlace(_ store: SQLStore) async throws -> (two: (all: Int64, inPlace: Int64), three: (all: Int64, inPlace: Int64)) {
        let now = Timestamp.now()
        _ = try await store.upsertUsers(["a", "b", "c"].map { User(id: $0) }, now: now)
        let (two, _) = try await store.createChannel(
            ChannelID(type: "messaging", id: "two"), createdBy: nil, memberIDs: ["a", "b"], custom: [:], now: now)
        let (three, _) = try await store.createChannel(
            ChannelID(type: "messaging", id: "three"), createdBy: nil, memberIDs: ["a", "b", "c"], custom: [:], now: now)
        for channel in [two, three] {
            _ = try await store.sendMessage(
                NewMessage(id: "\(channel.cid.id)1", userID: "a", text: "t", custom: [:]), to: channel, now: now)
        }
        return (
            try await updates(store, "b", upTo: "two1", in: two), try await updates(store, "b", upTo: "three1", in: three)
        )
    }

    static let v11Indexes: Set<String> = ["member_read_by_all", "member_read_by_all_quiet", "member_delivered_to_all"]

    /// Which of v11's indexes of R13's expressions the store's PostgreSQL schema has.
    static func expressionIndexes(_ store: SQLStore) async throws -> Set<String> {
        Set(
            try await store.engine.readOne {
                Fetch.texts(
                    "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'member'")
            }
        ).intersection(v11Indexes)
    }

    @Test(
        "PostgreSQL: a receipt in a channel of two is an update in place (HOT); in a group, or held before v16, it is not",
        .enabled(if: PostgresTestDatabase.url != nil))
    func receiptsInPlace() async throws {
        try await PostgresTestDatabase.withStore { store, _ in
            #expect(try await Self.expressionIndexes(store).isEmpty, "a new database drops v11's indexes")
            let (two, three) = try await Self.receiptsInPlace(store)
            #expect(two.all >= 1)
            #expect(two.inPlace == two.all, "a receipt in a channel of two changed an indexed column of member")
            #expect(three.all >= 1)
            #expect(three.inPlace < three.all, "a group's counted position is indexed: its change is no update in place")
        }
        try await PostgresTestDatabase.withStore(migrationsUpTo: "v15-unread-positions") { held, _ in
            let (two, _) = try await Self.receiptsInPlace(held)
            #expect(two.all >= 1)
            #expect(two.inPlace == 0, "v11's indexes name the cursors: no receipt is an update in place")
            // This release's migrations on the database the held node serves: the release before
            // may still serve it, and its queries need v11's indexes.
            let engine = try #require(held.unbounded as? PostgresEngine)
            try await PostgresSchema.migrate(engine.transactions)
            #expect(try await Self.expressionIndexes(held) == Self.v11Indexes, "an upgraded database keeps v11's indexes")
        }
    }

    @Test(
        "a member added while another holds a member row: the add does not wait, the held row stays unmarked, and R13 stays right",
        arguments: StoreKind.all)
    func markingSkipsHeldRows(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let now = Timestamp.now()
            _ = try await store.upsertUsers(["a", "b", "c"].map { User(id: $0) }, now: now)
            let (channel, _) = try await store.createChannel(
                ChannelID(type: "messaging", id: "skip"), createdBy: nil, memberIDs: ["a", "b"], custom: [:], now: now)
            let hidden = UserEdit(id: "b") { user in
                var user = user
                user.privacySettings = PrivacySettings(deliveryReceipts: .init(enabled: false))
                return user
            }
            // b's update holds b's member rows (locked in key order) before it copies the privacy onto them.
            _ = try await InterleavingTests.interleave(
                kind, store, at: InterleavingTests.Pause(before: { $0.hasPrefix("UPDATE member SET reads_shared") }),
                { try await store.updateUsers([hidden], now: .now()) },
                against: { _ = try await store.addMembers(["c"], to: channel, maxMembers: 100, now: .now()) },
                waitingOn: ["UPDATE member SET in_group"])
            let marks = try await Self.marks(store, channel)
            #expect(marks["a"]?.inGroup == true)
            #expect(marks["c"]?.inGroup == true)
            // PostgreSQL skipped b's row; SQLite ran the two in turn.
            #expect(marks["b"]?.inGroup == (kind != .postgres))

            let current = try #require(try await store.channel(channel.cid))
            _ = try await store.sendMessage(NewMessage(id: "sk1", userID: "a", text: "t", custom: [:]), to: current, now: .now())
            let byC = try await store.markRead("c", in: channel.cid, upTo: "sk1", audience: Self.everyone, now: .now())
            #expect(byC.reachedAll.isEmpty, "b has not read sk1")
            let byB = try await AllMembersStoreTests.markRead("b", upTo: "sk1", in: current, on: store, audience: Self.everyone)
            #expect(byB.filter { $0.kind == .read } == [ReachedAll(kind: .read, author: "a", messageID: "sk1", seq: 1)])
            #expect(try await store.allReached(in: current, by: "a").read == "sk1")
        }
    }
}
