import Foundation
import Synchronization
import Testing
import TicksProtocol
import TicksReceipts

@testable import TicksServer

/// Store paths that read and then write, against a concurrent writer that
/// commits between the read and the write (docs/storage.md, "Concurrency on
/// PostgreSQL"). On PostgreSQL the path is held between its two statements
/// (`PostgresSession.beforeStatement`), every time, while the other writer
/// runs: it either commits meanwhile (the race) or waits for a lock the path
/// holds (the guard). SQLite runs the two one after the other: its single
/// writer is the guard. Either way nothing may be lost from a count:
/// `recountUnread` afterwards finds nothing to fix.
@Suite("Concurrent writers: reads then writes under interleaving")
struct InterleavingTests {
    /// Holds the first statement, in the tasks that carry `hook`, that `matches`.
    final class Pause: Sendable {
        let matches: @Sendable (String) -> Bool
        /// Matching statements still to let through before the one held.
        private let skips: Atomic<Int>
        private let armed = Atomic<Bool>(true)
        private let reached = AsyncStream<Void>.makeStream()
        private let released = AsyncStream<Void>.makeStream()

        init(before matches: @escaping @Sendable (String) -> Bool, skipping: Int = 0) {
            self.matches = matches
            skips = Atomic(skipping)
        }

        var hook: @Sendable (String) async -> Void {
            { text in
                guard self.matches(text), self.skips.subtract(1, ordering: .relaxed).newValue < 0,
                    self.armed.compareExchange(expected: true, desired: false, ordering: .relaxed).exchanged
                else { return }
                self.reached.continuation.yield()
                for await _ in self.released.stream { break }
            }
        }

        /// Until the path is held, or has ended without meeting a statement the pause matches.
        func waitUntilHeld() async { for await _ in reached.stream { break } }
        /// The path ended: a `waitUntilHeld` still waiting returns.
        func pathEnded() { reached.continuation.yield() }
        /// Whether the path was held (the pause matched one of its statements).
        var held: Bool { !armed.load(ordering: .relaxed) }
        func release() { released.continuation.yield() }
    }

