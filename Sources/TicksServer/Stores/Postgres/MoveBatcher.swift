import Synchronization
import TicksProtocol

/// Group commit for PostgreSQL's receipts: marks read and delivered that
/// arrive while earlier ones are in the database wait, and go together as
/// one statement (`StoreSQL.moves`) and one commit, as SQLite's
/// `GroupCommitter` groups its writes. At most `lanes` batches run at once;
/// a receipt that finds a lane free goes at once, alone, so batching adds no
/// wait when the database keeps up. A batch holds each member at most once
/// (the statement locks each member's row once); a second receipt of the
/// same member waits for the next batch, in arrival order. With more than
/// one lane, a channel is in one batch in the database at a time: a second
/// batch holding it would wait there, on a member's row lock or R13's lock of
/// the channel, until the first commits, and hold its lane meanwhile; its
/// receipts wait here instead, for the lane of the batch that holds the
/// channel, in arrival order.
///
/// Each caller waits at most its deadline (`StoreDeadline`) from the moment it
/// arrives: past it, a receipt still waiting is taken out of the queue and
/// answered `StoreError.unavailable`, and one whose batch is in the database
/// is answered so too, its outcome unknown (a mark read or delivered is safe
/// to repeat: a cursor never moves back, R2). A batch's own run has a deadline
/// too, from its start, and runs in the lane's task (`DeadlineLease`): past
/// it, its connection is closed, its receipts are answered so, and the lane
/// is left where it waits and replaced by a new one, so no lane is held by a
/// connection that died. A receipt whose deadline has passed is not taken
/// into a batch.
final class MoveBatcher: Sendable {
    typealias Outcomes = [Result<CursorOutcome?, any Error>]

    private struct Waiter: Sendable {
        let move: BatchedMove
        let reply: Reply
        /// When its caller stops waiting (nil: never).
        let until: Duration?
    }

    /// A caller's continuation, resumed once: by its batch, or by its deadline (`StoreDeadline.watch`).
    private final class Reply: DeadlineCall {
        private let continuation: Mutex<CheckedContinuation<CursorOutcome?, any Error>?>
        private let timeout: Duration
        /// Takes it out of the queue if it still waits there.
        private let withdraw: @Sendable (Reply) -> Void

        init(
            _ continuation: CheckedContinuation<CursorOutcome?, any Error>, timeout: Duration,
            withdraw: @escaping @Sendable (Reply) -> Void
        ) {
            self.continuation = Mutex(continuation)
            self.timeout = timeout
            self.withdraw = withdraw
        }

        var isSettled: Bool { continuation.withLock { $0 == nil } }

        func expire() {
            // Still waiting: it never runs. In a batch: its outcome is not known here.
            withdraw(self)
            resume(with: .failure(StoreError.unavailable(.timedOut(timeout))))
        }

        func resume(with result: Result<CursorOutcome?, any Error>) {
            let continuation = continuation.withLock { continuation in
                defer { continuation = nil }
                return continuation
            }
            continuation?.resume(with: result)
        }
    }

    /// How the receipts were grouped so far.
    struct Statistics: Sendable, Equatable {
        var batches = 0
        var moves = 0
    }

    private struct State {
        var pending: [Waiter] = []
        var running = 0
        /// The channels of the batches in the database: a channel is in one at a time.
        var busy: Set<ChannelID> = []
        var statistics = Statistics()

        /// Takes `reply`'s waiter out of the queue, if it is there (not in a batch, not answered).
        mutating func withdraw(_ reply: Reply) {
            guard let index = pending.firstIndex(where: { $0.reply === reply }) else { return }
            pending.remove(at: index)
        }

        /// The oldest waiting moves, up to `limit`, each member once, none in a channel of a batch
        /// in the database (it waits for that batch, which takes it next) and none whose caller's
        /// deadline is `now` or past (the deadline's watch answers it); nil when none may go.
        mutating func takeBatch(limit: Int, now: Duration?) -> [Waiter]? {
            guard !pending.isEmpty else { return nil }
            var batch: [Waiter] = []
            var members = Set<String>()
            var left: [Waiter] = []
            for waiter in pending {
                let due = now.map { now in waiter.until.map { $0 <= now } ?? false } ?? false
                if batch.count < limit, !due, !busy.contains(waiter.move.channel),
                    members.insert(waiter.move.member).inserted
                {
                    batch.append(waiter)
                } else {
                    left.append(waiter)
                }
            }
            guard !batch.isEmpty else { return nil }
            pending = left
            for waiter in batch { busy.insert(waiter.move.channel) }
            statistics.batches += 1
            statistics.moves += batch.count
            return batch
        }

        /// `batch` left the database: its channels may go in another.
        mutating func ended(_ batch: [Waiter]) {
            for waiter in batch { busy.remove(waiter.move.channel) }
        }
    }

    private let state = Mutex(State())
    private let lanes: Int
    private let limit: Int
    private let arrived: @Sendable (BatchedMove) -> Void
    private let laneFreed: @Sendable () -> Void
    private let leftLaneEnded: @Sendable () -> Void
    private let run: @Sendable ([BatchedMove], DeadlineLease?) async throws -> Outcomes
    /// How long a caller waits; nil: as long as its batch takes (tests of the grouping).
    private let deadline: StoreDeadline?

