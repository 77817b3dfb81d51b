import Logging
import ServiceLifecycle
import TicksProtocol

/// Deletes the receipt log's moves older than the retention window
/// (`ReceiptLogRetention`), beside the writer: every `interval` a round
/// deletes them a batch at a time, each batch one short transaction through
/// the store's ordinary write path, sized to take `batchTarget`
/// (`ReceiptLogRetention.nextBatchSize`), with a pause between batches so
/// receipts keep going. A receipt never waits for more than one batch.
///
/// A service of the application's group (`buildApplication`), when retention
/// is on; it stops when the group shuts down. On PostgreSQL every node runs
/// one: they delete the same old moves, each batch deleting what the others
/// have not. `round()` runs one round at once (the benchmark's, an operator's tool).
public struct ReceiptLogPruner: Service {
    let store: any ReceiptLogPruning
    public let retention: ReceiptLogRetention
    let window: Duration
    /// The interval, the pause and the cutoff's wall-clock time (a test's clock in tests).
    let time: TimeSource
    let metrics: ServerMetrics
    let logger: Logger
    /// Each round once it is done, the newest kept until read (tests wait on it).
    public let rounds: AsyncStream<Round>
    private let finished: AsyncStream<Round>.Continuation

    /// What one round did.
    public struct Round: Sendable, Equatable {
        /// Moves older than this were deleted.
        public var cutoff: Timestamp
        /// Moves deleted by each batch, in order.
        public var batches: [Int]
        /// The oldest move kept, after the round.
        public var oldest: Timestamp?
        /// The longest a batch took, from looking at its moves to its commit
        /// (on SQLite the commit is shared with the receipts grouped with it).
        public var slowestBatch: Duration = .zero

        public var deleted: Int { batches.reduce(0, +) }
    }

    /// A pruner for `store`; nil when `retention` is off.
    public init?(
        store: any ReceiptLogPruning, retention: ReceiptLogRetention, time: TimeSource, metrics: ServerMetrics, logger: Logger
    ) {
        guard let window = retention.window else { return nil }
        self.store = store
        self.retention = retention
        self.window = window
        self.time = time
        self.metrics = metrics
        self.logger = logger
        (rounds, finished) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    try await time.sleep(for: retention.interval)
                    finished.yield(try await round())
                } catch is CancellationError {
                    return
                } catch {
                    logger.warning(
                        "receipt log pruning failed; the next round retries", metadata: ["error": "\(error)"])
                }
            }
        }
    }

    /// Deletes every move older than the window now, a batch at a time.
    public func round() async throws -> Round {
        let started = time.now
        let cutoff = time.wallNow - window
        var batches: [Int] = []
        var slowest = Duration.zero
        var after: Int64 = 0
        var size = min(ReceiptLogRetention.firstBatch, retention.batchSize)
        while true {
            let batchStarted = time.now
            guard let batch = try await store.pruneReceiptLog(before: cutoff, after: after, limit: size)
            else { break }
            let took = time.now - batchStarted
            size = retention.nextBatchSize(after: size, took: took)
            slowest = max(slowest, took)
            batches.append(batch.deleted)
            metrics.receiptLogPruned.increment(by: batch.deleted)
            after = batch.through
            // At least as long as the batch took: working through a backlog, the pruner has the
            // writer at most half the time (a zero pause, in tests, stays zero).
            try await time.sleep(for: retention.pause > .zero ? max(retention.pause, took) : .zero)
        }
        let oldest = try await store.oldestReceiptMove()
        metrics.recordOldestReceiptMove(oldest)
        let round = Round(cutoff: cutoff, batches: batches, oldest: oldest, slowestBatch: slowest)
        logger.log(
            level: round.deleted > 0 ? .info : .debug, "receipt log pruned",
            metadata: [
                "deleted": "\(round.deleted)", "batches": "\(batches.count)", "cutoff": "\(cutoff.rfc3339)",
                "oldest_kept": "\(oldest?.rfc3339 ?? "none")", "retention": "\(retention)",
                "slowest_batch": "\(slowest)",
                "took": "\(time.now - started)",
            ])
        return round
    }
}