    /// Runs `path` held at `pause` while `other` runs, and lets it go once
    /// `other` has finished or is waiting for a lock; both must succeed.
    /// SQLite: `path`, then `other`.
    static func interleave<T: Sendable>(
        _ kind: StoreKind, _ store: SQLStore, at pause: Pause, _ path: @escaping @Sendable () async throws -> T,
        against other: @escaping @Sendable () async throws -> Void, waitingOn lockedStatements: [String]
    ) async throws -> T {
        guard kind == .postgres else {
            let result = try await path()
            try await other()
            return result
        }
        let held = Task {
            defer { pause.pathEnded() }
            return try await PostgresSession.$beforeStatement.withValue(pause.hook) { try await path() }
        }
        await pause.waitUntilHeld()
        guard pause.held else {
            Issue.record("the path ran no statement the pause matches: nothing was interleaved")
            return try await held.value
        }
        let running = Task { try await other() }
        // Up to two minutes (a saturated machine): done, or blocked by the held transaction.
        let started = ContinuousClock.now
        let finished = Atomic<Bool>(false)
        let watcher = Task {
            _ = await running.result
            finished.store(true, ordering: .relaxed)
        }
        while !finished.load(ordering: .relaxed), ContinuousClock.now - started < .seconds(120) {
            if try await waiting(store, on: lockedStatements) { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        pause.release()
        let result = try await held.value
        try await running.value
        _ = await watcher.value
        return result
    }

    /// Whether a backend waits for a lock while running a statement that starts with one of `texts`.
    static func waiting(_ store: SQLStore, on texts: [String]) async throws -> Bool {
        for text in texts {
            let found = try await store.engine.readOne {
                Step.row(
                    """
                    SELECT count(*) FROM pg_stat_activity
                    WHERE wait_event_type = 'Lock' AND datname = current_database() AND query LIKE \(text + "%")
                    """
                ).map { try ($0?.int(0) ?? 0) > 0 }
            }
            if found { return true }
        }
        return false
    }

    /// Channel `id` of a, b and c (`ThreadStoreTests.setUp`), whose thread
    /// `id-p` b has read up to c's first reply, before c's second (one unread).
    static func threadWithAnUnreadReply(_ store: SQLStore, _ id: String) async throws -> ChannelRecord {
        let threads = ThreadStoreTests()
        let channel = try await threads.setUp(store, id)
        try await threads.reply(store, "\(id)-r1", by: "c", to: "\(id)-p", in: channel)
        _ = try await store.markThreadRead("b", in: channel, parentID: "\(id)-p", now: .now())
        try await threads.reply(store, "\(id)-r2", by: "c", to: "\(id)-p", in: channel)
        return channel
    }

    /// Every count kept is the count made afresh: `recountUnread` fixes nothing.
    static func expectNothingToRecount(_ store: SQLStore, sourceLocation: SourceLocation = #_sourceLocation)
        async throws
    {
        let recount = try await store.recountUnread(of: nil)
        #expect(recount.fixedCount == 0, "\(recount.fixes)", sourceLocation: sourceLocation)
    }

    /// A thread read state written with its values (`StoreSQL.readThread`), not joined (`joinThread`).
    static let readThread: @Sendable (String) -> Bool = {
        $0.hasPrefix("INSERT INTO thread_read") && $0.contains("VALUES")
    }

    @Test(
        "thread read (thread_id on mark read): a reply sent while it is between its statements stays counted",
        arguments: StoreKind.all)
    func threadReadAgainstReply(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let threads = ThreadStoreTests()
            let channel = try await Self.threadWithAnUnreadReply(store, "tr")
            // b reads the thread, held between reading its newest reply and writing unread = 0, while c replies.
            _ = try await Self.interleave(
                kind, store, at: Pause(before: Self.readThread),
                { try await store.markThreadRead("b", in: channel, parentID: "tr-p", now: .now()) },
                against: { try await threads.reply(store, "tr-r3", by: "c", to: "tr-p", in: channel) },
                waitingOn: ["UPDATE message SET reply_count"])
            #expect(try await threads.threads(store, "b") == ["tr-p 1"], "r3 came after what b read")
            try await Self.expectNothingToRecount(store)
        }
    }

    @Test(
        "thread marked unread (thread_id on mark unread): a reply that has counted itself, uncommitted, stays counted",
        arguments: StoreKind.all)
    func threadUnreadAgainstReply(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let threads = ThreadStoreTests()
            let channel = try await Self.threadWithAnUnreadReply(store, "tn")
            // The unread is one upsert whose count is its snapshot's: the reply is held after
            // counting itself in b's thread read state (uncommitted), while b marks the thread unread.
            _ = try await Self.interleave(
                kind, store, at: Pause(before: Self.readThread),
                { try await threads.reply(store, "tn-r3", by: "c", to: "tn-p", in: channel) },
                against: { _ = try await store.markThreadUnread("b", in: channel, parentID: "tn-p", now: .now()) },
                waitingOn: ["SELECT 1 FROM message WHERE", "INSERT INTO thread_read"])
            #expect(try await threads.threads(store, "b") == ["tn-p 3"], "r1, r2 and r3 are unread")
            try await Self.expectNothingToRecount(store)
        }
    }

    @Test(
        "every thread read (POST /threads/read): a reply sent while it is between its statements stays counted",
        arguments: StoreKind.all)
    func threadsReadAgainstReply(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let threads = ThreadStoreTests()
            let channel = try await Self.threadWithAnUnreadReply(store, "ta")
            // The bulk read is one UPDATE: the race is inside it, between its snapshot and its row
            // locks. So the reply is held instead, after counting itself in b's thread read state
            // (uncommitted, holding that row), at its author's own thread read, while b reads every thread.
            _ = try await Self.interleave(
                kind, store, at: Pause(before: Self.readThread),
                { try await threads.reply(store, "ta-r3", by: "c", to: "ta-p", in: channel) },
                against: { _ = try await store.markThreadsRead("b", now: .now()) },
                waitingOn: ["UPDATE thread_read SET", "SELECT 1 FROM message WHERE id IN"])
            let left = try await threads.threads(store, "b")
            #expect(left == [], "b read every thread after r3: \(left)")
            try await Self.expectNothingToRecount(store)
        }
    }

