import TicksProtocol

/// The webhook outbox as its sender and its admin routes use it: the calls
/// waiting per receiver and channel, the outcome of each attempt, dead calls,
/// and the lease that makes one node the sender (docs/webhooks.md). The
/// calls are written by a `ChangeRecorder` in each change's transaction.
public protocol WebhookOutbox: Sendable {
    /// A receiver's queues with calls waiting (their channels), oldest first.
    func outboxQueues(of target: String, limit: Int) async throws -> [String]
    /// The next calls of one queue, in order.
    func outboxQueue(target: String, cid: String, limit: Int) async throws -> [OutboxCall]
    /// Every call for the receiver named `old` is for `new` (one statement).
    func renameOutboxTarget(from old: String, to new: String) async throws
    /// Calls the receiver took: gone from the outbox (one transaction).
    func delivered(_ ids: [Int64]) async throws
    /// A failed attempt: the call waits until `nextAt`, or is dead (`deadAt`).
    func failed(_ call: OutboxCall, attempts: Int, nextAt: Timestamp, deadAt: Timestamp?, error: String) async throws
    /// Keeps the outbox within `bounds` for the receivers `targets`.
    func trimOutbox(_ bounds: OutboxBounds, targets: [String], now: Timestamp) async throws
    /// Dead calls after `afterID`, oldest first (`GET /webhooks/failed`).
    func deadCalls(after afterID: Int64, limit: Int) async throws -> [OutboxCall]
    /// Dead calls among `deliveryIDs` (all when nil) wait to be tried again; their ids.
    func retryDeadCalls(_ deliveryIDs: [String]?, now: Timestamp) async throws -> [String]
    /// The outbox per receiver that has calls in it, waiting or dead (`GET /admin/status`).
    func outboxTargets() async throws -> [OutboxTarget]
    /// Calls waiting and dead (`/metrics`).
    func outboxCounts() async throws -> (waiting: Int, dead: Int)
    /// Whether `node` holds (took or kept) the sender's lease until `until`.
    func takeWebhookLease(node: String, now: Timestamp, until: Timestamp) async throws -> Bool
    func releaseWebhookLease(node: String) async throws
}

/// A call the webhook outbox holds (docs/webhooks.md).
public struct OutboxCall: Sendable, Equatable {
    public var id: Int64
    /// The same on every attempt: receivers drop repeats by it (`X-Webhook-Id`).
    public var deliveryID: String
    /// The receiver, by its name (`ReceiverURL.name`): never its credentials.
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

/// One call to write to the outbox: where to, what, and for the push hook whom.
struct OutboxEntry: Sendable, Equatable {
    enum Kind: String, Sendable {
        case webhook
        case push
    }

    var target: String
    var kind: Kind
    var eventType: String
    /// The channel's queue the call waits in ("" for none).
    var cid: String
    /// The event's JSON.
    var payload: String
    /// The push hook's recipients as JSON; nil for a webhook.
    var recipients: String?
}

/// One receiver's calls in the outbox (`GET /admin/status`).
public struct OutboxTarget: Sendable, Equatable {
    public var target: String
    public var kind: String
    public var waiting: Int
    public var dead: Int
    public var oldestWaiting: Timestamp?
}

/// How much the outbox keeps: calls older than `maxAge` and a receiver's
/// calls beyond its newest `maxWaiting` die; dead ones older than
/// `deadRetention`, or beyond the newest `maxDead`, are removed.
public struct OutboxBounds: Sendable, Equatable {
    public var maxAge: Duration
    public var maxWaiting: Int
    public var deadRetention: Duration
    public var maxDead: Int
}
