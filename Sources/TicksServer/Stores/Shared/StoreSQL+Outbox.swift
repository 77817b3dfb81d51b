import TicksProtocol

/// The webhook outbox (`StoreMigrations.webhooks`): calls written with the
/// change that owes them, taken in `id` order per receiver and channel.
extension StoreSQL {
    static func insertOutbox(_ entry: OutboxEntry, deliveryID: String, at: Int64) -> StoreQuery {
        """
        INSERT INTO webhook_outbox
          (delivery_id, target, kind, event_type, cid, payload, recipients, created_at, next_attempt_at)
        VALUES (\(deliveryID), \(entry.target), \(entry.kind.rawValue), \(entry.eventType), \(entry.cid),
          \(entry.payload), \(entry.recipients), \(at), \(at))
        """
    }

    static let outboxColumns =
        "o.id, o.delivery_id, o.target, o.kind, o.event_type, o.cid, o.payload, o.recipients, o.created_at, o.attempts, o.next_attempt_at, o.dead_at, o.last_error"

    /// A receiver's queues with calls waiting (by channel), oldest first; at most `limit`.
    static func outboxQueues(of target: String, limit: Int) -> StoreQuery {
        """
        SELECT o.cid, MIN(o.id) AS head FROM webhook_outbox o WHERE o.dead_at IS NULL AND o.target = \(target)
        GROUP BY o.cid ORDER BY head LIMIT \(limit)
        """
    }

    /// The next calls of one queue, in order.
    static func outboxQueue(target: String, cid: String, limit: Int) -> StoreQuery {
        """
        SELECT \(raw: outboxColumns) FROM webhook_outbox o
        WHERE o.dead_at IS NULL AND o.target = \(target) AND o.cid = \(cid) ORDER BY o.id LIMIT \(limit)
        """
    }

    /// Rows that named their receiver by its whole URL (before 0.10) name it as the settings do now.
    static func renameOutboxTarget(from old: String, to new: String) -> StoreQuery {
        "UPDATE webhook_outbox SET target = \(new) WHERE target = \(old)"
    }

    static func deleteOutbox(id: Int64) -> StoreQuery {
        "DELETE FROM webhook_outbox WHERE id = \(id)"
    }

    /// A failed attempt: tried again at `nextAt`, or dead (`deadAt`) when it was the last. A call that
    /// died while it was being tried (a trim dropped it, or it expired) stays dead.
    static func failOutbox(id: Int64, attempts: Int, nextAt: Int64, deadAt: Int64?, error: String) -> StoreQuery {
        """
        UPDATE webhook_outbox SET attempts = \(attempts), next_attempt_at = \(nextAt), dead_at = \(deadAt),
          last_error = \(error)
        WHERE id = \(id) AND dead_at IS NULL
        """
    }

    /// Calls still waiting that were written before `before` are dead.
    static func expireOutbox(before: Int64, at: Int64) -> StoreQuery {
        """
        UPDATE webhook_outbox SET dead_at = \(at), last_error = 'expired: not delivered within the maximum age'
        WHERE dead_at IS NULL AND created_at < \(before)
        """
    }

    /// Dead calls that died before `before` are forgotten.
    static func pruneDeadOutbox(before: Int64) -> StoreQuery {
        "DELETE FROM webhook_outbox WHERE dead_at IS NOT NULL AND dead_at < \(before)"
    }

    /// A receiver's waiting calls beyond its newest `keep` are dead.
    static func overflowOutbox(of target: String, keep: Int, at: Int64) -> StoreQuery {
        """
        UPDATE webhook_outbox SET dead_at = \(at), last_error = 'dropped: too many calls waiting for this receiver'
        WHERE dead_at IS NULL AND target = \(target) AND id <= (
          SELECT o.id FROM webhook_outbox o WHERE o.dead_at IS NULL AND o.target = \(target)
          ORDER BY o.id DESC LIMIT 1 OFFSET \(keep))
        """
    }

    /// Dead calls beyond the newest `keep` are forgotten.
    static func trimDeadOutbox(keep: Int) -> StoreQuery {
        """
        DELETE FROM webhook_outbox WHERE dead_at IS NOT NULL AND id <= (
          SELECT o.id FROM webhook_outbox o WHERE o.dead_at IS NOT NULL ORDER BY o.id DESC LIMIT 1 OFFSET \(keep))
        """
    }

    /// Dead calls after `afterID`, oldest first.
    static func deadOutbox(after afterID: Int64, limit: Int) -> StoreQuery {
        """
        SELECT \(raw: outboxColumns) FROM webhook_outbox o
        WHERE o.dead_at IS NOT NULL AND o.id > \(afterID) ORDER BY o.id LIMIT \(limit)
        """
    }

    /// Dead calls among `deliveryIDs` (every dead one when nil) wait again,
    /// with no attempt counted and their age counted from now.
    static func retryDeadOutbox(_ deliveryIDs: [String]?, at: Int64) -> StoreQuery {
        let chosen: StoreQuery = deliveryIDs.map { " AND \(in: "delivery_id", $0)" } ?? ""
        return
            """
            UPDATE webhook_outbox SET dead_at = NULL, attempts = 0, next_attempt_at = \(at), created_at = \(at)
            WHERE dead_at IS NOT NULL
            """ + chosen + " RETURNING delivery_id"
    }

    /// Per receiver: calls waiting, dead, and when the oldest waiting one was written.
    static let outboxByTarget: StoreQuery = """
        SELECT target, kind, COUNT(*) FILTER (WHERE dead_at IS NULL), COUNT(*) FILTER (WHERE dead_at IS NOT NULL),
          MIN(created_at) FILTER (WHERE dead_at IS NULL)
        FROM webhook_outbox GROUP BY target, kind ORDER BY target, kind
        """

    /// Calls waiting, and dead.
    static let outboxCounts: StoreQuery = """
        SELECT COUNT(*) FILTER (WHERE dead_at IS NULL), COUNT(*) FILTER (WHERE dead_at IS NOT NULL)
        FROM webhook_outbox
        """

    /// Takes or keeps the sender's lease until `until` unless another node holds one
    /// that has not expired at `now`; returns a row when `node` holds it.
    static func takeWebhookLease(node: String, now: Int64, until: Int64) -> StoreQuery {
        """
        INSERT INTO webhook_lease (id, node, expires_at) VALUES (1, \(node), \(until))
        ON CONFLICT (id) DO UPDATE SET node = excluded.node, expires_at = excluded.expires_at
        WHERE webhook_lease.node = excluded.node OR webhook_lease.expires_at < \(now)
        RETURNING node
        """
    }

    /// Gives the lease up (a node that stops).
    static func releaseWebhookLease(node: String) -> StoreQuery {
        "DELETE FROM webhook_lease WHERE id = 1 AND node = \(node)"
    }
}
