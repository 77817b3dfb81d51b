import Foundation
import Logging
import Testing
import TicksProtocol
import TicksReceipts
import TicksTestSupport

@testable import TicksServer

/// `GET /messages/{id}/receipts` once the receipt log was pruned past a
/// message (docs/receipt-rules.md, "Retention of the receipt log"): every
/// member whose cursor has passed it is still listed, and each time is either
/// the exact one, flagged exact, or a later one (an upper bound), flagged not.
@Suite("Receipts after the receipt log was pruned")
struct PrunedReceiptsTests {
    typealias SplitMix = SQLiteStoreTests.SplitMix
    /// The default retention, without the pause between batches (which would wait for the test's clock).
    static var noPause: ReceiptLogRetention {
        var retention = ReceiptLogRetention()
        retention.pause = .zero
        return retention
    }
    let everyone = ReceiptAudience(fullChannelLimit: 100)

    @Test(
        "random histories pruned at a random time: exact times are unchanged, the others are later, as ReceiptRules.reached says",
        arguments: StoreKind.all, [21, 22, 23, 24, 25])
    func prunedHistories(kind: StoreKind, seed: UInt64) async throws {
        try await kind.withStore { store in try await prunedHistory(store, seed: seed) }
    }

    func prunedHistory(_ store: any TicksStore, seed: UInt64) async throws {
        var random = SplitMix(state: seed)
        let reader = try #require(store as? any ReceiptLogReading)
        var users = ["u0", "u1", "u2"]
        var clock: Int64 = 1_700_000_000_000_000
        var times: [Int64] = []
        func tick() -> Timestamp {
            clock += Int64.random(in: 1...1000, using: &random)
            times.append(clock)
            return Timestamp(microseconds: clock)
        }
        _ = try await store.upsertUsers((users + ["u3"]).map { User(id: $0) }, now: tick())
        var (channel, _) = try await store.createChannel(
            ChannelID(type: "messaging", id: "p\(seed)"), createdBy: nil, memberIDs: users, custom: [:], now: tick())
        var messages: [(id: String, author: String, at: Int64)] = []
        for step in 0..<160 {
            if step == 80 {
                // A member who joins later: their log starts at their join.
                _ = try await store.addMembers(["u3"], to: channel, maxMembers: 100, now: tick())
                users.append("u3")
                channel = try #require(try await store.channel(ChannelID(type: "messaging", id: channel.id)))
            }
            let user = users.randomElement(using: &random)!
            let pick = messages.isEmpty ? nil : messages.randomElement(using: &random)?.id
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<3:
                let id = "m\(step)"
                let now = tick()
                _ = try await store.sendMessage(
                    NewMessage(id: id, userID: user, text: "t", custom: [:]), to: channel, now: now)
                messages.append((id, user, now.microseconds))
            case 3..<5:
                _ = try await store.markRead(user, in: channel.cid, upTo: pick, audience: everyone, now: tick())
            case 5..<8:
                if let pick {
                    _ = try await store.markDelivered(
                        user, [DeliveredTarget(channel: channel.cid, messageID: pick)], audience: everyone,
                        now: tick())
                }
            default:
                if let pick { _ = try await store.markUnread(user, in: channel, from: pick, now: tick()) }
            }
        }
        var before: [String: [String: MessageReceipts.Entry]] = [:]
        for message in messages {
            let receipts = try #require(try await store.receipts(forMessage: message.id))
            before[message.id] = Dictionary(uniqueKeysWithValues: receipts.entries.map { ($0.userID, $0) })
            #expect(receipts.entries.allSatisfy { $0.readExact && $0.deliveredExact })
        }

