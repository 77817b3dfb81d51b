import Foundation
import Logging
import Synchronization
import Testing
import TicksProtocol
import TicksReceipts
import TicksTestSupport

@testable import TicksServer

/// Retention of the receipt log (`ReceiptLogPruner`, docs/storage.md) on
/// every store: old moves go a batch at a time, newer ones stay, receipts go
/// on while a round runs.
@Suite("Receipt log retention")
struct ReceiptLogPruningTests {
    static let everyone = ReceiptAudience(fullChannelLimit: 100)
    static let day: Duration = .seconds(86_400)
    static let members = ["a", "b", "c", "d"]

    /// Channel `id` made at `start` with members a, b, c and d, and messages m1, m2 by a.
    static func channel(_ store: any TicksStore, _ id: String, at start: Timestamp) async throws -> ChannelRecord {
        _ = try await store.upsertUsers(members.map { User(id: $0) }, now: start)
        let (channel, _) = try await store.createChannel(
            ChannelID(type: "messaging", id: id), createdBy: "a", memberIDs: members, custom: [:], now: start)
        for index in 1...2 {
            _ = try await store.sendMessage(
                NewMessage(id: "\(id)-m\(index)", userID: "a", text: "t", custom: [:]), to: channel,
                now: Timestamp(microseconds: start.microseconds + Int64(index)))
        }
        return try #require(try await store.channel(ChannelID(type: "messaging", id: id)))
    }

    /// One receipt of `user` at `time` that always moves a cursor: reads m2, or
    /// (`unread`) marks it unread again. Returns the moves it logged.
    @discardableResult
    static func receipt(
        _ store: any TicksStore, _ user: String, in channel: ChannelRecord, unread: Bool, at time: Timestamp
    ) async throws -> [Move] {
        let outcome =
            unread
            ? try await store.markUnread(user, in: channel, from: "\(channel.id)-m2", now: time)
            : try await store.markRead(
                user, in: channel.cid, upTo: "\(channel.id)-m2", audience: everyone, now: time)
        return outcome.update.moves.map { Move(user: user, kind: $0.kind, seq: $0.to, at: time.microseconds) }
    }

    /// `count` receipts of b, one a second from `start`: reads and unreads in turn.
    static func churn(_ store: any TicksStore, _ channel: ChannelRecord, count: Int, from start: Timestamp)
        async throws
    {
        for index in 0..<count {
            try await receipt(
                store, "b", in: channel, unread: index % 2 == 1,
                at: Timestamp(microseconds: start.microseconds + Int64(index) * 1_000_000))
        }
    }

    /// A logged move, whoever made it.
    struct Move: Hashable, Sendable {
        var user: String
        var kind: CursorKind
        var seq: Seq
        var at: Int64
    }

    /// The channel's whole receipt log, in log order.
    static func log(_ store: any TicksStore, _ channel: ChannelRecord) async throws -> [(id: Int64, move: Move)] {
        let reader = try #require(store as? any ReceiptLogReading)
        var moves: [(id: Int64, move: Move)] = []
        for user in members {
            for kind in CursorKind.allCases {
                for logged in try await reader.loggedMoves(channelPK: channel.pk, userID: user, kind: kind) {
                    moves.append((logged.id, Move(user: user, kind: kind, seq: logged.seq, at: logged.at)))
                }
            }
        }
        return moves.sorted { $0.id < $1.id }
    }

