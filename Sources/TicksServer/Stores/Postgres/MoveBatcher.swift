import Synchronization

/// Group commit for PostgreSQL's receipts: marks read and delivered that
/// arrive while earlier ones are in the database wait, and go together as
/// one statement (`StoreSQL.moves`) and one commit, as SQLite's
/// `GroupCommitter` groups its writes. At most `lanes` batches run at once;
/// a receipt that finds a lane free goes at once, alone, so batching adds no
/// wait when the database keeps up. A batch holds each member at most once
/// (the statement locks each member's row once); a second receipt of the
/// same member waits for the next batch, in arrival order.
final class MoveBatcher: Sendable {
    typealias Outcomes = [Result<CursorOutcome?, any Error>]

    private struct Waiter: Sendable {
        let move: BatchedMove
        let continuation: CheckedContinuation<CursorOutcome?, any Error>
    }

    /// How the receipts were grouped so far.
    struct Statistics: Sendable, Equatable {
        var batches = 0
        var moves = 0
    }

    private struct State {
        var pending: [Waiter] = []
        var running = 0
        var statistics = Statistics()

        /// The oldest waiting moves, up to `limit`, each member once.
        mutating func takeBatch(limit: Int) -> [Waiter]? {
            guard !pending.isEmpty else { return nil }
            var batch: [Waiter] = []
            var members = Set<String>()
            var left: [Waiter] = []
            for waiter in pending {
                if batch.count < limit, members.insert(waiter.move.member).inserted {
                    batch.append(waiter)
                } else {
                    left.append(waiter)
                }
            }
            pending = left
            statistics.batches += 1
            statistics.moves += batch.count
            return batch
        }
    }

    private let state = Mutex(State())
    private let lanes: Int
    private let limit: Int
    private let arrived: @Sendable (BatchedMove) -> Void
    private let laneFreed: @Sendable () -> Void
    private let run: @Sendable ([BatchedMove]) async throws -> Outcomes

    /// - Parameters:
    ///   - lanes: batches in the database at once. One by default: measured
    ///     on 2 cores (`bench/nodes`, medians of 3), one lane sustained
    ///     2,978 receipts/s at a 3,000/s target, two lanes 2,721, four about
    ///     2,600; more lanes mean smaller batches, more backends competing
    ///     for the cores and more waits on the same members' rows.
    ///   - limit: moves in one batch at most.
    ///   - arrived: told of each move once the batcher holds it (waiting, or in a batch that
    ///     starts); tests wait for it to know a receipt came before they let a batch end.
    ///   - laneFreed: told each time a lane ends because nothing waits; tests wait for it before
    ///     they count on a free lane.
    ///   - run: runs a batch, one outcome per move, in order.
    init(
        lanes: Int = 1, limit: Int = 64, arrived: @escaping @Sendable (BatchedMove) -> Void = { _ in },
        laneFreed: @escaping @Sendable () -> Void = {},
        run: @escaping @Sendable ([BatchedMove]) async throws -> Outcomes
    ) {
        precondition(lanes > 0 && limit > 0)
        self.lanes = lanes
        self.limit = limit
        self.arrived = arrived
        self.laneFreed = laneFreed
        self.run = run
    }

    var statistics: Statistics { state.withLock { $0.statistics } }

    /// Applies `move` in the next batch; its outcome, or its own refusal.
    func submit(_ move: BatchedMove) async throws -> CursorOutcome? {
        try await withCheckedThrowingContinuation { continuation in
            let batch = state.withLock { state -> [Waiter]? in
                state.pending.append(Waiter(move: move, continuation: continuation))
                guard state.running < lanes, let batch = state.takeBatch(limit: limit) else { return nil }
                state.running += 1
                return batch
            }
            arrived(move)
            if let batch { startLane(with: batch) }
        }
    }

    /// Runs batches until nothing waits, then frees the lane.
    private func startLane(with first: [Waiter]) {
        // Detached: the lane serves many requests, so it takes none of the first one's task-local
        // values (its trace context above all: the batch is no one request's child).
        Task.detached { [self] in
            var batch = first
            while true {
                let outcomes: Outcomes
                do {
                    let answered = try await run(batch.map(\.move))
                    // One answer per move, or a caller would wait for ever.
                    guard answered.count == batch.count else {
                        throw StoreError.inconsistent("\(answered.count) outcomes for a batch of \(batch.count) moves")
                    }
                    outcomes = answered
                } catch {
                    outcomes = batch.map { _ in .failure(error) }
                }
                for (waiter, outcome) in zip(batch, outcomes) { waiter.continuation.resume(with: outcome) }
                let next = state.withLock { state -> [Waiter]? in
                    if let next = state.takeBatch(limit: limit) { return next }
                    state.running -= 1
                    return nil
                }
                guard let next else {
                    laneFreed()
                    return
                }
                batch = next
            }
        }
    }
}
