import Foundation
import GRDB
import Testing
import TicksProtocol
import TicksReceipts

@testable import TicksServer

/// The store's SQL must agree with the pure rules in TicksReceipts.
@Suite("The stores agree with ReceiptRules")
struct SQLiteStoreTests {
    let everyone = ReceiptAudience(fullChannelLimit: 100)
    /// A small deterministic generator, so a failure can be replayed from its seed.
    struct SplitMix: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    @Test(
        "random histories: per-message receipt times and unread counts match the rules",
        arguments: StoreKind.all, [1, 2, 3, 4, 5])
    func randomHistories(kind: StoreKind, seed: UInt64) async throws {
        try await kind.withStore { store in try await randomHistory(store, seed: seed) }
    }

    func randomHistory(_ store: any TicksStore, seed: UInt64) async throws {
        var random = SplitMix(state: seed)
        let receiptLog = try #require(store as? any ReceiptLogReading)
        let users = ["u0", "u1", "u2"]
        var clock: Int64 = 1_700_000_000_000_000
        func tick() -> Timestamp {
            clock += Int64.random(in: 1...1000, using: &random)
            return Timestamp(microseconds: clock)
        }
        _ = try await store.upsertUsers(users.map { User(id: $0) }, now: tick())
        let (channel, _) = try await store.createChannel(
            ChannelID(type: "messaging", id: "r\(seed)"), createdBy: nil, memberIDs: users, custom: [:], now: tick())
        var messages: [(id: String, author: String)] = []
        for step in 0..<120 {
            let user = users.randomElement(using: &random)!
            let pick = messages.isEmpty ? nil : messages.randomElement(using: &random)?.id
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<3:
                let id = "m\(step)"
                _ = try await store.sendMessage(NewMessage(id: id, userID: user, text: "t", custom: [:]), to: channel, now: tick())
                messages.append((id, user))
            case 3..<5:
                let outcome = try await store.markRead(user, in: channel.cid, upTo: pick, audience: everyone, now: tick())
                #expect(Set(outcome.recipients) == (outcome.update.changed ? Set(users) : []))
            case 5..<8:
                if let pick {
                    _ = try await store.markDelivered(
                        user, [DeliveredTarget(channel: ChannelID(type: channel.type, id: channel.id), messageID: pick)], audience: everyone, now: tick())
                }
            default:
                if let pick { _ = try await store.markUnread(user, in: channel, from: pick, now: tick()) }
            }
        }
        let log = messages.enumerated().map { LogEntry(seq: Seq($0.offset + 1), authorID: $0.element.author) }
        let snapshot = try await store.snapshot(of: channel, messageLimit: 0, page: .newest)
        for (index, message) in messages.enumerated() {
            let seq = Seq(index + 1)
            let receipts = try #require(try await store.receipts(forMessage: message.id))
            for user in users where user != message.author {
                let entry = receipts.entries.first { $0.userID == user }
                for kind in CursorKind.allCases {
                    let moves = try await receiptLog.loggedMoves(channelPK: channel.pk, userID: user, kind: kind)
                    let expected = ReceiptRules.reachedAt(seq, moves: moves).map(Timestamp.init(microseconds:))
                    let actual = kind == .read ? entry?.readAt : entry?.deliveredAt
                    #expect(actual == expected, "seed \(seed), message \(message.id), \(user), \(kind)")
                }
            }
        }
        for state in snapshot.members {
            let expected = ReceiptRules.unread(in: log, for: state.userID, read: state.cursors.read)
            #expect(state.unread == expected.count)
            #expect(state.firstUnreadMessageID == expected.firstUnreadSeq.map { messages[Int($0) - 1].id })
            let totals = try await store.unreadTotals(of: state.userID)
            #expect(totals == UnreadTotals(messages: expected.count, channels: expected.count > 0 ? 1 : 0))
            // R1 holds after any history.
            #expect(state.cursors.read <= state.cursors.delivered)
            #expect(state.cursors.delivered <= Seq(messages.count))
        }
    }

    @Test(
        "random histories over several channels: the unread counts kept with members and users equal R7 counted afresh",
        arguments: StoreKind.all, [11, 12, 13, 14])
    func randomCounters(kind: StoreKind, seed: UInt64) async throws {
        try await kind.withStore { store in try await randomCounterHistory(store, seed: seed) }
    }

    func randomCounterHistory(_ store: any TicksStore, seed: UInt64) async throws {
        var random = SplitMix(state: seed)
        let users = ["u0", "u1", "u2", "u3"]
        var clock: Int64 = 1_700_000_000_000_000
        func tick() -> Timestamp {
            clock += Int64.random(in: 1...1000, using: &random)
            return Timestamp(microseconds: clock)
        }
        _ = try await store.upsertUsers(users.map { User(id: $0) }, now: tick())
        var channels: [ChannelRecord] = []
        /// Every message sent, by channel, in order; `counts` false once deleted,
        /// `there` false once hard-deleted or truncated away.
        var logs: [[(id: String, author: String, counts: Bool, there: Bool)]] = []
        for index in 0..<3 {
            let members = Array(users.shuffled(using: &random).prefix(Int.random(in: 2...4, using: &random)))
            channels.append(
                try await store.createChannel(
                    ChannelID(type: "messaging", id: "k\(seed)-\(index)"), createdBy: nil, memberIDs: members, custom: [:],
                    now: tick()
                ).channel)
            logs.append([])
        }

        /// Every member's kept count against R7 on the log, and every user's totals against their sum.
        func check(_ step: Int) async throws {
            var expected: [String: UnreadTotals] = Dictionary(
                uniqueKeysWithValues: users.map { ($0, UnreadTotals(messages: 0, channels: 0)) })
            for (index, channel) in channels.enumerated() {
                let log = logs[index].enumerated().map {
                    LogEntry(seq: Seq($0.offset + 1), authorID: $0.element.author, counts: $0.element.counts)
                }
                for state in try await store.snapshot(of: channel, messageLimit: 0, page: .newest).members {
                    let unread = ReceiptRules.unread(in: log, for: state.userID, read: state.cursors.read)
                    #expect(state.unread == unread.count, "seed \(seed) step \(step): \(state.userID) in \(channel.id)")
                    expected[state.userID]!.messages += unread.count
                    expected[state.userID]!.channels += unread.count > 0 ? 1 : 0
                }
            }
            for user in users {
                #expect(try await store.unreadTotals(of: user) == expected[user], "seed \(seed) step \(step): \(user)")
            }
        }

        for step in 0..<150 {
            let index = Int.random(in: 0..<channels.count, using: &random)
            let channel = channels[index]
            let members = try await store.snapshot(of: channel, messageLimit: 0, page: .newest).members.map(\.userID)
            let member = members.randomElement(using: &random)!
            let pickIndex = logs[index].indices.filter { logs[index][$0].there }.randomElement(using: &random)
            let pick = pickIndex.map { logs[index][$0].id }
            switch Int.random(in: 0..<16, using: &random) {
            case 0..<4:
                let id = "m\(seed)-\(step)"
                _ = try await store.sendMessage(NewMessage(id: id, userID: member, text: "t", custom: [:]), to: channel, now: tick())
                logs[index].append((id, member, true, true))
            case 12, 13:
                // A deleted message leaves every count it was in (soft or hard alike).
                if let pickIndex {
                    let hard = Bool.random(using: &random)
                    _ = try await store.deleteMessage(id: logs[index][pickIndex].id, hard: hard, by: nil, now: tick())
                    logs[index][pickIndex].counts = false
                    if hard { logs[index][pickIndex].there = false }
                }
            case 14:
                // An edit changes no count.
                if let pick {
                    _ = try await store.editMessage(id: pick, by: nil, now: tick()) { _ in MessageEdit(text: "edited", custom: [:]) }
                }
            case 15:
                // A truncation: every message so far gone, every cursor past them.
                if step % 5 == 0 {
                    channels[index] = try await store.truncateChannel(channel, hard: Bool.random(using: &random), by: nil, now: tick())
                    for entry in logs[index].indices { logs[index][entry].there = false }
                }
            case 4..<6:
                _ = try await store.markRead(member, in: channel.cid, upTo: pick, audience: everyone, now: tick())
            case 6:
                if let pick { _ = try await store.markUnread(member, in: channel, from: pick, now: tick()) }
            case 7:
                _ = try await store.markAllRead(member, audience: everyone, now: tick())
            case 8:
                if let pick {
                    let target = DeliveredTarget(channel: ChannelID(type: channel.type, id: channel.id), messageID: pick)
                    _ = try await store.markDelivered(member, [target], audience: everyone, now: tick())
                }
            case 9:
                if members.count > 1 { _ = try await store.removeMembers([member], from: channel, now: tick()) }
            default:
                if let outsider = users.filter({ !members.contains($0) }).randomElement(using: &random) {
                    _ = try await store.addMembers([outsider], to: channel, maxMembers: 100, now: tick())
                }
            }
            if step % 25 == 24 { try await check(step) }
        }
        try await check(150)
    }

    @Test("every store refuses text holding U+0000 before its database sees it", arguments: StoreKind.all)
    func unstorableText(kind: StoreKind) async throws {
        try await kind.withStore { store in
            _ = try await store.upsertUsers([User(id: "a")], now: .now())
            await #expect(throws: StoreError.unstorableText) { try await store.channelType(named: "a\u{0}b") }
            await #expect(throws: StoreError.unstorableText) { try await store.users(ids: ["a", "b\u{0}"]) }
            #expect(try await store.users(ids: ["a"])["a"]?.id == "a")
        }
    }

    @Test("the member count kept on the channel follows adds and removes", arguments: StoreKind.all)
    func memberCount(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let now = Timestamp.now()
            _ = try await store.upsertUsers(["a", "b", "c", "d", "e"].map { User(id: $0) }, now: now)
            let (channel, _) = try await store.createChannel(
                ChannelID(type: "messaging", id: "count"), createdBy: nil, memberIDs: ["a", "b", "b", "c"], custom: [:], now: now)
            #expect(channel.memberCount == 3)
            _ = try await store.addMembers(["c", "d", "e"], to: channel, maxMembers: 100, now: now)
            _ = try await store.removeMembers(["a", "x"], from: channel, now: now)
            let current = try #require(try await store.channel(ChannelID(type: "messaging", id: "count")))
            let snapshot = try await store.snapshot(of: current, messageLimit: 0, page: .newest)
            #expect(current.memberCount == 4)
            #expect(snapshot.members.count == 4)
        }
    }

    @Test("a database made before member counts were kept gets them counted on opening")
    func migratesMemberCounts() async throws {
        let queue = try DatabaseQueue()
        try SQLiteSchema.migrator.migrate(queue, upTo: "v1-receipts")
        try await queue.write { db in
            try db.execute(
                sql: """
                    INSERT INTO channel (pk, type, id, created_at, updated_at) VALUES (1, 'messaging', 'old', 0, 0);
                    INSERT INTO member (channel_pk, user_id, read_seq, read_at, delivered_seq, delivered_at, created_at)
                    VALUES (1, 'a', 0, 0, 0, 0, 0), (1, 'b', 0, 0, 0, 0, 0);
                    """)
        }
        let store = SQLStore(engine: try SQLiteEngine(writer: queue), deadline: StoreKind.deadline)
        #expect(try await store.channel(ChannelID(type: "messaging", id: "old"))?.memberCount == 2)
    }

    @Test("a database made before unread counts were kept gets them counted on opening")
    func migratesUnreadCounters() async throws {
        let queue = try DatabaseQueue()
        try SQLiteSchema.migrator.migrate(queue, upTo: "v4-app-user")
        try await queue.write { db in
            try db.execute(
                sql: """
                    INSERT INTO app_user (id, body, created_at, updated_at) VALUES
                      ('a', '{"id":"a"}', 0, 0), ('b', '{"id":"b"}', 0, 0);
                    INSERT INTO channel (pk, type, id, last_seq, member_count, created_at, updated_at)
                      VALUES (1, 'messaging', 'old', 3, 2, 0, 0), (2, 'messaging', 'other', 1, 2, 0, 0);
                    INSERT INTO message (channel_pk, seq, id, user_id, text, created_at) VALUES
                      (1, 1, 'o1', 'a', 't', 0), (1, 2, 'o2', 'b', 't', 0), (1, 3, 'o3', 'a', 't', 0),
                      (2, 1, 'p1', 'a', 't', 0);
                    INSERT INTO member (channel_pk, user_id, read_seq, read_at, delivered_seq, delivered_at, created_at)
                    VALUES (1, 'a', 3, 0, 3, 0, 0), (1, 'b', 0, 0, 0, 0, 0), (2, 'a', 1, 0, 1, 0, 0), (2, 'b', 0, 0, 0, 0, 0);
                    """)
        }
        let store = SQLStore(engine: try SQLiteEngine(writer: queue), deadline: StoreKind.deadline)
        // b has not read o1 and o3 (o2 is b's own) in one channel, nor p1 in the other.
        #expect(try await store.unreadTotals(of: "b") == UnreadTotals(messages: 3, channels: 2))
        #expect(try await store.unreadTotals(of: "a") == UnreadTotals(messages: 0, channels: 0))
        let old = try #require(try await store.channel(ChannelID(type: "messaging", id: "old")))
        #expect(try await store.member("b", of: old)?.unread == 2)
    }

    @Test("R12: the connection that commits fsyncs each commit (WAL, synchronous = FULL)")
    func theWriterSyncsEachCommit() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ticks-sync-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let sqlite = try SQLiteEngine.open(path: folder.appendingPathComponent("t.sqlite").path)
        // GRDB's pool sets NORMAL (1) on its writer when it turns WAL on: commits would not be fsync'd.
        let (journal, synchronous) = try await sqlite.writer.writeWithoutTransaction { db in
            (try String.fetchOne(db, sql: "PRAGMA journal_mode"), try Int.fetchOne(db, sql: "PRAGMA synchronous"))
        }
        #expect(journal == "wal")
        #expect(synchronous == 2, "2 is FULL")
    }

    /// SQLite only, so it runs in the SQLite pass of `scripts/test`: in the
    /// PostgreSQL pass, the PostgreSQL tests running beside it starved the
    /// background checkpointer of CPU (CI: 1,651 frames after 300 writes).
    @Test(
        "under steady writes the write-ahead log is checkpointed beside the writer and stays short",
        .enabled(if: PostgresTestDatabase.url == nil, "runs in the SQLite pass"))
    func checkpointsKeepTheLogShort() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ticks-wal-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        var policy = SQLiteEngine.CheckpointPolicy()
        policy.interval = .milliseconds(20)
        policy.restartFrames = 50
        let sqlite = try SQLiteEngine.open(path: folder.appendingPathComponent("t.sqlite").path, checkpoints: policy)
        let store = SQLStore(engine: sqlite, deadline: StoreKind.deadline)
        // The checkpointer is a service: the application's group runs it beside the server.
        let checkpoints = Task { for service in sqlite.services { try await service.run() } }
        defer { checkpoints.cancel() }
        _ = try await store.upsertUsers([User(id: "a"), User(id: "b")], now: .now())
        let (channel, _) = try await store.createChannel(
            ChannelID(type: "messaging", id: "wal"), createdBy: nil, memberIDs: ["a", "b"], custom: [:], now: .now())
        // Writes without pause: with the automatic checkpoint off, only the
        // catch-up on the writer lets the log start afresh. A count, not a
        // time: a busy CI machine fsyncs far slower than this one.
        let written = 300
        for index in 0..<written {
            _ = try await store.sendMessage(
                NewMessage(id: "w\(index)", userID: "a", text: "t", custom: [:]), to: channel, now: .now())
        }
        var log = (walFrameCount: -1, checkpointedFrameCount: -1)
        for _ in 0..<50 where log.walFrameCount < 0 {
            do {
                log = try await sqlite.writer.writeWithoutTransaction { db in try db.checkpoint(.passive) }
            } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY {
                try await Task.sleep(for: .milliseconds(5))  // the background checkpoint is running
            }
        }
        #expect(log.walFrameCount >= 0)
        // Each write adds about ten frames: a log that was never started afresh
        // would hold ten times `written`; this one holds the last fraction of a second.
        #expect(log.walFrameCount < written * 3, "\(written) writes left \(log.walFrameCount) frames in the log")
    }

    @Test("R2: a cursor update computed from a stale read cannot move the cursor back")
    func staleUpdateCannotRegress() async throws {
        let store = try SQLStore.memory(deadline: StoreKind.deadline)
        let now = Timestamp.now()
        _ = try await store.upsertUsers([User(id: "a"), User(id: "b")], now: now)
        let (channel, _) = try await store.createChannel(
            ChannelID(type: "messaging", id: "c"), createdBy: nil, memberIDs: ["a", "b"], custom: [:], now: now)
        for id in ["1", "2", "3"] {
            _ = try await store.sendMessage(NewMessage(id: id, userID: "a", text: "t", custom: [:]), to: channel, now: now)
        }
        // Two requests read the cursor at 0; the one for message 3 commits first.
        let stale = Cursors(read: 0, delivered: 0)
        let toTwo = ReceiptRules.markRead(stale, upTo: 2, newest: 3)
        _ = try await store.markRead("b", in: channel.cid, upTo: "3", audience: everyone, now: now)
        try await #require(store.unbounded as? SQLiteEngine).writer.write { db in
            try SQLiteSession(db: db).run(SQLStore.apply(toTwo, of: "b", in: channel.pk, now: now))
        }
        let state = try #require(try await store.snapshot(of: channel, messageLimit: 0, page: .newest).members.first { $0.userID == "b" })
        #expect(state.cursors == Cursors(read: 3, delivered: 3))
    }

    @Test("R2: concurrent marks arriving out of order leave the furthest one", arguments: StoreKind.all)
    func concurrentMarks(kind: StoreKind) async throws {
        try await TestServer.run(kind, .live) { server in
            try await server.upsert("alice", "bob")
            try await server.createChannel("messaging:c", members: ["alice", "bob"])
            for index in 1...20 { try await server.send("messaging:c", id: "c\(index)", from: "alice") }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in (1...20).shuffled() {
                    group.addTask {
                        try await server.markRead("messaging:c", "bob", upTo: "c\(index)")
                        try await server.markDelivered("bob", [("messaging:c", "c\(21 - index)")])
                    }
                }
                try await group.waitForAll()
            }
            let bob = try #require(try await server.readState("messaging:c", of: "bob"))
            #expect(bob["last_read_message_id"].string == "c20")
            #expect(bob["last_delivered_message_id"].string == "c20")
            #expect(bob["unread_messages"].int == 0)
            // Every logged move went forward.
            let channel = try #require(try await server.store.channel(ChannelID(type: "messaging", id: "c")))
            let store = try #require(server.store as? any ReceiptLogReading)
            for kind in CursorKind.allCases {
                let seqs = try await store.loggedMoves(channelPK: channel.pk, userID: "bob", kind: kind).map(\.seq)
                #expect(seqs == seqs.sorted() && Set(seqs).count == seqs.count, "\(kind): \(seqs)")
            }
        }
    }

    @Test(
        "concurrent receipts of many members in many channels, refusals among them: each answered on its own, cursors and kept counts as the rules say (PostgreSQL: grouped into batches)",
        arguments: StoreKind.all)
    func concurrentReceipts(kind: StoreKind) async throws {
        try await kind.withStore { store in
            var random = SplitMix(state: 42)
            let users = (0..<8).map { "u\($0)" }
            let start = Timestamp(microseconds: 1_700_000_000_000_000)
            _ = try await store.upsertUsers((users + ["outsider"]).map { User(id: $0) }, now: start)
            var channels: [ChannelRecord] = []
            var logs: [[LogEntry]] = []
            for index in 0..<4 {
                let created = try await store.createChannel(
                    ChannelID(type: "messaging", id: "b\(index)"), createdBy: nil, memberIDs: users, custom: [:], now: start
                ).channel
                var log: [LogEntry] = []
                for seq in 1...10 {
                    let author = users[(seq + index) % users.count]
                    _ = try await store.sendMessage(
                        NewMessage(id: "b\(index)-\(seq)", userID: author, text: "x", custom: [:]), to: created,
                        now: Timestamp(microseconds: start.microseconds + Int64(seq)))
                    log.append(LogEntry(seq: Seq(seq), authorID: author))
                }
                channels.append(try #require(try await store.channel(ChannelID(type: "messaging", id: "b\(index)"))))
                logs.append(log)
            }
            // Each member of each channel: two reads and a delivered, to random messages.
            struct Receipt: Sendable {
                var kind: CursorKind
                var user: String
                var channel: Int
                var seq: Seq
            }
            var receipts: [Receipt] = []
            for user in users {
                for channel in channels.indices {
                    for kind in [CursorKind.read, .read, .delivered] {
                        receipts.append(Receipt(kind: kind, user: user, channel: channel, seq: Seq.random(in: 1...10, using: &random)))
                    }
                }
            }
            receipts.shuffle(using: &random)
            // Authors' cursors moved when they sent (R4).
            var before: [[String: Cursors]] = []
            for channel in channels {
                let members = try await store.snapshot(of: channel, messageLimit: 0, page: .newest).members
                before.append(Dictionary(uniqueKeysWithValues: members.map { ($0.userID, $0.cursors) }))
            }
            let snapshot = channels
            let audience = everyone
            let refused = try await withThrowingTaskGroup(of: Int.self) { group in
                for receipt in receipts {
                    group.addTask {
                        let channel = snapshot[receipt.channel]
                        let now = Timestamp(microseconds: start.microseconds + 1_000)
                        switch receipt.kind {
                        case .read:
                            _ = try await store.markRead(
                                receipt.user, in: channel.cid, upTo: "b\(receipt.channel)-\(receipt.seq)", audience: audience,
                                now: now)
                        case .delivered:
                            _ = try await store.markDelivered(
                                receipt.user,
                                [DeliveredTarget(channel: ChannelID(type: "messaging", id: channel.id), messageID: "b\(receipt.channel)-\(receipt.seq)")],
                                audience: audience, now: now)
                        }
                        return 0
                    }
                }
                // Refused among them, each on its own: a message not in the channel, a non-member.
                for (user, message) in [("u1", "no-such-message"), ("outsider", "b0-3")] {
                    group.addTask {
                        do {
                            _ = try await store.markRead(user, in: snapshot[0].cid, upTo: message, audience: audience, now: start)
                            return 0
                        } catch is StoreError {
                            return 1
                        }
                    }
                }
                return try await group.reduce(0, +)
            }
            #expect(refused == 2)
            for (index, channel) in channels.enumerated() {
                let members = try await store.snapshot(of: channel, messageLimit: 0, page: .newest).members
                for state in members {
                    let own = receipts.filter { $0.user == state.userID && $0.channel == index }
                    let start = try #require(before[index][state.userID])
                    let read = max(start.read, own.filter { $0.kind == .read }.map(\.seq).max() ?? 0)
                    let delivered = max(start.delivered, read, own.map(\.seq).max() ?? 0)
                    #expect(state.cursors == Cursors(read: read, delivered: delivered), "\(state.userID) in b\(index)")
                    #expect(state.unread == ReceiptRules.unread(in: logs[index], for: state.userID, read: read).count)
                }
            }
            for user in users {
                var expected = UnreadTotals(messages: 0, channels: 0)
                for (index, channel) in channels.enumerated() {
                    let members = try await store.snapshot(of: channel, messageLimit: 0, page: .newest).members
                    let read = try #require(members.first { $0.userID == user }).cursors.read
                    let unread = ReceiptRules.unread(in: logs[index], for: user, read: read).count
                    expected.messages += unread
                    expected.channels += unread > 0 ? 1 : 0
                }
                #expect(try await store.unreadTotals(of: user) == expected, "\(user)")
            }
            if let batcher = store.moveBatcher {
                let statistics = batcher.statistics
                #expect(statistics.moves == receipts.count + 2)
                #expect(statistics.batches < statistics.moves, "\(statistics)")
            }
        }
    }

    @Test("a channel's messages have strictly increasing created_at in seq order, whatever the clock does", arguments: StoreKind.all)
    func createdAtFollowsSeq(kind: StoreKind) async throws {
        try await kind.withStore { store in
            _ = try await store.upsertUsers([User(id: "a")], now: Timestamp(microseconds: 1))
            let (channel, _) = try await store.createChannel(
                ChannelID(type: "messaging", id: "clock"), createdBy: nil, memberIDs: ["a"], custom: [:], now: Timestamp(microseconds: 1))
            // The same instant three times, then a clock that went back.
            let clock: [Int64] = [5_000, 5_000, 5_000, 4_000, 9_000]
            var times: [Int64] = []
            for (index, now) in clock.enumerated() {
                let outcome = try await store.sendMessage(
                    NewMessage(id: "t\(index)", userID: "a", text: "x", custom: [:]), to: channel,
                    now: Timestamp(microseconds: now))
                times.append(outcome.message.createdAt.microseconds)
            }
            #expect(times == [5_000, 5_001, 5_002, 5_003, 9_000])
            let stored = try await store.snapshot(of: channel, messageLimit: 10, page: .newest).messages
            #expect(stored.map(\.createdAt.microseconds) == times)
        }
    }
}