    static func pruner(_ store: any TicksStore, clock: ManualClock, batch: Int, pause: Duration = .zero) throws
        -> ReceiptLogPruner
    {
        var retention = ReceiptLogRetention(window: day * 90)
        retention.batchSize = batch
        retention.pause = pause
        let sqlStore = try #require(store as? SQLStore)
        return try #require(
            ReceiptLogPruner(
                store: sqlStore, retention: retention, time: clock.timeSource, metrics: ServerMetrics(),
                logger: Logger(label: "ticks-test")))
    }

    @Test(
        "a round deletes every move older than the window, at most a batch in each transaction, and keeps the newer ones",
        arguments: StoreKind.all)
    func prunesInBatches(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let clock = ManualClock()
            let now = clock.wallNow
            let channel = try await Self.channel(store, "batches", at: now - Self.day * 200)
            try await Self.churn(store, channel, count: 150, from: now - Self.day * 120)
            try await Self.churn(store, channel, count: 20, from: now - Self.day * 30)
            let before = try await Self.log(store, channel)
            let pruner = try Self.pruner(store, clock: clock, batch: 16)

            let round = try await pruner.round()
            let old = before.filter { $0.move.at < round.cutoff.microseconds }
            #expect(old.count > 150)
            #expect(round.deleted == old.count)
            #expect(round.batches.allSatisfy { (1...16).contains($0) }, "\(round.batches)")
            #expect(round.batches.count == (old.count + 15) / 16)
            let after = try await Self.log(store, channel)
            #expect(after.map(\.id) == before.filter { $0.move.at >= round.cutoff.microseconds }.map(\.id))
            #expect(after.count == 20)
            #expect(round.oldest == after.first.map { Timestamp(microseconds: $0.move.at) })
            #expect(try await store.oldestReceiptMove() == round.oldest)
            #expect(try await store.receiptLogPrunedBefore() == round.cutoff)

            // Nothing is left to delete until the newer moves leave the window too.
            #expect(try await pruner.round().batches == [])
            clock.advance(by: Self.day * 61)
            let later = try await pruner.round()
            #expect(later.deleted == 20)
            #expect(try await Self.log(store, channel).isEmpty)
            #expect(try await store.oldestReceiptMove() == nil)
        }
    }

    @Test(
        "a round starts with a small batch and doubles it while batches take under half the target",
        arguments: StoreKind.all)
    func batchesGrowWhileQuick(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let clock = ManualClock()
            let now = clock.wallNow
            let channel = try await Self.channel(store, "growing", at: now - Self.day * 200)
            try await Self.churn(store, channel, count: 200, from: now - Self.day * 120)
            // On the test's clock no batch takes any time: each is twice the one before, up to batchSize.
            let round = try await Self.pruner(store, clock: clock, batch: 1000).round()
            #expect(round.deleted > 150)
            #expect(Array(round.batches.prefix(2)) == [50, 100], "\(round.batches)")
            #expect(round.batches.enumerated().allSatisfy { $1 <= 50 << $0 }, "\(round.batches)")
            #expect(round.slowestBatch == .zero)
        }
    }

    final class Flag: Sendable {
        let value = Atomic<Bool>(false)
    }

    @Test(
        "receipts commit while a round is under way, between its batches, and none of them is pruned",
        arguments: StoreKind.all)
    func writerGoesOn(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let clock = ManualClock()
            let now = clock.wallNow
            let channel = try await Self.channel(store, "writer", at: now - Self.day * 200)
            try await Self.churn(store, channel, count: 120, from: now - Self.day * 120)
            let before = try await Self.log(store, channel)
            // A pause of a second between batches, on the test's clock: the round waits there until
            // the test advances it, after it has made its receipts.
            let pruner = try Self.pruner(store, clock: clock, batch: 10, pause: .seconds(1))
            let finished = Flag()
            let running = Task {
                defer { finished.value.store(true, ordering: .releasing) }
                return try await pruner.round()
            }
            var made: [Move] = []
            var gaps = 0
            while true {
                try await eventually { clock.sleepers > 0 || finished.value.load(ordering: .acquiring) }
                guard clock.sleepers > 0 else { break }
                // Between two batches: c and d each make a receipt, at the same time.
                gaps += 1
                let time = clock.wallNow
                let unread = gaps % 2 == 0
                async let c = Self.receipt(store, "c", in: channel, unread: unread, at: time)
                async let d = Self.receipt(store, "d", in: channel, unread: unread, at: time)
                made += try await c + d
                // Past the pause, however long the batch took (the pause is never shorter).
                clock.advance(by: .seconds(3600))
            }
            let round = try await running.value
            let old = before.filter { $0.move.at < round.cutoff.microseconds }
            #expect(round.deleted == old.count)
            #expect(round.batches.count >= 12)
            #expect(gaps == round.batches.count)
            #expect(made.count >= 2 * gaps)
            // Every move the receipts made is in the log, and nothing older than the cutoff is.
            let after = try await Self.log(store, channel)
            #expect(Set(after.map(\.move)).isSuperset(of: made))
            #expect(after.filter { $0.move.user == "c" || $0.move.user == "d" }.count == made.count)
            #expect(after.allSatisfy { $0.move.at >= round.cutoff.microseconds })
            // The last receipts stand: c and d read m2 last when the number of gaps is odd.
            let state = try #require(try await store.member("c", of: channel))
            #expect(state.cursors.read == (gaps % 2 == 1 ? 2 : 1))
        }
    }
}
