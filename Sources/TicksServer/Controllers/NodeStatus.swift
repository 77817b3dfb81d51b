import TicksProtocol

/// The answer of `GET /admin/status` (`StatusController`), and what
/// `ticks status` reads: how one node is doing. Counters are this node's since
/// it started; the store's figures are shared by every node on the store.
public struct NodeStatus: Codable, Sendable {
    public var version: String
    public var commit: String
    public var startedAt: Timestamp
    public var uptimeSeconds: Int64
    public var store: Store
    public var connections: Connections
    public var webhooks: Webhooks
    /// Absent with one node (SQLite).
    public var bus: EventBusStatus?
    public var process: Process

    enum CodingKeys: String, CodingKey {
        case version, commit, store, connections, webhooks, bus, process
        case startedAt = "started_at"
        case uptimeSeconds = "uptime_seconds"
    }

    public struct Store: Codable, Sendable {
        /// `sqlite` or `postgres`.
        public var kind: String
        /// Whether the store answered this node's last call (`StoreHealth`).
        public var reachable: Bool
        /// Since when it has not; absent while it does.
        public var unreachableSince: Timestamp?
        /// Calls answered 503 because the store was away or too slow, since the start.
        public var unavailableCalls: Int
        /// Those of them that waited out the store's deadline (`--store-timeout`);
        /// the others were answered at once. Absent from nodes before it was added.
        public var timedOutCalls: Int?
        /// Absent while the store is unreachable.
        public var sizeBytes: Int64?
        /// The oldest move the receipt log keeps; absent when it is empty.
        public var oldestReceiptMove: Timestamp?
        /// How long moves are kept (`--receipt-log-retention`), in seconds; absent when forever.
        public var receiptLogRetentionSeconds: Int64?

        enum CodingKeys: String, CodingKey {
            case kind, reachable
            case unreachableSince = "unreachable_since"
            case unavailableCalls = "unavailable_calls"
            case timedOutCalls = "timed_out_calls"
            case sizeBytes = "size_bytes"
            case oldestReceiptMove = "oldest_receipt_move"
            case receiptLogRetentionSeconds = "receipt_log_retention_seconds"
        }
    }

    public struct Connections: Codable, Sendable {
        /// WebSockets open on this node, and their users.
        public var open: Int
        public var users: Int
        /// WebSockets this node closed as too slow since it started.
        public var slowClosed: Int

        enum CodingKeys: String, CodingKey {
            case open, users
            case slowClosed = "slow_closed"
        }
    }

    public struct Webhooks: Codable, Sendable {
        /// Whether this node was started with webhooks or a push hook.
        public var enabled: Bool
        /// Whether this node is the one sending (it holds the lease).
        public var sending: Bool
        public var waiting: Int
        public var dead: Int
        public var receivers: [Receiver]
    }

    public struct Receiver: Codable, Sendable {
        public var url: String
        /// `webhook` or `push`.
        public var hook: String
        public var waiting: Int
        public var dead: Int
        public var oldestWaiting: Timestamp?

        enum CodingKeys: String, CodingKey {
            case url, hook, waiting, dead
            case oldestWaiting = "oldest_waiting"
        }
    }

    public struct Process: Codable, Sendable {
        public var residentMemoryBytes: Int64?
        public var cpuSeconds: Double

        enum CodingKeys: String, CodingKey {
            case residentMemoryBytes = "resident_memory_bytes"
            case cpuSeconds = "cpu_seconds"
        }
    }
}
