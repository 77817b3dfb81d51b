import ServiceContextModule
import Synchronization
import Testing
import TicksProtocol
import TicksReceipts
import TicksTestSupport

@testable import TicksServer

/// `MoveBatcher` as a state machine, without PostgreSQL: each batch waits in a
/// stand-in database until the test ends it, and the test knows each receipt
/// arrived before it lets a batch end, so it says exactly which receipts went
/// together and in which order. Nothing sleeps or waits for a clock. The time
/// limit is for a receipt or a lane lost by a mistake: it hangs its test rather
/// than failing it. Ten minutes, not one: a full parallel run on two cores starts a
/// test's body late (CI took over 60 s for a PostgreSQL-backed suite, stop 80).
@Suite("MoveBatcher", .timeLimit(.minutes(10)))
struct MoveBatcherTests {
    @Test("a lone receipt with a free lane runs at once, alone; when nothing waits the lane is freed")
    func loneReceipt() async throws {
        let database = HeldDatabase(lanes: 1)
        let (alice, first) = try await database.sendAlone("alice")
        #expect(first.labels == ["alice@general"])
        first.finish()
        #expect(try await alice.outcome()?.at == alice.move.at)

        // Nothing waited, so the lane was freed: the next receipt finds it free and runs at once, alone, too.
        try await database.laneFreed()
        let (bob, second) = try await database.sendAlone("bob")
        #expect(second.labels == ["bob@general"])
        second.finish()
        #expect(try await bob.outcome()?.at == bob.move.at)
        #expect(database.batcher.statistics == .init(batches: 2, moves: 2))
    }

