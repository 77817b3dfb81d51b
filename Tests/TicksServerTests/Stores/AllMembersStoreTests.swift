import Foundation
import Testing
import TicksProtocol
import TicksReceipts

@testable import TicksServer

/// R13 on both stores, against a brute force over every member's cursors:
/// random histories of sends, reads, deliveries, marks unread, privacy
/// changes and members leaving and joining. After every step the store's
/// "read by all up to" for each author is the brute force's, every
/// `reachedAll` a change reported was true when reported, and the newest one
/// told to each author is where the brute force stands — except after the
/// changes that move "all" without telling (a mark unread, a privacy change,
/// a member leaving or joining), after which the telling starts again from there.
/// Between steps a member row's mark as a group's (`member.in_group`,
/// `v16-counted-columns`) is flipped at random: the lowest positions must
/// not depend on which rows keep them in the indexed columns.
@Suite("Read by all and delivered to all")
struct AllMembersStoreTests {
    let everyone = ReceiptAudience(fullChannelLimit: 100)

    @Test("random histories: the store's facts and events match a brute force", arguments: StoreKind.all, [1, 2, 3, 4])
    func randomHistories(kind: StoreKind, seed: UInt64) async throws {
        try await kind.withStore { store in
            // Odd seeds on a type without delivery events (R9), where private readers do not count.
            try await randomHistory(store, seed: seed, deliveryEvents: seed % 2 == 0)
        }
    }

