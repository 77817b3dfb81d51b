import Foundation
import Hummingbird
import TicksProtocol

/// `GET /admin/status` (docs/operations.md, "Watch it"): how this node is
/// doing, for a person at a terminal (`ticks status`) or a script. Server
/// tokens only: it names webhook receivers and counts every user's sockets.
/// Counters are this node's since it started; the store's figures are shared
/// by every node on it.
struct StatusController {
    let store: any TicksStore
    let hub: ConnectionHub
    let bus: (any EventBus)?
    let webhooks: WebhookSender?
    let retention: ReceiptLogRetention
    let time: TimeSource
    let startedAt: Timestamp

    func addRoutes(to group: RouterGroup<TicksRequestContext>) {
        group.on(.getStatus, use: status)
    }

    struct Status: Encodable {
        var version: String
        var commit: String
        var startedAt: Timestamp
        var uptimeSeconds: Int64
        var store: Store
        var connections: Connections
        var webhooks: Webhooks
        /// Absent with one node (SQLite).
        var bus: EventBusStatus?
        var process: Process

        enum CodingKeys: String, CodingKey {
            case version, commit, store, connections, webhooks, bus, process
            case startedAt = "started_at"
            case uptimeSeconds = "uptime_seconds"
        }
    }

    struct Store: Encodable {
        /// `sqlite` or `postgres`.
        var kind: String
        var sizeBytes: Int64
        /// The oldest move the receipt log keeps; absent when it is empty.
        var oldestReceiptMove: Timestamp?
        /// How long moves are kept (`--receipt-log-retention`), in seconds; absent when forever.
        var receiptLogRetentionSeconds: Int64?

        enum CodingKeys: String, CodingKey {
            case kind
            case sizeBytes = "size_bytes"
            case oldestReceiptMove = "oldest_receipt_move"
            case receiptLogRetentionSeconds = "receipt_log_retention_seconds"
        }
    }

    struct Connections: Encodable {
        var open: Int
        var users: Int
        var slowClosed: Int

        enum CodingKeys: String, CodingKey {
            case open, users
            case slowClosed = "slow_closed"
        }
    }

    struct Webhooks: Encodable {
        var enabled: Bool
        /// Whether this node is the one sending (it holds the lease).
        var sending: Bool
        var waiting: Int
        var dead: Int
        var receivers: [Receiver]
    }

    struct Receiver: Encodable {
        var url: String
        /// `webhook` or `push`.
        var hook: String
        var waiting: Int
        var dead: Int
        var oldestWaiting: Timestamp?

        enum CodingKeys: String, CodingKey {
            case url, hook, waiting, dead
            case oldestWaiting = "oldest_waiting"
        }
    }

    struct Process: Encodable {
        var residentMemoryBytes: Int64?
        var cpuSeconds: Double

        enum CodingKeys: String, CodingKey {
            case residentMemoryBytes = "resident_memory_bytes"
            case cpuSeconds = "cpu_seconds"
        }
    }

    @Sendable func status(_ request: Request, context: TicksRequestContext) async throws -> Response {
        guard case .server = try context.requirePrincipal() else {
            throw APIError.forbidden("the status view needs a server token")
        }
        let now = time.wallNow
        let receivers = try await (store as? SQLStore)?.outboxTargets() ?? []
        let status = Status(
            version: BuildInfo.version, commit: BuildInfo.commit, startedAt: startedAt,
            uptimeSeconds: max(0, (now.microseconds - startedAt.microseconds) / 1_000_000),
            store: Store(
                kind: Self.kind(of: store), sizeBytes: try await store.storageBytes(),
                oldestReceiptMove: try await store.oldestReceiptMove(),
                receiptLogRetentionSeconds: retention.window?.components.seconds),
            connections: Connections(
                open: hub.connectionCount, users: hub.connectedUserCount, slowClosed: hub.slowClosedCount),
            webhooks: Webhooks(
                enabled: webhooks != nil, sending: webhooks?.isSending ?? false,
                waiting: receivers.reduce(0) { $0 + $1.waiting }, dead: receivers.reduce(0) { $0 + $1.dead },
                receivers: receivers.map {
                    Receiver(url: $0.target, hook: $0.kind, waiting: $0.waiting, dead: $0.dead, oldestWaiting: $0.oldestWaiting)
                }),
            bus: bus?.status,
            process: Process(
                residentMemoryBytes: ServerMetrics.residentMemoryBytes(), cpuSeconds: ServerMetrics.cpuSeconds()))
        return try context.respond(status)
    }

    static func kind(of store: any TicksStore) -> String {
        switch (store as? SQLStore)?.engine.dialect {
        case .postgres: "postgres"
        case .sqlite, nil: "sqlite"
        }
    }
}
