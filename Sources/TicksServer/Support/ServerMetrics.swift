import CoreMetrics
import Foundation
import Metrics
import Prometheus
import TicksProtocol

/// The server's counters and histograms, on a registry of its own so several
/// servers (tests) can live in one process. Exposed at `GET /metrics`.
public struct ServerMetrics: Sendable {
    public let registry: PrometheusCollectorRegistry
    let factory: PrometheusMetricsFactory

    let connections: CoreMetrics.Meter
    let framesSent: CoreMetrics.Counter
    let bytesSent: CoreMetrics.Counter
    let residentMemory: CoreMetrics.Gauge
    /// CPU time the process has used, user and system (what `ticks-bench` divides by receipts).
    let cpuSeconds: CoreMetrics.Gauge
    let storeSize: CoreMetrics.Gauge
    /// Requests in the handlers now, this one included (what a stopping node still waits for).
    let requestsInFlight: CoreMetrics.Gauge
    /// 1 while the store answers, 0 while it does not (`StoreHealth`).
    let storeReachable: CoreMetrics.Gauge
    /// Since when it has not answered, in seconds since 1970; 0 while it does.
    let storeUnreachableSince: CoreMetrics.Gauge
    /// Store calls answered 503 since the start (the database away, or slower than the deadline).
    let storeUnavailableCalls: CoreMetrics.Gauge
    /// Those of them that waited out the deadline (`StoreHealth.timedOutCalls`).
    let storeTimedOutCalls: CoreMetrics.Gauge
    /// Transactions run again after PostgreSQL aborted them, by why (`StoreRetry`'s raw values).
    let storeRetries: [String: CoreMetrics.Gauge]
    let slowConnectionsClosed: CoreMetrics.Counter
    /// Events sent to a connection of this node or to the bus (an event no one could hear is not built).
    let eventsPublished: CoreMetrics.Counter
    /// Members sent a `message.new` without their unread counts: the node could not read them
    /// after the commit (the store away), or the member had left by then.
    let messageNewCountsMissing: CoreMetrics.Counter
    let readMoves: CoreMetrics.Counter
    let deliveredMoves: CoreMetrics.Counter
    /// Voice notes and videos first played by a member (R14).
    let played: CoreMetrics.Counter
    /// Answers with status 4xx, and 5xx.
    let clientErrors: CoreMetrics.Counter
    let serverErrors: CoreMetrics.Counter
    /// Events another node could not be sent (publish failed or queue full): their users were told to resync.
    let busEventsLost: CoreMetrics.Counter
    /// Moves the receipt log's retention deleted (`ReceiptLogPruner`).
    let receiptLogPruned: CoreMetrics.Counter
    /// Kept unread counts that `POST /unread/recount` found wrong and set right.
    let unreadDriftFixed: CoreMetrics.Counter
    /// The time of the oldest move the receipt log keeps, in seconds since 1970; 0 while it is empty.
    let oldestReceiptMove: CoreMetrics.Gauge