    /// - Parameters:
    ///   - lanes: batches in the database at once. One by default: measured
    ///     on 2 cores (`bench/nodes`, medians of 3), one lane sustained
    ///     2,978 receipts/s at a 3,000/s target, two lanes 2,721, four about
    ///     2,600; more lanes mean smaller batches, more backends competing
    ///     for the cores and more waits on the same members' rows. Again on
    ///     2026-12-05, PostgreSQL on a core of its own and a channel in one
    ///     batch at a time (`bench/ab --postgres --pin`, medians of 3): two
    ///     lanes reached 0.89× one lane's saturation, p99 at 1,000/s 1.16×,
    ///     PostgreSQL's CPU a receipt 1.23–1.30×: smaller batches, each
    ///     call's fixed cost paid more often.
    ///   - limit: moves in one batch at most.
    ///   - arrived: told of each move once the batcher holds it (waiting, or in a batch that
    ///     starts); tests wait for it to know a receipt came before they let a batch end.
    ///   - laneFreed: told each time a lane ends because nothing waits; tests wait for it before
    ///     they count on a free lane.
    ///   - leftLaneEnded: told when a lane left at a batch's deadline ends at last, its run
    ///     returned; tests wait for it to know the lane touched nothing after.
    ///   - deadline: how long a caller waits for its receipt's outcome.
    ///   - run: runs a batch, one outcome per move, in order, in the lane's task under the
    ///     lease given (with a deadline): its store call runs within it (`BoundedEngine.within`).
    init(
        lanes: Int = 1, limit: Int = 64, deadline: StoreDeadline? = nil,
        arrived: @escaping @Sendable (BatchedMove) -> Void = { _ in },
        laneFreed: @escaping @Sendable () -> Void = {},
        leftLaneEnded: @escaping @Sendable () -> Void = {},
        run: @escaping @Sendable ([BatchedMove], DeadlineLease?) async throws -> Outcomes
    ) {
        precondition(lanes > 0 && limit > 0)
        self.lanes = lanes
        self.limit = limit
        self.arrived = arrived
        self.laneFreed = laneFreed
        self.leftLaneEnded = leftLaneEnded
        self.run = run
        self.deadline = deadline
    }

    var statistics: Statistics { state.withLock { $0.statistics } }

    /// Applies `move` in the next batch; its outcome, or its own refusal.
    func submit(_ move: BatchedMove) async throws -> CursorOutcome? {
        try await withCheckedThrowingContinuation { continuation in
            let reply = Reply(continuation, timeout: deadline?.timeout ?? .zero) { [weak self] reply in
                self?.state.withLock { $0.withdraw(reply) }
            }
            let now = deadline?.time.now
            let until = deadline.flatMap { deadline in now.map { $0 + deadline.timeout } }
            let batch = state.withLock { state -> [Waiter]? in
                state.pending.append(Waiter(move: move, reply: reply, until: until))
                guard state.running < lanes, let batch = state.takeBatch(limit: limit, now: now) else { return nil }
                state.running += 1
                return batch
            }
            arrived(move)
            deadline?.watch(reply)
            if let batch { startLane(with: batch) }
        }
    }

    /// Runs batches until nothing waits, then frees the lane; or until a batch's deadline
    /// leaves it (`leave(_:with:)`).
    private func startLane(with first: [Waiter]) {
        let lane = LaneTask()
        // Detached: the lane serves many requests, so it takes none of the first one's task-local
        // values (its trace context above all: the batch is no one request's child).
        lane.hold(
            Task.detached { [self] in
                var batch = first
                while true {
                    let lease = deadline?.lease { [weak self, batch] in self?.leave(lane, with: batch) }
                    let outcomes: Outcomes
                    do {
                        let answered = try await run(batch.map(\.move), lease)
                        // One answer per move, or a caller would wait for ever.
                        guard answered.count == batch.count else {
                            throw StoreError.inconsistent(
                                "\(answered.count) outcomes for a batch of \(batch.count) moves")
                        }
                        outcomes = answered
                    } catch {
                        outcomes = batch.map { _ in .failure(error) }
                    }
                    // Left at the batch's deadline: its receipts were answered and another lane
                    // took this one's place.
                    if let lease, !lease.end() {
                        leftLaneEnded()
                        return
                    }
                    for (waiter, outcome) in zip(batch, outcomes) { waiter.reply.resume(with: outcome) }
                    guard let next = next(after: batch) else {
                        laneFreed()
                        return
                    }
                    batch = next
                }
            })
    }

    /// The batch that follows `batch` in its lane; nil, and the lane freed, when none may go.
    private func next(after batch: [Waiter]) -> [Waiter]? {
        let now = deadline?.time.now
        return state.withLock { state -> [Waiter]? in
            state.ended(batch)
            if let next = state.takeBatch(limit: limit, now: now) { return next }
            state.running -= 1
            return nil
        }
    }

    /// `batch`'s deadline passed with its run still in the database (or never answered): its
    /// receipts are answered 503 (most were, by their own deadlines), `lane`'s task is cancelled
    /// (what it awaits that can end, ends) and left, and a new lane takes its place.
    private func leave(_ lane: LaneTask, with batch: [Waiter]) {
        let timedOut = StoreError.unavailable(.timedOut(deadline?.timeout ?? .zero))
        for waiter in batch { waiter.reply.resume(with: .failure(timedOut)) }
        lane.cancel()
        // The left lane's place goes to the new one: `running` stays.
        if let next = next(after: batch) {
            startLane(with: next)
        } else {
            laneFreed()
        }
    }
}

/// A lane's task, so that a lane left at a batch's deadline can be cancelled.
private final class LaneTask: Sendable {
    private struct State {
        var task: Task<Void, Never>?
        var cancelled = false
    }

    private let state = Mutex(State())

    func hold(_ task: Task<Void, Never>) {
        let cancelled = state.withLock { state -> Bool in
            state.task = task
            return state.cancelled
        }
        if cancelled { task.cancel() }
    }

    func cancel() {
        let task = state.withLock { state -> Task<Void, Never>? in
            state.cancelled = true
            return state.task
        }
        task?.cancel()
    }
}