    @Test(
        "played: a removal that commits while a play is between its membership check and its write keeps no play",
        arguments: StoreKind.all)
    func playAgainstRemoval(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await server.upsert("alice", "bob")
            try await server.createChannel("messaging:pr", members: ["alice", "bob"], createdBy: "alice")
            try await server.sendVoiceNote("messaging:pr", id: "pr-v", from: "alice")
            let store = try #require(server.store as? SQLStore)
            let (message, _) = try #require(try await store.message(id: "pr-v"))
            let channel = try #require(try await store.channel(ChannelID(type: "messaging", id: "pr")))
            // The route found bob a member; the play is held before its write while bob is removed.
            let played = try await Self.interleave(
                kind, store, at: Pause(before: { $0.hasPrefix("INSERT INTO message_play") }),
                { try? await store.markPlayed(message, by: "bob", now: .now()) },
                against: { _ = try await store.removeMembers(["bob"], from: channel, now: .now()) },
                waitingOn: ["DELETE FROM member"])
            if kind == .postgres { #expect(played == nil, "removed before the play's write: not a member") }
            let kept = try await store.engine.read {
                Step.row("SELECT COUNT(*) FROM message_play").map { try $0?.int(0) ?? -1 }
            }
            #expect(kept == 0, "no play of a non-member is kept")
            // Back in the channel, bob plays afresh (R6).
            try await server.addMembers("messaging:pr", ["bob"])
            let fresh = try await store.markPlayed(message, by: "bob", now: .now())
            #expect(fresh.created)
        }
    }