    public init() {
        let registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = [
            .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2),
            .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
            .milliseconds(250), .milliseconds(1000),
        ]
        self.registry = registry
        self.factory = factory
        connections = CoreMetrics.Meter(label: "ticks_ws_connections", dimensions: [], factory: factory)
        framesSent = CoreMetrics.Counter(label: "ticks_ws_frames_sent_total", dimensions: [], factory: factory)
        bytesSent = CoreMetrics.Counter(label: "ticks_ws_bytes_sent_total", dimensions: [], factory: factory)
        residentMemory = CoreMetrics.Gauge(label: "ticks_process_resident_memory_bytes", dimensions: [], factory: factory)
        cpuSeconds = CoreMetrics.Gauge(label: "ticks_process_cpu_seconds_total", dimensions: [], factory: factory)
        storeSize = CoreMetrics.Gauge(label: "ticks_store_size_bytes", dimensions: [], factory: factory)
        requestsInFlight = CoreMetrics.Gauge(label: "ticks_http_requests_in_flight", dimensions: [], factory: factory)
        storeReachable = CoreMetrics.Gauge(label: "ticks_store_reachable", dimensions: [], factory: factory)
        storeUnreachableSince = CoreMetrics.Gauge(
            label: "ticks_store_unreachable_since_timestamp_seconds", dimensions: [], factory: factory)
        storeUnavailableCalls = CoreMetrics.Gauge(label: "ticks_store_unavailable_calls", dimensions: [], factory: factory)
        storeTimedOutCalls = CoreMetrics.Gauge(label: "ticks_store_timed_out_calls", dimensions: [], factory: factory)
        storeRetries = Dictionary(
            uniqueKeysWithValues: ["deadlock", "serialization"].map {
                ($0, CoreMetrics.Gauge(label: "ticks_store_retries_total", dimensions: [("reason", $0)], factory: factory))
            })
        slowConnectionsClosed = CoreMetrics.Counter(label: "ticks_ws_slow_connections_closed_total", dimensions: [], factory: factory)
        eventsPublished = CoreMetrics.Counter(label: "ticks_events_published_total", dimensions: [], factory: factory)
        messageNewCountsMissing = CoreMetrics.Counter(
            label: "ticks_message_new_counts_missing_total", dimensions: [], factory: factory)
        readMoves = CoreMetrics.Counter(label: "ticks_cursor_moves_total", dimensions: [("kind", "read")], factory: factory)
        deliveredMoves = CoreMetrics.Counter(
            label: "ticks_cursor_moves_total", dimensions: [("kind", "delivered")], factory: factory)
        played = CoreMetrics.Counter(label: "ticks_played_total", dimensions: [], factory: factory)
        clientErrors = CoreMetrics.Counter(label: "ticks_http_errors_total", dimensions: [("class", "4xx")], factory: factory)
        serverErrors = CoreMetrics.Counter(label: "ticks_http_errors_total", dimensions: [("class", "5xx")], factory: factory)
        busEventsLost = CoreMetrics.Counter(label: "ticks_bus_events_lost_total", dimensions: [], factory: factory)
        receiptLogPruned = CoreMetrics.Counter(label: "ticks_receipt_log_pruned_total", dimensions: [], factory: factory)
        unreadDriftFixed = CoreMetrics.Counter(label: "ticks_unread_drift_fixed_total", dimensions: [], factory: factory)
        oldestReceiptMove = CoreMetrics.Gauge(
            label: "ticks_receipt_log_oldest_move_timestamp_seconds", dimensions: [], factory: factory)
    }

    func rateLimited(_ endpoint: APIEndpoint?) -> CoreMetrics.Counter {
        CoreMetrics.Counter(
            label: "ticks_rate_limited_total", dimensions: [("endpoint", endpoint?.rawValue ?? "unmatched")],
            factory: factory)
    }

    /// Receipts sent as frames on a socket, by type, answered or refused.
    func socketReceipt(_ kind: SocketReceipt.Kind, refused: Bool) -> CoreMetrics.Counter {
        CoreMetrics.Counter(
            label: "ticks_socket_receipts_total",
            dimensions: [("type", kind.rawValue), ("outcome", refused ? "refused" : "ok")], factory: factory)
    }

    /// Webhook and push calls by outcome: delivered, failed (to be tried again), dead.
    func webhookCalls(_ kind: String, _ outcome: String) -> CoreMetrics.Counter {
        CoreMetrics.Counter(
            label: "ticks_webhook_calls_total", dimensions: [("kind", kind), ("outcome", outcome)], factory: factory)
    }

    func webhookDuration(_ kind: String) -> CoreMetrics.Timer {
        CoreMetrics.Timer(label: "ticks_webhook_call_duration_seconds", dimensions: [("kind", kind)], factory: factory)
    }

    func outboxCalls(_ state: String) -> CoreMetrics.Gauge {
        CoreMetrics.Gauge(label: "ticks_webhook_outbox_calls", dimensions: [("state", state)], factory: factory)
    }

    func recordOldestReceiptMove(_ time: Timestamp?) {
        oldestReceiptMove.record(Double(time?.microseconds ?? 0) / 1_000_000)
    }

    func requestCounter(route: String, method: String, status: Int) -> CoreMetrics.Counter {
        CoreMetrics.Counter(
            label: "ticks_http_requests_total",
            dimensions: [("route", route), ("method", method), ("status", String(status))], factory: factory)
    }

    func requestTimer(route: String, method: String) -> CoreMetrics.Timer {
        CoreMetrics.Timer(
            label: "ticks_http_request_duration_seconds", dimensions: [("route", route), ("method", method)],
            factory: factory)
    }
}

extension ServerMetrics {
    /// The CPU time this process has used so far, user and system, in seconds.
    static func cpuSeconds() -> Double {
        var usage = rusage()
        #if os(Linux)
        let who = __rusage_who_t(RUSAGE_SELF.rawValue)
        #else
        let who = RUSAGE_SELF
        #endif
        guard getrusage(who, &usage) == 0 else { return 0 }
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1_000_000 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    /// This process's resident set size, from /proc (Linux); nil elsewhere.
    static func residentMemoryBytes() -> Int64? {
        guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return nil }
        let fields = statm.split(separator: " ")
        guard fields.count > 1, let pages = Int64(fields[1]) else { return nil }
        return pages * Int64(sysconf(Int32(_SC_PAGESIZE)))
    }
}