    @Test("receipts that arrive while the lane is busy go together in the next batch, in arrival order")
    func busyLane() async throws {
        let database = HeldDatabase(lanes: 1)
        let (alice, first) = try await database.sendAlone("alice")
        let later = [
            try await database.send("bob"), try await database.send("carol"), try await database.send("dave"),
        ]
        // They wait: the only lane is busy.
        try #require(database.batcher.statistics == .init(batches: 1, moves: 1))
        first.finish()
        let second = try await database.nextBatch()
        try #require(second.labels == ["bob@general", "carol@general", "dave@general"])
        second.finish()
        #expect(try await alice.outcome()?.at == alice.move.at)
        for receipt in later { #expect(try await receipt.outcome()?.at == receipt.move.at) }
        #expect(database.batcher.statistics == .init(batches: 2, moves: 4))
    }

    @Test("a batch runs outside the trace of the request that started its lane")
    func batchOutsideTheRequestsTrace() async throws {
        let traced = Mutex<[Bool]>([])
        let batcher = MoveBatcher { moves, _ in
            traced.withLock { $0.append(ServiceContext.current != nil) }
            return moves.map { .success(HeldDatabase.outcome(of: $0)) }
        }
        var request = ServiceContext.topLevel
        request[RequestMark.self] = "alice's request"
        let move = BatchedMove(
            kind: .read, userID: "alice", channel: ChannelID(type: "messaging", id: "general"), messageID: nil,
            at: Timestamp(microseconds: 1), audience: ReceiptAudience(fullChannelLimit: 100))
        let outcome = try await ServiceContext.withValue(request) {
            // The request's own context is there while it waits.
            #expect(ServiceContext.current?[RequestMark.self] == "alice's request")
            return try await batcher.submit(move)
        }
        #expect(outcome?.at == move.at)
        #expect(traced.withLock { $0 } == [false])
    }

    private enum RequestMark: ServiceContextKey {
        typealias Value = String
    }

    @Test("limit caps a batch; the rest follow in arrival order")
    func limitCapsABatch() async throws {
        let database = HeldDatabase(lanes: 1, limit: 2)
        let (_, first) = try await database.sendAlone("alice")
        for user in ["bob", "carol", "dave", "erin", "frank"] { _ = try await database.send(user) }
        first.finish()
        for expected in [["bob@general", "carol@general"], ["dave@general", "erin@general"], ["frank@general"]] {
            let batch = try await database.nextBatch()
            // Required: after a wrong batch the next one may never come.
            try #require(batch.labels == expected)
            batch.finish()
        }
        #expect(database.batcher.statistics == .init(batches: 4, moves: 6))
    }

    @Test("a second receipt of the same member waits for the next batch and keeps its arrival order")
    func memberOncePerBatch() async throws {
        let database = HeldDatabase(lanes: 1)
        let (_, first) = try await database.sendAlone("alice")
        let bob = try await database.send("bob")
        let alice = try await database.send("alice")
        let aliceAgain = try await database.send("alice")
        let carol = try await database.send("carol")
        // The same user in another channel is another member: it may share the batch.
        let aliceElsewhere = try await database.send("alice", in: "random")
        let bobAgain = try await database.send("bob")
        first.finish()

        let second = try await database.nextBatch()
        #expect(second.labels == ["bob@general", "alice@general", "carol@general", "alice@random"])
        try #require(second.moves.map(\.at) == [bob, alice, carol, aliceElsewhere].map(\.move.at))
        second.finish()
        let third = try await database.nextBatch()
        try #require(third.moves.map(\.at) == [aliceAgain, bobAgain].map(\.move.at))
        third.finish()
        for receipt in [bob, alice, aliceAgain, carol, aliceElsewhere, bobAgain] {
            #expect(try await receipt.outcome()?.at == receipt.move.at)
        }
    }

    @Test("with two lanes two batches run at once, never a third")
    func twoLanes() async throws {
        let database = HeldDatabase(lanes: 2)
        let (_, first) = try await database.sendAlone("alice", in: "a")
        // The second lane is free: bob goes at once, while alice's batch runs.
        let (_, second) = try await database.sendAlone("bob", in: "b")
        _ = try await database.send("carol", in: "c")
        _ = try await database.send("dave", in: "d")
        // Both lanes are busy: carol and dave wait, no third batch is taken.
        try #require(database.batcher.statistics == .init(batches: 2, moves: 2))

        // The lane that ends takes what waits; the other goes on.
        first.finish()
        let third = try await database.nextBatch()
        try #require(third.labels == ["carol@c", "dave@d"])
        _ = try await database.send("erin", in: "e")
        try #require(database.batcher.statistics == .init(batches: 3, moves: 4))
        second.finish()
        let fourth = try await database.nextBatch()
        #expect(fourth.labels == ["erin@e"])
        third.finish()
        fourth.finish()
        #expect(database.batcher.statistics == .init(batches: 4, moves: 5))

        // Both lanes were freed: two receipts run at once again, each alone.
        try await database.laneFreed()
        try await database.laneFreed()
        let (_, fifth) = try await database.sendAlone("frank", in: "f")
        let (_, sixth) = try await database.sendAlone("grace", in: "g")
        fifth.finish()
        sixth.finish()
    }

    @Test("a channel is in one batch in the database at a time: its next receipts wait for that batch, in order")
    func channelInOneBatch() async throws {
        let database = HeldDatabase(lanes: 2)
        let (alice, first) = try await database.sendAlone("alice")
        // Another member of alice's channel waits, though a lane is free: the batches would wait on
        // each other in the database (R13's lock of the channel, a member's row).
        let bob = try await database.send("bob")
        let aliceAgain = try await database.send("alice")
        try #require(database.batcher.statistics == .init(batches: 1, moves: 1))
        // A receipt in another channel takes the free lane, passing them.
        let (carol, second) = try await database.sendAlone("carol", in: "random")
        #expect(second.labels == ["carol@random"])
        second.finish()
        // Its lane finds only the busy channel's receipts: it takes none and is freed.
        try await database.laneFreed()
        try #require(database.batcher.statistics == .init(batches: 2, moves: 2))

        // Alice's batch ends: its lane takes the channel's receipts, each member once, in arrival order.
        first.finish()
        let third = try await database.nextBatch()
        try #require(third.moves.map(\.at) == [bob.move.at, aliceAgain.move.at])
        third.finish()
        for receipt in [alice, bob, aliceAgain, carol] {
            #expect(try await receipt.outcome()?.at == receipt.move.at)
        }
        #expect(database.batcher.statistics == .init(batches: 3, moves: 4))
    }

    @Test("a failing run fails exactly the receipts of its batch; later batches still run")
    func failingBatch() async throws {
        let database = HeldDatabase(lanes: 1)
        let (alice, first) = try await database.sendAlone("alice")
        let bob = try await database.send("bob")
        let carol = try await database.send("carol")
        first.finish()
        let second = try await database.nextBatch()
        try #require(second.labels == ["bob@general", "carol@general"])
        let dave = try await database.send("dave")
        second.fail(StatementFailed())
        let third = try await database.nextBatch()
        try #require(third.labels == ["dave@general"])
        third.finish()

        #expect(try await alice.outcome()?.at == alice.move.at)
        await #expect(throws: StatementFailed.self) { try await bob.outcome() }
        await #expect(throws: StatementFailed.self) { try await carol.outcome() }
        #expect(try await dave.outcome()?.at == dave.move.at)
    }

    @Test("a run that answers fewer receipts than it was given fails them all: no caller is left waiting")
    func shortAnswer() async throws {
        let database = HeldDatabase(lanes: 1)
        let (alice, first) = try await database.sendAlone("alice")
        let bob = try await database.send("bob")
        let carol = try await database.send("carol")
        first.finish()
        let second = try await database.nextBatch()
        try #require(second.labels == ["bob@general", "carol@general"])
        second.finish([.success(HeldDatabase.outcome(of: second.moves[0]))])

        #expect(try await alice.outcome()?.at == alice.move.at)
        await #expect(throws: StoreError.self) { try await bob.outcome() }
        await #expect(throws: StoreError.self) { try await carol.outcome() }
    }

    @Test("each receipt gets its own outcome from its batch: a cursor change, a refusal or nothing")
    func ownOutcomes() async throws {
        let database = HeldDatabase(lanes: 1)
        let (_, first) = try await database.sendAlone("alice")
        let bob = try await database.send("bob")
        let carol = try await database.send("carol")
        let dave = try await database.send("dave")
        first.finish()
        let second = try await database.nextBatch()
        try #require(second.labels == ["bob@general", "carol@general", "dave@general"])
        second.finish([.success(HeldDatabase.outcome(of: bob.move)), .failure(Refused(user: "carol")), .success(nil)])

        #expect(try await bob.outcome()?.at == bob.move.at)
        await #expect(throws: Refused(user: "carol")) { try await carol.outcome() }
        #expect(try await dave.outcome() == nil)
    }

    @Test("statistics count every batch taken and its receipts, a failed batch too")
    func statistics() async throws {
        let database = HeldDatabase(lanes: 1, limit: 2)
        #expect(database.batcher.statistics == .init(batches: 0, moves: 0))
        let (_, first) = try await database.sendAlone("alice")
        for user in ["bob", "carol", "dave"] { _ = try await database.send(user) }
        try #require(database.batcher.statistics == .init(batches: 1, moves: 1))
        first.finish()
        let second = try await database.nextBatch()
        try #require(database.batcher.statistics == .init(batches: 2, moves: 3))
        second.fail(StatementFailed())
        let third = try await database.nextBatch()
        third.finish()
        #expect(database.batcher.statistics == .init(batches: 3, moves: 4))
    }

    @Test("past its deadline a caller is answered 503; a receipt still waiting is taken out and never runs")
    func deadlines() async throws {
        let (clock, deadline, database) = HeldDatabase.withDeadline()
        let (alice, first) = try await database.sendAlone("alice")
        let bob = try await database.send("bob")
        // Both callers' deadlines wait on the clock; the batch in the database never ends by itself.
        while deadline.waitingCalls < 2 || clock.sleepers < 1 { await Task.yield() }
        clock.advance(by: .seconds(2))
        for waiting in [alice, bob] {
            await #expect(throws: StoreError.unavailable(.timedOut(.seconds(2)))) { try await waiting.outcome() }
        }
        // The batch ends after its caller stopped waiting: nothing is answered twice, and bob,
        // taken out of the queue, never runs; the lane is free for the next receipt.
        first.finish()
        try await database.laneFreed()
        #expect(database.batcher.statistics == .init(batches: 1, moves: 1))
        let (carol, third) = try await database.sendAlone("carol")
        third.finish()
        #expect(try await carol.outcome()?.at == carol.move.at)
    }

    @Test("a batch still in the database at its deadline is left: its lane is cancelled, a new one runs what waits")
    func batchLeftAtItsDeadline() async throws {
        let (clock, deadline, database) = HeldDatabase.withDeadline()
        // Alice's batch never ends by itself (a statement postgres-nio leaves unanswered).
        let (alice, stuck) = try await database.sendAlone("alice")
        while clock.sleepers < 1 { await Task.yield() }
        clock.advance(by: .seconds(1))
        // Bob arrives a second later; the lane is busy, so he waits, his deadline at 3 s.
        let bob = try await database.send("bob")
        clock.advance(by: .seconds(1))
        await #expect(throws: StoreError.unavailable(.timedOut(.seconds(2)))) { try await alice.outcome() }
        // At 2 s the batch is left: bob, with a second to go, runs in a new lane.
        let second = try await database.nextBatch()
        try #require(second.labels == ["bob@general"])
        second.finish()
        #expect(try await bob.outcome()?.at == bob.move.at)
        #expect(try await database.runEnded() == false)
        try await database.laneFreed()
        // The left lane was cancelled; when its run ends at last, it answers no one and frees no
        // lane: the one lane is free, and carol's receipt finds it so.
        stuck.finish()
        #expect(try await database.runEnded() == true)
        try await database.leftLaneEnded()
        let (carol, third) = try await database.sendAlone("carol")
        // One lane, not two: dave waits for carol's batch.
        let dave = try await database.send("dave")
        #expect(database.batcher.statistics == .init(batches: 3, moves: 3))
        third.finish()
        let fourth = try await database.nextBatch()
        #expect(fourth.labels == ["dave@general"])
        fourth.finish()
        for receipt in [carol, dave] { #expect(try await receipt.outcome()?.at == receipt.move.at) }
        #expect(database.batcher.statistics == .init(batches: 4, moves: 4))
    }

    @Test("an answer before the deadline is the answer, and its deadline stops waiting")
    func answerBeforeDeadline() async throws {
        let (clock, deadline, database) = HeldDatabase.withDeadline()
        let (alice, batch) = try await database.sendAlone("alice")
        batch.finish()
        #expect(try await alice.outcome()?.at == alice.move.at)
        #expect(deadline.waitingCalls == 0)
        // Past the deadline, the answer stands and the watch ends.
        clock.advance(by: .seconds(2))
        while clock.sleepers > 0 { await Task.yield() }
    }

}

/// A run that failed as a whole, as a statement or a commit can.
private struct StatementFailed: Error {}

/// One receipt's own refusal, as `OneStatementMove` gives one (not a member, no such message).
private struct Refused: Error, Equatable {
    var user: String
}

/// PostgreSQL's place: each batch `run` gets waits until the test ends it.
final class HeldDatabase {
    let batcher: MoveBatcher
    private var batches: AsyncStream<Batch>.Iterator
    private var arrivals: AsyncStream<BatchedMove>.Iterator
    private var freedLanes: AsyncStream<Void>.Iterator
    /// For each run that ended, whether its lane's task was cancelled by then.
    private var endedRuns: AsyncStream<Bool>.Iterator
    private var endedLeftLanes: AsyncStream<Void>.Iterator
    /// The time of the last receipt sent: each gets its own, so `at` tells receipts apart.
    private var clock: Int64 = 0

    /// A batch in the database, waiting for the test to end it.
    struct Batch: Sendable {
        let moves: [BatchedMove]
        let end: CheckedContinuation<MoveBatcher.Outcomes, any Error>

        /// Its moves in order, each as `user@channel`.
        var labels: [String] { moves.map { "\($0.userID)@\($0.channel.id)" } }

        /// Ends it as committed: each move gets `outcomes`, by default its own `outcome(of:)`.
        func finish(_ outcomes: MoveBatcher.Outcomes? = nil) {
            end.resume(returning: outcomes ?? moves.map { .success(HeldDatabase.outcome(of: $0)) })
        }

        /// Ends it with `error`, as a failed statement or commit.
        func fail(_ error: any Error) { end.resume(throwing: error) }
    }

    /// A receipt sent to the batcher, and the answer its caller gets.
    struct Sent: Sendable {
        let move: BatchedMove
        let answer: Task<CursorOutcome?, any Error>

        func outcome() async throws -> CursorOutcome? { try await answer.value }
    }

    init(lanes: Int, limit: Int = 64, deadline: StoreDeadline? = nil) {
        let (batches, batchStarted) = AsyncStream.makeStream(of: Batch.self)
        let (arrivals, moveArrived) = AsyncStream.makeStream(of: BatchedMove.self)
        let (freedLanes, laneFreed) = AsyncStream.makeStream(of: Void.self)
        let (endedRuns, runEnded) = AsyncStream.makeStream(of: Bool.self)
        let (endedLeftLanes, leftLaneEnded) = AsyncStream.makeStream(of: Void.self)
        self.endedLeftLanes = endedLeftLanes.makeAsyncIterator()
        self.endedRuns = endedRuns.makeAsyncIterator()
        self.batches = batches.makeAsyncIterator()
        self.arrivals = arrivals.makeAsyncIterator()
        self.freedLanes = freedLanes.makeAsyncIterator()
        batcher = MoveBatcher(
            lanes: lanes, limit: limit, deadline: deadline, arrived: { moveArrived.yield($0) },
            laneFreed: { laneFreed.yield() }, leftLaneEnded: { leftLaneEnded.yield() }
        ) { moves, _ in
            let outcomes = try await withCheckedThrowingContinuation { end in
                batchStarted.yield(Batch(moves: moves, end: end))
            }
            runEnded.yield(Task.isCancelled)
            return outcomes
        }
    }

    /// One lane whose callers wait 2 s on a test's clock, with the clock and the deadline.
    static func withDeadline() -> (ManualClock, StoreDeadline, HeldDatabase) {
        let clock = ManualClock()
        let deadline = StoreDeadline(timeout: .seconds(2), time: clock.timeSource)
        return (clock, deadline, HeldDatabase(lanes: 1, deadline: deadline))
    }

    /// Sends a receipt of `user` in `channel`; returns once the batcher holds it.
    func send(_ user: String, in channel: String = "general") async throws -> Sent {
        clock += 1
        let move = BatchedMove(
            kind: .read, userID: user, channel: ChannelID(type: "messaging", id: channel), messageID: nil,
            at: Timestamp(microseconds: clock), audience: ReceiptAudience(fullChannelLimit: 100))
        let batcher = batcher
        let answer = Task { try await batcher.submit(move) }
        let arrived = try #require(await arrivals.next())
        #expect(arrived.at == move.at)
        return Sent(move: move, answer: answer)
    }

    /// Sends a receipt that finds a lane free: it must start a batch of its own at once, returned here.
    /// Required, so a receipt that waits instead fails the test rather than hanging it.
    func sendAlone(_ user: String, in channel: String = "general") async throws -> (Sent, Batch) {
        let taken = batcher.statistics.batches
        let sent = try await send(user, in: channel)
        // Taken before `send` returned, or never: nothing else would start it.
        try #require(batcher.statistics.batches == taken + 1, "\(user)'s receipt waits with a lane free")
        let batch = try await nextBatch()
        try #require(batch.moves.map(\.at) == [sent.move.at])
        return (sent, batch)
    }

    /// Returns once a lane was freed, in the order lanes are.
    func laneFreed() async throws {
        try #require(await freedLanes.next() != nil)
    }

    /// Whether the lane's task had been cancelled when the next batch to end ended.
    func runEnded() async throws -> Bool {
        try #require(await endedRuns.next())
    }

    /// Returns once a lane left at a batch's deadline ended, its run returned.
    func leftLaneEnded() async throws {
        try #require(await endedLeftLanes.next() != nil)
    }

    /// The next batch the batcher runs, once it is in the database.
    func nextBatch() async throws -> Batch {
        try #require(await batches.next())
    }

    /// The outcome the stand-in gives `move`: its member read up to message 1, at the move's time.
    static func outcome(of move: BatchedMove) -> CursorOutcome {
        let start = Timestamp(microseconds: 0)
        let update = ReceiptRules.markRead(Cursors(read: 0, delivered: 0), upTo: 1, newest: 1)
        return CursorOutcome(
            channel: ChannelRecord(
                pk: 1, cid: move.channel, createdBy: nil, custom: [:], lastSeq: 1,
                lastMessageAt: start, memberCount: 1, createdAt: start, updatedAt: start),
            config: ChannelConfig(
                name: move.channel.type, readEvents: true, deliveryEvents: true, createdAt: start, updatedAt: start),
            reader: User(id: move.userID), update: update,
            state: MemberState(
                userID: move.userID, joinedAt: start, channelRole: .member, cursors: update.cursors,
                readAt: move.at, deliveredAt: move.at, lastReadMessageID: "m1", lastDeliveredMessageID: "m1",
                unread: 0, firstUnreadMessageID: nil),
            totals: UnreadTotals(messages: 0, channels: 0), at: move.at, recipients: [move.userID])
    }
}