    /// R13 exactly once under concurrent readers: every reader of a message
    /// marks it read at once; whatever order their transactions commit in,
    /// exactly one of them tells its author it was read by all, and exactly
    /// one that it was delivered to all. On PostgreSQL each reader is its own
    /// batch, run beside the others on the pool's connections (not through
    /// the group commit's single lane), so their transactions truly overlap:
    /// without the channel's advisory lock, two of them each miss the other's
    /// uncommitted move and nobody is told.
    @Test("R13: many readers of one message at once: exactly one read_by_all and one delivered_to_all", arguments: StoreKind.all)
    func concurrentReaders(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let readers = (0..<12).map { "r\($0)" }
            let now = Timestamp(microseconds: 1_700_000_000_000_000)
            _ = try await store.upsertUsers((["author"] + readers).map { User(id: $0) }, now: now)
            let (channel, _) = try await store.createChannel(
                ChannelID(type: "messaging", id: "crowd"), createdBy: nil, memberIDs: ["author"] + readers, custom: [:],
                now: now)
            for round in 0..<15 {
                let id = "crowd\(round)"
                _ = try await store.sendMessage(
                    NewMessage(id: id, userID: "author", text: "t", custom: [:]), to: channel, now: now)
                let reached = try await withThrowingTaskGroup(of: [ReachedAll].self) { group in
                    for reader in readers {
                        group.addTask { try await Self.markRead(reader, upTo: id, in: channel, on: store, audience: everyone) }
                    }
                    return try await group.reduce(into: []) { $0 += $1 }
                }
                #expect(
                    reached.filter { $0.kind == .read } == [ReachedAll(kind: .read, author: "author", messageID: id, seq: Seq(round + 1))],
                    "round \(round)")
                #expect(
                    reached.filter { $0.kind == .delivered }
                        == [ReachedAll(kind: .delivered, author: "author", messageID: id, seq: Seq(round + 1))],
                    "round \(round)")
            }
        }
    }

    /// A mark read alone: on PostgreSQL its own batch, in a transaction of its own.
    static func markRead(
        _ reader: String, upTo id: String, in channel: ChannelRecord, on store: SQLStore, audience: any MoveAudience
    ) async throws -> [ReachedAll] {
        guard store.moveBatcher != nil else {
            return try await store.markRead(reader, in: channel.cid, upTo: id, audience: audience, now: .now()).reachedAll
        }
        let move = BatchedMove(kind: .read, userID: reader, channel: channel.cid, messageID: id, at: .now(), audience: audience)
        let results = try await SQLStore.runBatch([move], on: store.engine, recorder: nil)
        return try #require(try results[0].get()).reachedAll
    }

    struct World {
        var members: Set<String>
        var privateReads: Set<String> = []
        /// Each message's seq and author, in order.
        var messages: [(id: String, author: String)] = []
        /// The newest seq told to each author, by kind.
        var told: [String: [CursorKind: Seq]] = [:]
    }

    func randomHistory(_ store: SQLStore, seed: UInt64, deliveryEvents: Bool) async throws {
        var random = SQLiteStoreTests.SplitMix(state: seed)
        let users = ["u0", "u1", "u2", "u3", "u4"]
        var clock: Int64 = 1_700_000_000_000_000
        func tick() -> Timestamp {
            clock += Int64.random(in: 1...1000, using: &random)
            return Timestamp(microseconds: clock)
        }
        _ = try await store.upsertUsers(users.map { User(id: $0) }, now: tick())
        let typeName = deliveryEvents ? "messaging" : "quiet\(seed)"
        if !deliveryEvents {
            _ = try await store.createChannelType(
                ChannelConfig(name: typeName, readEvents: true, deliveryEvents: false, createdAt: tick(), updatedAt: tick()))
        }
        let (channel, _) = try await store.createChannel(
            ChannelID(type: typeName, id: "all\(seed)"), createdBy: nil, memberIDs: Array(users.prefix(4)), custom: [:],
            now: tick())
        var world = World(members: Set(users.prefix(4)))
        var marking = SQLiteStoreTests.SplitMix(state: seed &+ 0x9E37_79B9)

        for step in 0..<90 {
            let user = world.members.sorted().randomElement(using: &random)!
            let pick = world.messages.isEmpty ? nil : world.messages.randomElement(using: &random)?.id
            var reached: [ReachedAll] = []
            var silent = false
            switch Int.random(in: 0..<20, using: &random) {
            case 0..<6:
                let id = "s\(seed)m\(step)"
                let outcome = try await store.sendMessage(
                    NewMessage(id: id, userID: user, text: "t", custom: [:]), to: channel, now: tick())
                world.messages.append((id, user))
                reached = outcome.reachedAll
            case 6..<11:
                reached = try await store.markRead(user, in: channel.cid, upTo: pick, audience: everyone, now: tick())
                    .reachedAll
            case 11..<16:
                guard let pick else { continue }
                reached = try await store.markDelivered(
                    user, [DeliveredTarget(channel: channel.cid, messageID: pick)], audience: everyone, now: tick()
                ).flatMap(\.reachedAll)
            case 16:
                guard let pick else { continue }
                _ = try await store.markUnread(user, in: channel, from: pick, now: tick())
                silent = true
            case 17:
                let hide = !world.privateReads.contains(user)
                let privacy = PrivacySettings(readReceipts: .init(enabled: !hide))
                _ = try await store.upsertUsers([User(id: user, privacySettings: privacy)], now: tick())
                if hide { world.privateReads.insert(user) } else { world.privateReads.remove(user) }
                silent = true
            default:
                if world.members.count > 2 {
                    _ = try await store.removeMembers([user], from: channel, now: tick())
                    world.members.remove(user)
                } else {
                    let newcomer = users.first { !world.members.contains($0) }!
                    _ = try await store.addMembers([newcomer], to: channel, maxMembers: 100, now: tick())
                    world.members.insert(newcomer)
                }
                silent = true
            }
            if Int.random(in: 0..<3, using: &marking) == 0, let flipped = world.members.sorted().randomElement(using: &marking) {
                try await store.engine.write {
                    Step.execute(
                        "UPDATE member SET in_group = 1 - in_group WHERE channel_pk = \(channel.pk) AND user_id = \(flipped)")
                }
            }
            let truth = try await bruteForce(store, channel: channel, world: world, deliveryEvents: deliveryEvents)
            for fact in reached {
                #expect(
                    (truth.thresholds[fact.author]?[fact.kind] ?? 0) >= fact.seq,
                    "seed \(seed) step \(step): \(fact) told but not reached")
                world.told[fact.author, default: [:]][fact.kind] = max(
                    world.told[fact.author]?[fact.kind] ?? 0, fact.seq)
            }
            for author in world.members.sorted() {
                let facts = try await store.allReached(in: channel, by: author)
                let expected = truth.newest[author] ?? [:]
                #expect(facts.read == expected[.read].map { world.messages[Int($0) - 1].id }, "seed \(seed) step \(step) \(author)")
                #expect(
                    facts.delivered == expected[.delivered].map { world.messages[Int($0) - 1].id },
                    "seed \(seed) step \(step) \(author)")
                for kind in CursorKind.allCases {
                    if silent {
                        world.told[author, default: [:]][kind] = expected[kind] ?? 0
                    } else {
                        #expect(
                            (world.told[author]?[kind] ?? 0) == (expected[kind] ?? 0),
                            "seed \(seed) step \(step): \(author) was told \(kind) up to \(world.told[author]?[kind] ?? 0)")
                    }
                }
            }
        }
    }

    struct Truth {
        /// Up to where every member but the author has reached, by author and kind.
        var thresholds: [String: [CursorKind: Seq]] = [:]
        /// The newest of each author's messages at or before it.
        var newest: [String: [CursorKind: Seq]] = [:]
    }

    /// R13 from every member's cursors, one by one.
    func bruteForce(_ store: SQLStore, channel: ChannelRecord, world: World, deliveryEvents: Bool) async throws -> Truth {
        var counted: [String: [CursorKind: Seq]] = [:]
        for member in world.members {
            let state = try #require(try await store.member(member, of: channel))
            let shares = !world.privateReads.contains(member)
            for kind in CursorKind.allCases {
                counted[member, default: [:]][kind] = AllMembers.counted(
                    kind, state.cursors, sharesReads: shares, sharesDeliveries: true, deliveryEvents: deliveryEvents)
            }
        }
        var truth = Truth()
        let kinds: [CursorKind] = deliveryEvents ? [.read, .delivered] : [.read]
        for author in world.members {
            for kind in kinds {
                let others = world.members.subtracting([author]).compactMap { counted[$0]?[kind] }
                guard let threshold = others.min() else { continue }
                truth.thresholds[author, default: [:]][kind] = threshold
                let own = world.messages.indices.filter { world.messages[$0].author == author && Seq($0 + 1) <= threshold }
                if let last = own.last { truth.newest[author, default: [:]][kind] = Seq(last + 1) }
            }
        }
        return truth
    }
}
