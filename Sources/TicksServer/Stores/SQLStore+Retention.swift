import TicksProtocol

/// What one batch of pruning the receipt log did.
public struct PrunedBatch: Sendable, Equatable {
    /// Moves deleted.
    public var deleted: Int
    /// The last id the batch looked at: the next batch starts after it.
    public var through: Int64
}

/// The receipt log as its pruner (`ReceiptLogPruner`) sees it.
public protocol ReceiptLogPruning: Sendable {
    /// One batch: among the next `limit` moves of the log after `afterID` (in
    /// id order, the order they were logged in), deletes those older than
    /// `cutoff`, and records in the same transaction that moves before
    /// `cutoff` may be gone (`ReceiptRules.reached` reads it). nil when those
    /// moves hold none older than the cutoff: the log is pruned up to it.
    func pruneReceiptLog(before cutoff: Timestamp, after afterID: Int64, limit: Int) async throws -> PrunedBatch?
    /// The time of the oldest move the log still holds; nil when it is empty.
    func oldestReceiptMove() async throws -> Timestamp?
}

/// Retention of the receipt log: what `ReceiptLogPruner` runs, and what the
/// status view and `/metrics` read.
extension SQLStore: ReceiptLogPruning {
    /// The moves are looked at outside any write; the write is one delete by
    /// a range of the primary key and a one-row upsert, through the same
    /// path as every other write (SQLite: `GroupCommitter`; PostgreSQL: a
    /// short transaction of its own). A node held before `v10-receipt-log-retention` prunes
    /// nothing: its schema cannot record where the log was pruned, so receipts would lose their
    /// exactness unsaid (the newer nodes of the cluster prune).
    public func pruneReceiptLog(before cutoff: Timestamp, after afterID: Int64, limit: Int) async throws -> PrunedBatch? {
        guard schema.has(.receiptLogRetention) else { return nil }
        let at = cutoff.microseconds
        let window = try await engine.readOne {
            Step.row(StoreSQL.receiptLogWindow(after: afterID, limit: limit, olderThan: at)).map { row in
                (through: try row?.optionalInt(0), old: try row?.int(1) ?? 0)
            }
        }
        guard let through = window.through, window.old > 0 else { return nil }
        let deleted = try await engine.write {
            Step.rows(StoreSQL.pruneReceiptLog(after: afterID, through: through, olderThan: at)).then { rows in
                Step.execute(StoreSQL.recordReceiptLogPruned(before: at)).map { rows.count }
            }
        }
        return PrunedBatch(deleted: deleted, through: through)
    }

    public func oldestReceiptMove() async throws -> Timestamp? {
        try await engine.readOne {
            Step.row(StoreSQL.oldestReceiptMove).map { try $0.map { Timestamp(microseconds: try $0.int(0)) } }
        }
    }

    /// Before when moves may have been pruned; nil when the log never was.
    public func receiptLogPrunedBefore() async throws -> Timestamp? {
        guard schema.has(.receiptLogRetention) else { return nil }
        return try await engine.readOne {
            Step.row(StoreSQL.receiptLogPrunedBefore).map { try $0.map { Timestamp(microseconds: try $0.int(0)) } }
        }
    }
}
