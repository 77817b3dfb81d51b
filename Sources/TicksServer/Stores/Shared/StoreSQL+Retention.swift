/// Retention of the receipt log (`ReceiptLogPruner`, docs/storage.md): the
/// oldest moves are deleted a window of ids at a time, through the primary
/// key, so no statement scans the log and no transaction is long.
extension StoreSQL {
    /// The next `limit` moves after `afterID` in log order: 0 the last one's
    /// id (null when there are none), 1 how many of them are older than `cutoff`.
    static func receiptLogWindow(after afterID: Int64, limit: Int, olderThan cutoff: Int64) -> StoreQuery {
        """
        SELECT MAX(w.id), COALESCE(SUM(CASE WHEN w.at < \(cutoff) THEN 1 ELSE 0 END), 0)
        FROM (SELECT id, at FROM cursor_move WHERE id > \(afterID) ORDER BY id LIMIT \(limit)) w
        """
    }

    /// Deletes the moves older than `cutoff` with ids in `(afterID, throughID]`; their ids.
    static func pruneReceiptLog(after afterID: Int64, through throughID: Int64, olderThan cutoff: Int64) -> StoreQuery {
        "DELETE FROM cursor_move WHERE id > \(afterID) AND id <= \(throughID) AND at < \(cutoff) RETURNING id"
    }

    /// Records that moves older than `cutoff` may be gone (the latest cutoff wins).
    static func recordReceiptLogPruned(before cutoff: Int64) -> StoreQuery {
        """
        INSERT INTO receipt_log_pruned (id, pruned_before) VALUES (1, \(cutoff))
        ON CONFLICT (id) DO UPDATE SET pruned_before = CASE
          WHEN excluded.pruned_before > receipt_log_pruned.pruned_before THEN excluded.pruned_before
          ELSE receipt_log_pruned.pruned_before END
        """
    }

    /// Column 0: the time of the first move in log order, the oldest one kept
    /// (moves are logged in time order; several PostgreSQL nodes' clocks may
    /// differ by a little).
    static let oldestReceiptMove: StoreQuery = "SELECT at FROM cursor_move ORDER BY id LIMIT 1"

    /// Column 0: before when moves may have been pruned; no row when never.
    static let receiptLogPrunedBefore: StoreQuery = "SELECT pruned_before FROM receipt_log_pruned WHERE id = 1"
}
