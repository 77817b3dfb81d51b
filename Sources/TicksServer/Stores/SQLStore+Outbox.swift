import TicksProtocol

/// The webhook outbox's queries (`WebhookOutbox`).
extension SQLStore: WebhookOutbox {
    public func outboxQueues(of target: String, limit: Int) async throws -> [String] {
        try await engine.readOne { Fetch.texts(StoreSQL.outboxQueues(of: target, limit: limit)) }
    }

    public func outboxQueue(target: String, cid: String, limit: Int) async throws -> [OutboxCall] {
        try await engine.readOne {
            Step.rows(StoreSQL.outboxQueue(target: target, cid: cid, limit: limit)).map { try $0.map(Self.outboxCall) }
        }
    }

    public func renameOutboxTarget(from old: String, to new: String) async throws {
        try await engine.write { Step.execute(StoreSQL.renameOutboxTarget(from: old, to: new)).map { _ in () } }
    }

    public func delivered(_ ids: [Int64]) async throws {
        guard !ids.isEmpty else { return }
        try await engine.write { Step.each(ids) { Step.execute(StoreSQL.deleteOutbox(id: $0)) }.map { _ in () } }
    }

    public func failed(_ call: OutboxCall, attempts: Int, nextAt: Timestamp, deadAt: Timestamp?, error: String) async throws {
        try await engine.write {
            Step.execute(
                StoreSQL.failOutbox(
                    id: call.id, attempts: attempts, nextAt: nextAt.microseconds, deadAt: deadAt?.microseconds,
                    error: String(error.prefix(500))))
        }
    }

    public func trimOutbox(_ bounds: OutboxBounds, targets: [String], now: Timestamp) async throws {
        let at = now.microseconds
        try await engine.write {
            Step.execute(StoreSQL.expireOutbox(before: (now - bounds.maxAge).microseconds, at: at)).then { _ in
                Step.each(targets) { Step.execute(StoreSQL.overflowOutbox(of: $0, keep: bounds.maxWaiting, at: at)) }
            }.then { _ in
                Step.execute(StoreSQL.pruneDeadOutbox(before: (now - bounds.deadRetention).microseconds))
            }.then { _ in
                Step.execute(StoreSQL.trimDeadOutbox(keep: bounds.maxDead))
            }
        }
    }

    public func deadCalls(after afterID: Int64, limit: Int) async throws -> [OutboxCall] {
        try await engine.readOne {
            Step.rows(StoreSQL.deadOutbox(after: afterID, limit: limit)).map { try $0.map(Self.outboxCall) }
        }
    }

    public func retryDeadCalls(_ deliveryIDs: [String]?, now: Timestamp) async throws -> [String] {
        let retried = try await engine.write {
            Fetch.texts(StoreSQL.retryDeadOutbox(deliveryIDs, at: now.microseconds))
        }
        changeRecorder?.committed()
        return retried
    }

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

    public func outboxCounts() async throws -> (waiting: Int, dead: Int) {
        try await engine.readOne {
            Step.row(StoreSQL.outboxCounts).map { row in
                (Int(try row?.int(0) ?? 0), Int(try row?.int(1) ?? 0))
            }
        }
    }

    public func takeWebhookLease(node: String, now: Timestamp, until: Timestamp) async throws -> Bool {
        try await engine.write {
            Fetch.texts(StoreSQL.takeWebhookLease(node: node, now: now.microseconds, until: until.microseconds))
                .map { $0 == [node] }
        }
    }

    public func releaseWebhookLease(node: String) async throws {
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
