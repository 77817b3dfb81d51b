import Foundation
import Synchronization
import Testing
import TicksProtocol
import TicksReceipts
import TicksTestSupport

@testable import TicksServer

/// PostgreSQL's sends into one channel that queued behind another share one
/// transaction (`PostgresEngine.runQueued`, docs/storage.md "Round trips per
/// operation"): numbered in the order they came, with the outcomes each would
/// have had alone, one commit for all; a send refused in a group is refused
/// alone and the others commit; the authors' rows are locked before R13's
/// advisory lock, so a mark read of one of them waits instead of
/// deadlocking. On SQLite the same sends run through its group commit, and
/// the same outcomes are checked.
@Suite("Sends grouped into one transaction")
struct SendGroupsTests {
    typealias Sent = Result<SendOutcome, any Error>

    /// `sends` (id, author) into `channel`: on PostgreSQL queued, each after the one before,
    /// behind a send of a's (`held`) kept before its COMMIT, then let go together; on SQLite all at
    /// once. `hooks` gives a send's caller a `PostgresSession.beforeStatement`; `whileGrouped`
    /// runs once the first is let go (and, with a hook, once that hook holds its send).
    static func queued(
        _ kind: StoreKind, _ store: SQLStore, _ channel: ChannelRecord, held: String, _ sends: [(String, String)],
        hooks: [String: InterleavingTests.Pause] = [:], whileGrouped: (@Sendable () async throws -> Void)? = nil
    ) async throws -> [Sent] {
        @Sendable func send(_ id: String, by author: String) async -> Sent {
            do {
                return .success(
                    try await store.sendMessage(
                        NewMessage(id: id, userID: author, text: id, custom: [:]), to: channel, now: .now()))
            } catch {
                return .failure(error)
            }
        }
        guard kind == .postgres else {
            _ = try await send(held, by: "a").get()
            var results: [Sent] = []
            for (id, author) in sends { results.append(await send(id, by: author)) }
            try await whileGrouped?()
            return results
        }
        let turns = try #require(store.unbounded as? PostgresEngine).turns
        let first = InterleavingTests.Pause(before: { $0 == "COMMIT" })
        let firstTask = Task {
            defer { first.pathEnded() }
            return await PostgresSession.$beforeStatement.withValue(first.hook) { await send(held, by: "a") }
        }
        await first.waitUntilHeld()
        try #require(first.held, "the first send was not held before its COMMIT")
        var tasks: [Task<Sent, Never>] = []
        for (n, (id, author)) in sends.enumerated() {
            let hook = hooks[id]
            tasks.append(Task {
                guard let hook else { return await send(id, by: author) }
                defer { hook.pathEnded() }
                return await PostgresSession.$beforeStatement.withValue(hook.hook) { await send(id, by: author) }
            })
            try await until { turns.waitingCount(channel.pk) == n + 1 }
        }
        first.release()
        _ = try await firstTask.value.get()
        for hook in hooks.values { await hook.waitUntilHeld() }
        try await whileGrouped?()
        for hook in hooks.values { hook.release() }
        var results: [Sent] = []
        for task in tasks { results.append(await task.value) }
        return results
    }

    /// Waits until `condition` holds, failing past the suite's patience.
    static func until(sourceLocation: SourceLocation = #_sourceLocation, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + Patience.wait
        while !condition() {
            try #require(ContinuousClock.now < deadline, "the condition never held", sourceLocation: sourceLocation)
            try await Task.sleep(for: .milliseconds(2))
        }
    }

    /// The transactions that wrote `ids` (PostgreSQL's `xmin`): how many distinct.
    static func transactions(_ store: SQLStore, _ ids: [String]) async throws -> Int {
        let query: StoreQuery = "SELECT count(DISTINCT xmin::text) FROM message WHERE \(in: "id", ids)"
        let count: Int64 = try await store.engine.readOne { Step.row(query).map { try $0?.int(0) ?? 0 } }
        return Int(count)
    }

    /// The mark read started while a group runs.
    final class MarkRead: Sendable {
        let task = Mutex<Task<CursorOutcome, any Error>?>(nil)
    }

    static let sends = [("x1", "a"), ("x2", "b"), ("x3", "c"), ("x4", "a"), ("x5", "b")]

