import TicksProtocol

/// A call the webhook outbox holds (docs/webhooks.md).
public struct OutboxCall: Sendable, Equatable {
    public var id: Int64
    /// The same on every attempt: receivers drop repeats by it (`X-Webhook-Id`).
    public var deliveryID: String
    public var target: String
    public var kind: String
    public var eventType: String
    public var cid: String
    public var payload: String
    public var recipients: String?
    public var createdAt: Timestamp
    public var attempts: Int
    public var nextAttemptAt: Timestamp
    public var deadAt: Timestamp?
    public var lastError: String?
}

/// What the webhook sender reads and writes: the outbox's queues, the
/// outcome of each call, the lease that makes one node the sender.
extension SQLStore {
    /// A receiver's queues with calls waiting (their channels), oldest first.
    func outboxQueues(of target: String, limit: Int) async throws -> [String] {
        try await engine.readOne { Fetch.texts(StoreSQL.outboxQueues(of: target, limit: limit)) }
    }

    /// The next calls of one queue, in order.
    func outboxQueue(target: String, cid: String, limit: Int) async throws -> [OutboxCall] {
        try await engine.readOne {
            Step.rows(StoreSQL.outboxQueue(target: target, cid: cid, limit: limit)).map { try $0.map(Self.outboxCall) }
        }
    }

    /// Calls the receiver took: gone from the outbox (one transaction).
    func delivered(_ ids: [Int64]) async throws {
        guard !ids.isEmpty else { return }
        try await engine.write { Step.each(ids) { Step.execute(StoreSQL.deleteOutbox(id: $0)) }.map { _ in () } }
    }

    /// A failed attempt: the call waits until `nextAt`, or is dead (`deadAt`).
    func failed(_ call: OutboxCall, attempts: Int, nextAt: Timestamp, deadAt: Timestamp?, error: String) async throws {
        try await engine.write {
            Step.execute(
                StoreSQL.failOutbox(
                    id: call.id, attempts: attempts, nextAt: nextAt.microseconds, deadAt: deadAt?.microseconds,
                    error: String(error.prefix(500))))
        }
    }

    /// Keeps the outbox within its bounds: calls older than `maxAge` and a
    /// receiver's calls beyond its newest `maxWaiting` die; dead ones older
    /// than `retention`, or beyond the newest `maxDead`, are removed.
    func trimOutbox(settings: WebhookSettings, targets: [String], now: Timestamp) async throws {
        let at = now.microseconds
        try await engine.write {
            Step.execute(StoreSQL.expireOutbox(before: (now - settings.maxAge).microseconds, at: at)).then { _ in
                Step.each(targets) { Step.execute(StoreSQL.overflowOutbox(of: $0, keep: settings.maxWaiting, at: at)) }
            }.then { _ in
                Step.execute(StoreSQL.pruneDeadOutbox(before: (now - settings.deadRetention).microseconds))
            }.then { _ in
                Step.execute(StoreSQL.trimDeadOutbox(keep: settings.maxDead))
            }
        }
    }

    /// Dead calls after `afterID`, oldest first (`GET /webhooks/failed`).
    public func deadCalls(after afterID: Int64, limit: Int) async throws -> [OutboxCall] {
        try await engine.readOne {
            Step.rows(StoreSQL.deadOutbox(after: afterID, limit: limit)).map { try $0.map(Self.outboxCall) }
        }
    }

    /// Dead calls among `deliveryIDs` (all when nil) are tried again; returns their ids.
    public func retryDeadCalls(_ deliveryIDs: [String]?, now: Timestamp) async throws -> [String] {
        let retried = try await engine.write {
            Fetch.texts(StoreSQL.retryDeadOutbox(deliveryIDs, at: now.microseconds))
        }
        webhooks?.wake()
        return retried
    }

    /// One receiver's calls in the outbox (`GET /admin/status`).
    public struct OutboxTarget: Sendable, Equatable {
        public var target: String
        public var kind: String
        public var waiting: Int
        public var dead: Int
        public var oldestWaiting: Timestamp?
    }

    /// The outbox per receiver that has calls in it, waiting or dead.
    public func outboxTargets() async throws -> [OutboxTarget] {
        try await engine.readOne {
            Step.rows(StoreSQL.outboxByTarget).map { rows in
                try rows.map { row in
                    OutboxTarget(
                        target: try row.text(0), kind: try row.text(1), waiting: Int(try row.int(2)),
                        dead: Int(try row.int(3)), oldestWaiting: try row.optionalInt(4).map(Timestamp.init(microseconds:)))
                }
            }
        }
    }

    /// Calls waiting and dead (`/metrics`).
    public func outboxCounts() async throws -> (waiting: Int, dead: Int) {
        try await engine.readOne {
            Step.row(StoreSQL.outboxCounts).map { row in
                (Int(try row?.int(0) ?? 0), Int(try row?.int(1) ?? 0))
            }
        }
    }

    /// Whether `node` holds (took or kept) the sender's lease until `until`.
    func takeWebhookLease(node: String, now: Timestamp, until: Timestamp) async throws -> Bool {
        try await engine.write {
            Fetch.texts(StoreSQL.takeWebhookLease(node: node, now: now.microseconds, until: until.microseconds))
                .map { $0 == [node] }
        }
    }

    func releaseWebhookLease(node: String) async throws {
        try await engine.write { Step.execute(StoreSQL.releaseWebhookLease(node: node)) }
    }

    static func outboxCall(_ row: any StoreRow) throws -> OutboxCall {
        OutboxCall(
            id: try row.int(0), deliveryID: try row.text(1), target: try row.text(2), kind: try row.text(3),
            eventType: try row.text(4), cid: try row.text(5), payload: try row.text(6),
            recipients: try row.optionalText(7), createdAt: Timestamp(microseconds: try row.int(8)),
            attempts: Int(try row.int(9)), nextAttemptAt: Timestamp(microseconds: try row.int(10)),
            deadAt: try row.optionalInt(11).map(Timestamp.init(microseconds:)), lastError: try row.optionalText(12))
    }
}