        // Prune at a time somewhere in the middle of the history, in small batches.
        let cutoff = Timestamp(
            microseconds: times[Int.random(in: times.count / 4..<times.count * 3 / 4, using: &random)])
        var retention = ReceiptLogRetention(window: .seconds(86_400))
        retention.batchSize = 7
        retention.pause = .zero
        let time = TimeSource(clock: ManualClock(), wallNow: { cutoff + .seconds(86_400) })
        let sqlStore = try #require(store as? SQLStore)
        let pruner = try #require(
            ReceiptLogPruner(
                store: sqlStore, retention: retention, time: time, metrics: ServerMetrics(),
                logger: Logger(label: "ticks-test")))
        let round = try await pruner.round()
        #expect(round.cutoff == cutoff)
        #expect(round.deleted > 0)
        #expect(round.batches.allSatisfy { $0 <= 7 })
        let prunedBefore = try await (store as? SQLStore)?.receiptLogPrunedBefore()
        #expect(prunedBefore == cutoff)

        let members = try await store.snapshot(of: channel, messageLimit: 0, page: .newest).members
        var upperBounds = 0
        for (index, message) in messages.enumerated() {
            let seq = Seq(index + 1)
            let after = try #require(try await store.receipts(forMessage: message.id))
            for member in members where member.userID != message.author {
                let old = before[message.id]?[member.userID]
                let new = after.entries.first { $0.userID == member.userID }
                // The same members are listed: whose cursors have passed it.
                #expect((new == nil) == (old == nil), "seed \(seed), \(message.id), \(member.userID)")
                for kind in CursorKind.allCases {
                    let (oldAt, newAt, exact) =
                        kind == .read
                        ? (old?.readAt, new?.readAt, new?.readExact ?? true)
                        : (old?.deliveredAt, new?.deliveredAt, new?.deliveredExact ?? true)
                    let cursor = kind == .read ? member.cursors.read : member.cursors.delivered
                    guard cursor >= seq else {
                        #expect(newAt == nil && oldAt == nil)
                        continue
                    }
                    let context: Comment = "seed \(seed), \(message.id), \(member.userID), \(kind)"
                    let oldTime = try #require(oldAt, context)
                    let newTime = try #require(newAt, context)
                    // Exact: the time it was. Otherwise no earlier: a time it had happened by.
                    if exact { #expect(newTime == oldTime, context) } else { #expect(newTime >= oldTime, context) }
                    if !exact { upperBounds += 1 }
                    // A message sent after the cutoff was reached by moves that are all kept.
                    if message.at >= cutoff.microseconds { #expect(exact, context) }
                    // And exactly what the rule says of the moves left.
                    let left = try await reader.loggedMoves(channelPK: channel.pk, userID: member.userID, kind: kind)
                    #expect(left.allSatisfy { $0.at >= cutoff.microseconds })
                    let expected = ReceiptRules.reached(
                        seq, moves: left, since: max(message.at, member.joinedAt.microseconds),
                        prunedBefore: prunedBefore?.microseconds,
                        cursorAt: (kind == .read ? member.readAt : member.deliveredAt).microseconds)
                    #expect(ReachedTime(at: newTime.microseconds, exact: exact) == expected, context)
                }
            }
        }
        // The history is long enough that some times did become upper bounds.
        #expect(upperBounds > 0, "seed \(seed)")
    }

    @Test(
        "GET /messages/{id}/receipts of a pruned message: everyone whose cursor passed it, at their cursor's time, flagged",
        arguments: StoreKind.all)
    func prunedOverHTTP(kind: StoreKind) async throws {
        let clock = ManualClock()
        let now = clock.wallNow
        let day = Duration.seconds(86_400)
        @Sendable func ago(_ days: Int) -> Timestamp { now - day * days }
        try await TestServer.run(kind, time: clock.timeSource, receiptLogRetention: Self.noPause) { server in
            let store = server.store
            _ = try await store.upsertUsers(["alice", "bob", "carol", "dave"].map { User(id: $0) }, now: ago(200))
            let (channel, _) = try await store.createChannel(
                ChannelID(type: "messaging", id: "old"), createdBy: "alice", memberIDs: ["alice", "bob", "carol"], custom: [:],
                now: ago(200))
            _ = try await store.sendMessage(
                NewMessage(id: "m1", userID: "alice", text: "t", custom: [:]), to: channel, now: ago(200))
            // bob read m1 long ago, and nothing since; carol only received it then…
            _ = try await store.markRead("bob", in: channel.cid, upTo: "m1", audience: everyone, now: ago(199))
            _ = try await store.markDelivered(
                "carol", [DeliveredTarget(channel: channel.cid, messageID: "m1")], audience: everyone,
                now: ago(199))
            // …and read it (with m2) ten days ago; dave joined five days ago.
            _ = try await store.sendMessage(
                NewMessage(id: "m2", userID: "alice", text: "t", custom: [:]), to: channel, now: ago(10))
            _ = try await store.markRead("carol", in: channel.cid, upTo: "m2", audience: everyone, now: ago(10))
            _ = try await store.addMembers(["dave"], to: channel, maxMembers: 100, now: ago(5))

            let exactBefore = try await server.ok(.get, "/messages/m1/receipts")
            #expect(exactBefore["receipts"].array.allSatisfy { $0["read_at_exact"].bool != false })
            let pruner = try #require(server.services.receiptLogPruner)
            let round = try await pruner.round()
            #expect(round.deleted > 0)

            let answer = try await server.ok(.get, "/messages/m1/receipts")
            let state = try await server.ok(.post, "/channels/messaging/old/query", #"{"messages": {"limit": 0}}"#)
            func receipt(_ user: String) -> JSON {
                answer["receipts"].array.first { $0["user"]["id"].string == user } ?? JSON(nil)
            }
            func cursor(_ user: String) -> JSON {
                state["read"].array.first { $0["user"]["id"].string == user } ?? JSON(nil)
            }
            #expect(answer["read_count"].int == 3)
            #expect(answer["delivered_count"].int == 3)
            // bob's moves are all gone: his cursor's time, the latest move it made, flagged.
            #expect(receipt("bob")["read_at"].time == cursor("bob")["last_read"].time)
            #expect(receipt("bob")["read_at"].time == ago(199))
            #expect(receipt("bob")["read_at_exact"].bool == false)
            #expect(receipt("bob")["delivered_at_exact"].bool == false)
            // carol's read ten days ago is kept, but nothing kept shows her cursor was before m1 then:
            // an upper bound (her cursor's time), flagged; her delivery 199 days ago is gone: the same.
            #expect(receipt("carol")["read_at"].time == cursor("carol")["last_read"].time)
            #expect(receipt("carol")["read_at"].time == ago(10))
            #expect(receipt("carol")["read_at_exact"].bool == false)
            #expect(receipt("carol")["delivered_at"].time == ago(10))
            #expect(receipt("carol")["delivered_at_exact"].bool == false)
            // dave joined after the cutoff: his whole log is there, the times are exact.
            #expect(receipt("dave")["read_at"].time == ago(5))
            #expect(receipt("dave")["read_at_exact"].bool == true)
            #expect(receipt("dave")["delivered_at_exact"].bool == true)
            // m2 came after the cutoff: exact for everyone.
            let recent = try await server.ok(.get, "/messages/m2/receipts")
            #expect(recent["receipts"].array.count == 2)
            #expect(recent["receipts"].array.allSatisfy { $0["read_at_exact"].bool == true })
            #expect(
                recent["receipts"].array.first { $0["user"]["id"].string == "carol" }?["read_at"].time == ago(10))
        }
    }

    @Test("the pruner runs every interval on the server's clock and reports in /metrics; off, there is none")
    func serverRunsThePruner() async throws {
        let clock = ManualClock()
        let now = clock.wallNow
        try await TestServer.run(time: clock.timeSource, receiptLogRetention: Self.noPause) { server in
            let store = server.store
            _ = try await store.upsertUsers([User(id: "a"), User(id: "b")], now: now - .seconds(100 * 86_400))
            let (channel, _) = try await store.createChannel(
                ChannelID(type: "messaging", id: "c"), createdBy: "a", memberIDs: ["a", "b"], custom: [:],
                now: now - .seconds(100 * 86_400))
            _ = try await store.sendMessage(
                NewMessage(id: "m1", userID: "a", text: "t", custom: [:]), to: channel,
                now: now - .seconds(100 * 86_400))
            _ = try await store.markRead(
                "b", in: channel.cid, upTo: "m1", audience: everyone, now: now - .seconds(99 * 86_400))
            _ = try await store.sendMessage(
                NewMessage(id: "m2", userID: "a", text: "t", custom: [:]), to: channel, now: now - .seconds(86_400))
            let pruner = try #require(server.services.receiptLogPruner)
            #expect(pruner.retention.window == ReceiptLogRetention.defaultWindow)
            // The first round comes one interval after start.
            try await eventually { clock.deadlines.contains(pruner.retention.interval) }
            clock.advance(by: pruner.retention.interval)
            var rounds = pruner.rounds.makeAsyncIterator()
            let round = try #require(await rounds.next())
            // a's two moves and b's two at m1 were old; a's two at m2 are not.
            #expect(round.deleted == 4)
            #expect(round.oldest == now - .seconds(86_400))
            let metrics = try await server.call(.get, "/metrics").body
            #expect(metrics.contains("ticks_receipt_log_pruned_total 4"))
            #expect(
                metrics.contains(
                    "ticks_receipt_log_oldest_move_timestamp_seconds \(Double((now - .seconds(86_400)).microseconds) / 1_000_000)"
                ))
        }
        try await TestServer.run(receiptLogRetention: .off) { server in
            #expect(server.services.receiptLogPruner == nil)
        }
    }
}