    @Test(
        "sends queued behind a send share one transaction, numbered in the order they came, each outcome as if sent alone",
        arguments: StoreKind.all)
    func oneTransaction(kind: StoreKind) async throws {
        try await kind.withStore { (store: SQLStore) async throws in
            // The same sends, one after another, into a channel of their own: what each would be alone.
            let alone = try await UnreadPositionsTests.channel(store, "alone", now: .now())
            try await UnreadPositionsTests.send(store, "m1", by: "b", to: alone)
            var expected: [SendOutcome] = []
            for (id, author) in [("h0", "a")] + Self.sends {
                expected.append(
                    try await store.sendMessage(
                        NewMessage(id: "alone-\(id)", userID: author, text: id, custom: [:]), to: alone, now: .now()))
            }
            let channel = try await UnreadPositionsTests.channel(store, "grouped", now: .now())
            try await UnreadPositionsTests.send(store, "n1", by: "b", to: channel)
            let before = (store.unbounded as? PostgresEngine)?.turns.statistics
            let results = try await Self.queued(kind, store, channel, held: "h0", Self.sends)
            for (n, result) in results.enumerated() {
                let outcome = try result.get()
                let alone = expected[n + 1]
                #expect(outcome.created && outcome.message.seq == Seq(n + 3), "\(outcome.message.id) in the order it came")
                #expect(
                    outcome.reachedAll.map { "\($0.kind) \($0.author) \($0.seq)" }
                        == alone.reachedAll.map { "\($0.kind) \($0.author) \($0.seq)" },
                    "\(outcome.message.id): what it made read by all, as alone")
                #expect(outcome.recipients == alone.recipients && outcome.everyMember == alone.everyMember)
            }
            if kind == .postgres {
                let turns = try #require((store.unbounded as? PostgresEngine)?.turns)
                #expect(turns.statistics.groups == (before?.groups ?? 0) + 1)
                #expect(turns.statistics.groupedCalls == (before?.groupedCalls ?? 0) + 5)
                #expect(try await Self.transactions(store, Self.sends.map(\.0)) == 1, "one transaction for the five")
                #expect(try await Self.transactions(store, ["h0", "x1"]) == 2, "the first committed on its own")
            }
            // R4: each author has read up to their last; R7 counts the rest.
            for (user, read) in [("a", 6), ("b", 7), ("c", 5)] {
                #expect(try await store.member(user, of: channel)?.cursors.read == Seq(read), "\(user)")
            }
            #expect(try await UnreadPositionsTests.unread(store, ["a", "b", "c"]) == [2, 0, 4])
            try await InterleavingTests.expectNothingToRecount(store)
        }
    }

    @Test("a send refused in a group is refused alone; the sends beside it commit", arguments: StoreKind.all)
    func refusalIsItsOwn(kind: StoreKind) async throws {
        try await kind.withStore { (store: SQLStore) async throws in
            let elsewhere = try await UnreadPositionsTests.channel(store, "elsewhere", now: .now())
            try await UnreadPositionsTests.send(store, "taken", by: "a", to: elsewhere)
            let channel = try await UnreadPositionsTests.channel(store, "refusal", now: .now())
            let results = try await Self.queued(
                kind, store, channel, held: "h0", [("y1", "a"), ("taken", "b"), ("y3", "c")])
            #expect(try results[0].get().message.seq == 2)
            #expect(throws: StoreError.messageIDInOtherChannel("taken")) { try results[1].get() }
            #expect(try results[2].get().message.seq == 3, "numbered right after y1: the refused one took no number")
            if kind == .postgres {
                #expect(try await Self.transactions(store, ["y1", "y3"]) == 2, "the group rolled back, each ran alone")
            }
            #expect(try await store.member("c", of: channel)?.cursors.read == 3)
            try await InterleavingTests.expectNothingToRecount(store)
        }
    }

    @Test(
        "a group of two authors against a mark read of the second: the authors' rows before R13's lock, so no deadlock",
        arguments: StoreKind.all)
    func authorsLockedFirst(kind: StoreKind) async throws {
        try await kind.withStore { (store: SQLStore) async throws in
            let channel = try await UnreadPositionsTests.channel(store, "locks", now: .now())
            try await UnreadPositionsTests.send(store, "m1", by: "c", to: channel)
            let deadlocks = store.health.retries(.deadlock)
            // z2 (b's) is held before its send's call, after z1 (a's) took R13's advisory lock in
            // the same transaction; meanwhile b marks m1 read, which locks b's row, then that lock.
            let z2 = InterleavingTests.Pause(before: { $0.hasPrefix("SELECT * FROM \(SendFunction.name)(") })
            let marked = MarkRead()
            let results = try await Self.queued(
                kind, store, channel, held: "h0", [("z1", "a"), ("z2", "b")],
                hooks: kind == .postgres ? ["z2": z2] : [:],
                whileGrouped: {
                    let task = Task {
                        try await store.markRead(
                            "b", in: channel.cid, upTo: "m1", audience: UnreadPositionsTests.everyone, now: .now())
                    }
                    marked.task.withLock { $0 = task }
                    guard kind == .postgres else { return }
                    // Up to two minutes (a saturated machine): waiting for b's row, which the group holds.
                    let started = ContinuousClock.now
                    while try await !InterleavingTests.waiting(store, on: ["SELECT * FROM \(MovesFunction.name)("]) {
                        try #require(ContinuousClock.now - started < .seconds(120), "the mark read never waited")
                        try await Task.sleep(for: .milliseconds(20))
                    }
                })
            #expect(try results.map { try $0.get().message.seq } == [3, 4])
            _ = try await #require(marked.task.withLock { $0 }).value
            #expect(store.health.retries(.deadlock) == deadlocks, "the group and the mark read waited in a circle")
            #expect(try await store.member("b", of: channel)?.cursors.read == 4, "b read z2 and all before it (R4)")
            try await InterleavingTests.expectNothingToRecount(store)
        }
    }
}