    @Test(
        "mark unread: a message sent while it is between locking the cursors and recounting stays counted once",
        arguments: StoreKind.all)
    func markUnreadAgainstSend(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await server.upsert("alice", "bob")
            try await server.createChannel("messaging:mu", members: ["alice", "bob"], createdBy: "alice")
            for id in ["mu1", "mu2"] { try await server.send("messaging:mu", id: id, from: "alice") }
            _ = try await server.markRead("messaging:mu", "bob")
            let store = try #require(server.store as? SQLStore)
            let channel = try #require(try await store.channel(ChannelID(type: "messaging", id: "mu")))
            // bob marks unread from mu2, held after locking his cursors, before recounting, while alice sends.
            _ = try await Self.interleave(
                kind, store, at: Pause(before: { $0.hasPrefix("UPDATE member SET unread =") }),
                { try await store.markUnread("bob", in: channel, from: "mu2", now: .now()) },
                against: { try await server.send("messaging:mu", id: "mu3", from: "alice") },
                waitingOn: ["SELECT c.pk, c.type, c.id", "UPDATE member SET unread = unread"])
            #expect(try await store.unreadTotals(of: "bob") == UnreadTotals(messages: 2, channels: 1))
            try await Self.expectNothingToRecount(store)
        }
    }

    @Test(
        "two writers locking two rows in opposite orders: PostgreSQL breaks the circle, the store runs the loser again and counts it"
    )
    func deadlockIsRetriedAndCounted() async throws {
        guard StoreKind.all.contains(.postgres) else { return }
        try await StoreKind.postgres.withStore { store in
            _ = try await store.upsertUsers([User(id: "da"), User(id: "db")], now: .now())
            @Sendable func lock(_ first: String, then second: String) -> StoreProgram<Void> {
                Step.execute("SELECT 1 FROM app_user WHERE id = \(first) FOR UPDATE").then { _ in
                    Step.execute("SELECT 2 FROM app_user WHERE id = \(second) FOR UPDATE")
                }
            }
            let before = store.health.retries(.deadlock)
            // The first holds da, held before asking for db, until the second holds db and waits for da.
            try await Self.interleave(
                .postgres, store, at: Pause(before: { $0.hasPrefix("SELECT 2") }),
                { try await store.engine.write { lock("da", then: "db") } },
                against: { try await store.engine.write { lock("db", then: "da") } },
                waitingOn: ["SELECT 2"])
            #expect(store.health.retries(.deadlock) == before + 1)
        }
    }

    @Test(
        "deleting a thread's parent while a reply is sent: the channel's row first in both, so no deadlock",
        arguments: StoreKind.all)
    func deleteParentAgainstReply(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let threads = ThreadStoreTests()
            let channel = try await threads.setUp(store, "dp")
            try await threads.reply(store, "dp-r1", by: "c", to: "dp-p", in: channel)
            let before = store.health.retries(.deadlock)
            // The delete held after its first lock, before its second; the reply takes the
            // channel, then the parent.
            _ = try await Self.interleave(
                kind, store, at: Pause(before: { $0.contains(" FOR UPDATE") || $0.contains(" FOR NO KEY UPDATE") }, skipping: 1),
                { try await store.deleteMessage(id: "dp-p", hard: false, by: nil, now: .now()) },
                against: { try? await threads.reply(store, "dp-r2", by: "b", to: "dp-p", in: channel) },
                waitingOn: ["SELECT c.pk, c.type, c.id", "UPDATE message SET reply_count"])
            #expect(store.health.retries(.deadlock) == before, "the two waited for each other in a circle")
            try await Self.expectNothingToRecount(store)
        }
    }

    @Test(
        "recount: a mark read while it is between setting the members' counts right and counting the users is neither lost nor undone",
        arguments: StoreKind.all)
    func recountAgainstMarkRead(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await server.upsert("alice", "bob")
            try await server.createChannel("messaging:rc", members: ["alice", "bob"], createdBy: "alice")
            for id in ["rc1", "rc2", "rc3"] { try await server.send("messaging:rc", id: id, from: "alice") }
            let store = try #require(server.store as? SQLStore)
            // The recount of bob held after reading (and locking) his memberships, before counting him; bob reads.
            let first = try await Self.interleave(
                kind, store,
                at: Pause(before: { $0.hasPrefix("SELECT COUNT(*) FROM app_user") }),
                { try await store.recountUnread(of: ["bob"]) },
                against: { _ = try await server.markRead("messaging:rc", "bob") },
                waitingOn: ["SELECT * FROM ticks_moves"])
            #expect(first.fixedCount == 0, "\(first.fixes)")
            #expect(try await store.unreadTotals(of: "bob") == UnreadTotals(messages: 0, channels: 0))
            try await Self.expectNothingToRecount(store)
        }
    }

    @Test(
        "truncate and channel delete: a mark read while they are between locking the members and zeroing their counts leaves no count behind",
        arguments: StoreKind.all, [false, true])
    func clearAgainstMarkRead(kind: StoreKind, deletes: Bool) async throws {
        try await TestServer.run(kind) { server in
            try await server.upsert("alice", "bob")
            try await server.createChannel("messaging:cl", members: ["alice", "bob"], createdBy: "alice")
            for id in ["cl1", "cl2", "cl3"] { try await server.send("messaging:cl", id: id, from: "alice") }
            let store = try #require(server.store as? SQLStore)
            let channel = try #require(try await store.channel(ChannelID(type: "messaging", id: "cl")))
            // Held after locking the members, before zeroing their counts, while bob reads the channel.
            _ = try await Self.interleave(
                kind, store, at: Pause(before: { $0.hasPrefix("UPDATE member SET unread = 0,") }),
                {
                    if deletes {
                        _ = try await store.deleteChannel(channel, hard: false, by: nil, now: .now())
                    } else {
                        _ = try await store.truncateChannel(channel, hard: false, by: nil, now: .now())
                    }
                },
                against: {
                    let reply = try await server.call(
                        .post, "/channels/messaging/cl/read", body: #"{"user": {"id": "bob"}}"#)
                    #expect(reply.status < 500, "\(reply.body)")
                },
                waitingOn: ["SELECT * FROM ticks_moves"])
            #expect(try await store.unreadTotals(of: "bob") == UnreadTotals(messages: 0, channels: 0))
            try await Self.expectNothingToRecount(store)
        }
    }

    @Test(
        "add members: a message sent while the newcomer is being added is unread for them, once",
        arguments: StoreKind.all)
    func addMemberAgainstSend(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await server.upsert("alice", "bob", "carol")
            try await server.createChannel("messaging:am", members: ["alice", "bob"], createdBy: "alice")
            try await server.send("messaging:am", id: "am1", from: "alice")
            let store = try #require(server.store as? SQLStore)
            let channel = try #require(try await store.channel(ChannelID(type: "messaging", id: "am")))
            // carol is added at the channel's newest message, held before her row is written, while alice sends.
            _ = try await Self.interleave(
                kind, store, at: Pause(before: { $0.hasPrefix("INSERT INTO member") }),
                { try await store.addMembers(["carol"], to: channel, maxMembers: 100, now: .now()) },
                against: { try await server.send("messaging:am", id: "am2", from: "alice") },
                waitingOn: ["SELECT c.pk, c.type, c.id"])
            #expect(try await store.unreadTotals(of: "carol") == UnreadTotals(messages: 1, channels: 1))
            try await Self.expectNothingToRecount(store)
        }
    }

    @Test(
        "delete users' conversations: a member added while the delete waits saves the channel",
        arguments: StoreKind.all)
    func conversationAgainstAddMember(kind: StoreKind) async throws {
        try await kind.withStore { store in
            _ = try await store.upsertUsers([User(id: "a"), User(id: "b"), User(id: "c")], now: .now())
            let cid = ChannelID(type: "messaging", id: "cv")
            let (channel, _) = try await store.createChannel(cid, createdBy: "a", memberIDs: ["a", "b"], custom: [:], now: .now())
            // c is added, held after the channel's lock, before c's row; a's conversations are deleted meanwhile.
            let deleted = Mutex<[String]??>(nil)
            _ = try await Self.interleave(
                kind, try #require(store as? SQLStore), at: Pause(before: { $0.hasPrefix("INSERT INTO member") }),
                { try await store.addMembers(["c"], to: channel, maxMembers: 100, now: .now()) },
                against: {
                    let members = try await store.deleteConversation(channel, of: "a", hard: false, now: .now())
                    deleted.withLock { $0 = .some(members) }
                },
                waitingOn: ["SELECT c.pk, c.type, c.id"])
            #expect(deleted.withLock { $0 } == .some(nil))
            #expect(try await store.channel(cid)?.memberCount == 3)
        }
    }

    @Test(
        "two creators of one channel (a distinct channel's get-or-create) at once: one channel, its members once",
        arguments: StoreKind.all)
    func createAgainstCreate(kind: StoreKind) async throws {
        try await kind.withStore { store in
            _ = try await store.upsertUsers([User(id: "a"), User(id: "b")], now: .now())
            let cid = ChannelID(type: "messaging", id: "!members-cc")
            @Sendable func create() async throws -> (channel: ChannelRecord, created: Bool) {
                try await store.createChannel(cid, createdBy: "a", memberIDs: ["a", "b"], custom: [:], now: .now())
            }
            // The first is held after inserting the channel, before its members; the second creates it too.
            let second = Mutex<(channel: ChannelRecord, created: Bool)?>(nil)
            let first = try await Self.interleave(
                kind, store, at: Pause(before: { $0.hasPrefix("INSERT INTO member") }), { try await create() },
                against: {
                    let made = try await create()
                    second.withLock { $0 = made }
                },
                waitingOn: ["INSERT INTO channel"])
            let other = try #require(second.withLock { $0 })
            #expect(first.created != other.created, "exactly one of the two made it")
            #expect(first.channel.pk == other.channel.pk)
            let found = try #require(try await store.channel(cid))
            #expect(found.memberCount == 2)
            #expect(try await store.memberIDs(of: found).sorted() == ["a", "b"])
        }
    }

    @Test(
        "a user's privacy changed while they mark read: their member rows before their user row, as a move takes them, so no deadlock",
        arguments: StoreKind.all)
    func privacyAgainstMarkRead(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await server.upsert("alice", "bob")
            try await server.createChannel("messaging:pv", members: ["alice", "bob"], createdBy: "alice")
            try await server.send("messaging:pv", id: "pv1", from: "alice")
            let store = try #require(server.store as? SQLStore)
            let before = store.health.retries(.deadlock)
            let hidden = UserEdit(id: "bob") { user in
                var user = user
                user.privacySettings = PrivacySettings(readReceipts: .init(enabled: false))
                return user
            }
            // bob's update held before it copies his privacy onto his member rows, while he reads.
            _ = try await Self.interleave(
                kind, store, at: Pause(before: { $0.hasPrefix("UPDATE member SET reads_shared") }),
                { try await store.updateUsers([hidden], now: .now()) },
                against: { _ = try await server.markRead("messaging:pv", "bob") },
                waitingOn: ["SELECT * FROM ticks_moves"])
            #expect(store.health.retries(.deadlock) == before, "the two waited for each other in a circle")
            #expect(try await store.unreadTotals(of: "bob") == UnreadTotals(messages: 0, channels: 0))
            try await Self.expectNothingToRecount(store)
        }
    }

    @Test(
        "many nodes take the webhook sender's lease at once, after it ran out: one holds it", arguments: StoreKind.all)
    func leaseAgainstLease(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let start = Timestamp.now()
            #expect(
                try await store.takeWebhookLease(
                    node: "old", now: start, until: Timestamp(microseconds: start.microseconds + 1_000_000)))
            let later = Timestamp(microseconds: start.microseconds + 2_000_000)
            let holders = try await withThrowingTaskGroup(of: String?.self) { group in
                for node in (0..<12).map({ "node-\($0)" }) {
                    group.addTask {
                        try await store.takeWebhookLease(
                            node: node, now: later, until: Timestamp(microseconds: later.microseconds + 30_000_000))
                            ? node : nil
                    }
                }
                return try await group.reduce(into: [String]()) { if let node = $1 { $0.append(node) } }
            }
            #expect(holders.count == 1, "\(holders)")
        }
    }

    @Test(
        "mark all read while the user marks one channel read on another device: every member row before the user's row, so no deadlock",
        arguments: StoreKind.all)
    func markAllReadAgainstMarkRead(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await server.upsert("alice", "bob")
            for channel in ["ma1", "ma2"] {
                try await server.createChannel("messaging:\(channel)", members: ["alice", "bob"], createdBy: "alice")
                try await server.send("messaging:\(channel)", id: "\(channel)-1", from: "alice")
            }
            let store = try #require(server.store as? SQLStore)
            let before = store.health.retries(.deadlock)
            // Held before reading bob's cursors in the second channel (his first channel moved,
            // his count there changed), while he reads the second channel elsewhere.
            _ = try await Self.interleave(
                kind, store,
                at: Pause(before: { $0.hasPrefix("SELECT read_seq, delivered_seq FROM member") }, skipping: 1),
                { try await store.markAllRead("bob", audience: ReceiptAudience(fullChannelLimit: 100), now: .now()) },
                against: { _ = try await server.markRead("messaging:ma2", "bob") },
                waitingOn: ["SELECT * FROM ticks_moves"])
            #expect(store.health.retries(.deadlock) == before, "the two waited for each other in a circle")
            #expect(try await store.unreadTotals(of: "bob") == UnreadTotals(messages: 0, channels: 0))
            try await Self.expectNothingToRecount(store)
        }
    }

    @Test(
        "mark unread while a message after its new cursor is deleted: the deleted message is not counted, nor taken out twice",
        arguments: StoreKind.all)
    func markUnreadAgainstDelete(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await server.upsert("alice", "bob")
            try await server.createChannel("messaging:ud", members: ["alice", "bob"], createdBy: "alice")
            for id in ["ud1", "ud2", "ud3"] { try await server.send("messaging:ud", id: id, from: "alice") }
            _ = try await server.markRead("messaging:ud", "bob")
            let store = try #require(server.store as? SQLStore)
            let channel = try #require(try await store.channel(ChannelID(type: "messaging", id: "ud")))
            // ud3's delete held after marking it deleted, before taking it out of the counts of
            // those whose cursor was before it (not bob's), while bob marks unread from ud1.
            _ = try await Self.interleave(
                kind, store, at: Pause(before: { $0.hasPrefix("UPDATE member SET unread = unread - 1") }),
                { try await store.deleteMessage(id: "ud3", hard: false, by: nil, now: .now()) },
                against: { _ = try await store.markUnread("bob", in: channel, from: "ud1", now: .now()) },
                waitingOn: ["SELECT c.pk, c.type, c.id"])
            #expect(try await store.unreadTotals(of: "bob") == UnreadTotals(messages: 2, channels: 1))
            try await Self.expectNothingToRecount(store)
        }
    }

    @Test(
        "mark all read while a message is sent: the member row's foreign key check does not wait for the send's channel lock",
        arguments: StoreKind.all)
    func markAllReadAgainstSend(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await server.upsert("alice", "bob")
            try await server.createChannel("messaging:fk", members: ["alice", "bob"], createdBy: "alice")
            try await server.send("messaging:fk", id: "fk1", from: "alice")
            let store = try #require(server.store as? SQLStore)
            let before = store.health.retries(.deadlock)
            // Held after moving bob's cursor (his member row changed once), before recounting it
            // (the second change, whose foreign key PostgreSQL checks), while alice sends.
            _ = try await Self.interleave(
                kind, store, at: Pause(before: { $0.hasPrefix("UPDATE member SET unread = ((SELECT lc.last_seq") }),
                { try await store.markAllRead("bob", audience: ReceiptAudience(fullChannelLimit: 100), now: .now()) },
                against: { try await server.send("messaging:fk", id: "fk2", from: "alice") },
                waitingOn: ["UPDATE member SET unread = unread + CASE", "SELECT * FROM ticks_send"])
            #expect(store.health.retries(.deadlock) == before, "the two waited for each other in a circle")
            #expect(try await store.unreadTotals(of: "bob") == UnreadTotals(messages: 1, channels: 1))
            try await Self.expectNothingToRecount(store)
        }
    }

    /// The hearers' privacy a change is told with (`HearersPrivacy`, R15) shapes only whom its
    /// events go to and feeds no count, so it needs no lock; what matters is that it is read by
    /// the change's own statements: a setting committed before them is the one both roads follow.
    @Test(
        "the hearers' privacy a receipt is told with is read in the receipt's own transaction",
        arguments: StoreKind.all)
    func hearersPrivacyAgainstSettingChange(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let now = Timestamp.now()
            let hiding = User(id: "alice", privacySettings: PrivacySettings(readReceipts: .init(enabled: false)))
            _ = try await store.upsertUsers([hiding, User(id: "bob")], now: now)
            let (channel, _) = try await store.createChannel(
                ChannelID(type: "messaging", id: "hearers"), createdBy: "alice", memberIDs: ["alice", "bob"],
                custom: [:], now: now)
            _ = try await store.sendMessage(
                NewMessage(id: "hearers1", userID: "alice", text: "t", custom: [:]), to: channel, now: now)
            // Held before the setting is read, after bob's cursor moved, while the app turns R15 on.
            let outcomes = try await Self.interleave(
                kind, store, at: Pause(before: { $0.contains("FROM app_setting") }),
                { try await store.markAllRead("bob", audience: ReceiptAudience(fullChannelLimit: 100), now: .now()) },
                against: { _ = try await store.updateAppOptions(.init(reciprocalReadReceipts: true)) },
                waitingOn: [])
            // PostgreSQL: the setting committed while the receipt was held; SQLite ran the receipt first.
            let expected =
                kind == .postgres ? HearersPrivacy(reciprocal: true, hidingReads: ["alice"]) : HearersPrivacy()
            #expect(outcomes.map(\.hearers) == [expected])
        }
    }
}
