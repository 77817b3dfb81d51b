import CoreMetrics
import Metrics
import Prometheus

/// The server's counters and histograms, on a registry of its own so several
/// servers (tests) can live in one process. Exposed at `GET /metrics`.
public struct ServerMetrics: Sendable {
    public let registry: PrometheusCollectorRegistry
    let factory: PrometheusMetricsFactory

    let connections: CoreMetrics.Meter
    let framesSent: CoreMetrics.Counter
    let slowConnectionsClosed: CoreMetrics.Counter
    let eventsPublished: CoreMetrics.Counter
    let readMoves: CoreMetrics.Counter
    let deliveredMoves: CoreMetrics.Counter

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
        slowConnectionsClosed = CoreMetrics.Counter(label: "ticks_ws_slow_connections_closed_total", dimensions: [], factory: factory)
        eventsPublished = CoreMetrics.Counter(label: "ticks_events_published_total", dimensions: [], factory: factory)
        readMoves = CoreMetrics.Counter(label: "ticks_cursor_moves_total", dimensions: [("kind", "read")], factory: factory)
        deliveredMoves = CoreMetrics.Counter(
            label: "ticks_cursor_moves_total", dimensions: [("kind", "delivered")], factory: factory)
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
