import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import PostgresNIO
import ServiceLifecycle
import TicksProtocol
import Tracing

/// What a Ticks server needs to start.
public struct TicksServerConfiguration: Sendable {
    public var host: String
    public var port: Int
    public var credentials: Credentials
    /// The bounds on what clients can make the server hold (README: "Limits").
    public var limits = ServerLimits()
    /// Stream-style rate limits; `.off` for benchmarks.
    public var rateLimits = RateLimits()
    /// Which web pages' scripts may call the API from a browser (CORS); any by default.
    public var browserOrigins = BrowserOrigins.any
    /// How often the server pings each WebSocket; one that has not answered a
    /// ping by the next is closed (`ticks serve --ping-interval`).
    public var pingInterval: Duration
    public static let defaultPingInterval: Duration = .seconds(30)
    /// In channels with more members than this, read and delivered events go
    /// only to the authors of the messages they cover (docs/events.md, "Large channels").
    public var largeChannelMembers = 100
    /// Webhooks and the push hook (docs/webhooks.md); none by default.
    public var webhooks = WebhookSettings()
    /// How long the receipt log keeps cursor moves (`ReceiptLogPruner`); 90 days by default.
    public var receiptLogRetention = ReceiptLogRetention()
    /// Serves the web demo at `/` and hands out user tokens at `/demo/token` to anyone (`ticks serve --demo`).
    public var demo = false
    /// Where the state is kept (`buildApplication(configuration:logger:)` opens it).
    public var storage: Storage = .memory
    /// How events reach the connections on other nodes sharing the store: made
    /// for `.postgres` storage; nil with one node.
    public var eventBus: (any EventBus)?
    /// The clock of the server's own waits: the webhook sender's retries,
    /// pauses, lease and call timeout, the event bus's reconnections, the rate limits' windows,
    /// the receipt log pruner's rounds and its cutoff. The
    /// header and idle timeouts are NIO's, on the event loops' real clock.
    public var time: TimeSource = .system
    /// PostgreSQL: the last migration this node applies (all when nil). The rolling-upgrade test
    /// plays the previous release with it (docs/operations.md, "Upgrade a cluster").
    public var migrationsUpTo: String?
    /// Spans through the Tracing API (swift-distributed-tracing) for HTTP requests, the store's
    /// transactions and statements, the event fan-out and, across the event bus, the other nodes'
    /// socket writes (docs/operations.md, "Traces"). The caller bootstraps the tracer
    /// (`ticks serve --otel-endpoint`); off, none of this is in the request path.
    public var tracing = false
    /// This node's name: on the event bus, in `GET /admin/status`, and in traces (`service.instance.id`).
    public var nodeID = UUID().uuidString.lowercased()
    /// How long a request waits on the store before it is answered 503 with
    /// `Retry-After` (`ticks serve --store-timeout`; docs/operations.md, "When the database goes away").
    public var storeDeadline = StoreDeadline()
    /// SQLite: serve a database a newer Ticks migrated (`ticks serve --allow-newer-schema`); refused
    /// by default, since this older binary may misread what the newer one wrote. (PostgreSQL's nodes
    /// run on a newer schema during a rolling upgrade: there it is always allowed.)
    public var allowsNewerSchema = false
    /// Where `GET /metrics` is served: nil (the default) on the API's own address; an address of
    /// its own keeps the metrics off the public one (`ticks serve --metrics-port`), and the API's
    /// address then answers them 404.
    public var metricsAddress: MetricsAddress?
    /// Called once the metrics listener listens, with the port it got (useful with port 0).
    public var onMetricsRunning: @Sendable (_ port: Int) async -> Void = { _ in }
    /// Called once the server listens, with the port it got (useful with port 0).
    public var onServerRunning: @Sendable (_ port: Int) async -> Void = { _ in }

    public init(
        host: String = "127.0.0.1", port: Int = 3030, credentials: Credentials,
        pingInterval: Duration = TicksServerConfiguration.defaultPingInterval
    ) {
        self.host = host
        self.port = port
        self.credentials = credentials
        self.pingInterval = pingInterval
    }
}

/// The parts of a running server that tests and the CLI reach into.
public struct TicksServices: Sendable {
    public let store: any TicksStore
    /// Whether the store answers (`GET /admin/status`, `/metrics`).
    public let health: StoreHealth
    public let hub: ConnectionHub
    public let metrics: ServerMetrics
    public let authority: TokenAuthority
    public let rateLimiter: RateLimiter
    /// The app's settings that `PATCH /app` changes, as this node applies them.
    let appOptions: AppOptionsCache
    /// The webhook outbox's queries (the store's tables).
    let outbox: any WebhookOutbox
    /// Deletes the receipt log's old moves; nil when retention is off.
    let receiptLogPruner: ReceiptLogPruner?
    /// Whether the node drains (`GET /ready`).
    public let readiness = NodeReadiness()
}

/// Builds the application the `ticks serve` binary runs, with the store its
/// configuration names and everything that store needs running beside the
/// server: PostgreSQL's connection pool and event bus, SQLite's WAL
/// checkpointer, the receipt log's pruner — services of the application's group, started with it and
/// stopped gracefully with it. PostgreSQL's schema is migrated before the
/// server takes its first request. `services` run in the group too, started
/// first and stopped last (a tracer's exporter, which flushes the last spans).
public func buildApplication(
    configuration: TicksServerConfiguration, logger: Logger, services extraServices: [any Service] = []
) async throws -> (application: some ApplicationProtocol, services: TicksServices) {
    var configuration = configuration
    let store: SQLStore
    var services: [any Service] = extraServices
    let traced = configuration.tracing
    var prepare: (@Sendable () async throws -> Void)?
    switch configuration.storage {
    case .memory:
        store = try SQLStore.memory(traced: traced)
    case .sqlite(let path):
        var checkpoints = SQLiteEngine.CheckpointPolicy()
        checkpoints.time = configuration.time
        let engine = try SQLiteEngine.open(
            path: path, checkpoints: checkpoints, allowingNewerSchema: configuration.allowsNewerSchema)
        store = SQLStore(engine: engine, traced: traced, deadline: configuration.storeDeadline)
        services += engine.services
    case .postgres(let url):
        let location = try PostgresLocation(url: url)
        let health = StoreHealth(logger: logger)
        let pool = PostgresPool(
            configuration: location.clientConfiguration(silence: configuration.storeDeadline.timeout),
            probe: try location.connectionConfiguration(silence: configuration.storeDeadline.timeout),
            health: health, time: configuration.storeDeadline.time, logger: logger)
        store = SQLStore.postgres(
            pool: pool, logger: logger, migrationsUpTo: configuration.migrationsUpTo, traced: traced,
            deadline: configuration.storeDeadline, health: health)
        services.append(pool)
        prepare = { try await store.prepare() }
        let counted = store
        configuration.eventBus = PostgresEventBus(
            pool: pool,
            configuration: try location.connectionConfiguration(silence: configuration.storeDeadline.timeout),
            schema: location.schema,
            queueBytes: configuration.limits.busQueueBytes, time: configuration.time, node: configuration.nodeID,
            tracing: traced, deadline: configuration.storeDeadline,
            counts: { try await counted.recipientCounts(in: $0, among: $1) }, logger: logger)
    }
    return await buildApplication(
        configuration: configuration, store: store, logger: logger, services: services, beforeServerStarts: prepare)
}

/// Builds the application around a store that is already open (tests that bring their own).
public func buildApplication(
    configuration: TicksServerConfiguration, store: SQLStore, logger: Logger,
    services storeServices: [any Service] = [], beforeServerStarts: (@Sendable () async throws -> Void)? = nil
) async -> (application: some ApplicationProtocol, services: TicksServices) {
    let limits = configuration.limits
    let metrics = ServerMetrics()
    let hub = ConnectionHub(
        bufferBytes: limits.connectionBufferBytes, maxConnectionsPerUser: limits.maxConnectionsPerUser,
        metrics: metrics, logger: logger)
    // The caches share one budget: decoded users get three quarters, verified tokens the rest.
    StoredJSON.budget(bytes: limits.cacheBytes / 4 * 3)
    let authority = await TokenAuthority(
        credentials: configuration.credentials, cacheBytes: limits.cacheBytes / 4, time: configuration.time)
    let pruner = ReceiptLogPruner(
        store: store, retention: configuration.receiptLogRetention, time: configuration.time, metrics: metrics,
        logger: logger)
    let services = TicksServices(
        store: store, health: store.health, hub: hub, metrics: metrics, authority: authority,
        rateLimiter: RateLimiter(limits: configuration.rateLimits, time: configuration.time),
        appOptions: AppOptionsCache(store: store, time: configuration.time), outbox: store,
        receiptLogPruner: pruner)
    // The services that use the store start once it is prepared (PostgreSQL: out of recovery and
    // migrated), so a node waiting for a standby's promotion does not also fail to LISTEN, lease or
    // prune there every few seconds.
    let prepared = Opening()
    var webhookServices: [any Service] = []
    var webhookSender: WebhookSender?
    if configuration.webhooks.isEnabled {
        let sender = WebhookSender(
            store: store, kind: store.kind, settings: configuration.webhooks, authority: authority, metrics: metrics,
            logger: logger, time: configuration.time)
        store.recordChanges(
            with: WebhookRecorder(
                settings: configuration.webhooks, offline: { hub.unconnected(among: $0) }, wake: { sender.wake() }))
        webhookServices.append(sender)
        webhookSender = sender
    }
    let router = buildRouter(
        services: services, configuration: configuration, webhookSender: webhookSender, logger: logger)
    let webSocketResponder = WebSocketUpgradeResponder(base: router.buildResponder())
    var application = Application(
        router: router,
        server: HTTPServerBuilder { responder in
            QuiescingChildChannel(
                base: HTTP1WebSocketUpgradeChannel(
                    responder: responder, webSocketResponder: webSocketResponder,
                    configuration: .init(
                        http1: .init(idleTimeout: TimeAmount(limits.idleTimeout)),
                        ws: .init(
                            maxFrameSize: limits.maxInboundFrameBytes,
                            autoPing: .enabled(timePeriod: configuration.pingInterval)))),
                headerTimeout: limits.headerTimeout)
        },
        configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "ticks"),
        services: (storeServices + [ConnectionShutdown(hub: hub, readiness: services.readiness)]
            + (webhookServices + (pruner.map { [$0] } ?? [])
                + (configuration.eventBus.map { [EventBusService(bus: $0, hub: hub)] } ?? []))
            .map { AfterStorePrepared(prepared: prepared, base: $0) }
            + (configuration.metricsAddress.map {
                [metricsApplication(at: $0, services: services, configuration: configuration, logger: logger)]
            } ?? []))
            .map { services.readiness.tracked($0, name: serviceName($0)) },
        onServerRunning: { channel in await configuration.onServerRunning(channel.localAddress?.port ?? 0) },
        logger: logger)
    // The app's settings are read before the first request: the webhooks' events use the last read.
    application.beforeServerStarts { [appOptions = services.appOptions] in
        // Preparing can wait long (for a standby's promotion): a node asked to stop meanwhile stops.
        do {
            try await cancelWhenGracefulShutdown { try await beforeServerStarts?() }
        } catch {
            if Task.isShuttingDownGracefully { throw StoppedBeforeServing(whilePreparing: error) }
            throw error
        }
        prepared.open()
        _ = try await appOptions.current()
    }
    return (application, services)
}

/// Every route: `/health`, `/metrics` and `/openapi.json` are open, the Stream
/// API needs a token; demo mode adds the web client. Middleware, outermost
/// first: tracing when on (a span per request, the parent of the store's and
/// the events' spans; it honours a client's W3C `traceparent`), metrics (sees
/// every answer), CORS (`BrowserOrigins`), rate limits (headers on every answer), Stream's error format.
func buildRouter(
    services: TicksServices, configuration: TicksServerConfiguration, webhookSender: WebhookSender?, logger: Logger
) -> Router<TicksRequestContext> {
    let router = Router(context: TicksRequestContext.self)
    let errors = StreamErrorMiddleware(
        served: Set(
            APIEndpoint.allCases.filter {
                ($0 != .demoToken || configuration.demo) && ($0 != .metrics || configuration.metricsAddress == nil)
            }))
    if configuration.tracing {
        // `/connect` carries the user's token in its query: never in a span.
        router.add(
            middleware: TracingMiddleware(
                redactingQueryParameters: ["authorization", "api_key"],
                attributes: ["ticks.node": .string(configuration.nodeID)]))
    }
    router.add(middleware: RequestMetricsMiddleware(metrics: services.metrics, readiness: services.readiness))
    // A browser's preflight is answered here, before rate limits and tokens (it carries neither).
    if let origins = configuration.browserOrigins.middleware(TicksRequestContext.self) {
        router.add(middleware: origins)
    }
    if configuration.rateLimits.enabled {
        router.add(
            middleware: RateLimitMiddleware(
                limiter: services.rateLimiter, authority: services.authority, metrics: services.metrics,
                errors: errors))
    }
    router.add(middleware: errors)

    router.on(.health) { _, context in
        try context.respond(["status": "ok"])
    }
    // For a balancer: 503 with Retry-After while the node drains, its store is known to be away, or
    // its event bus does not listen (its sockets would miss the other nodes' events).
    router.on(.ready) {
        [readiness = services.readiness, health = services.health, bus = configuration.eventBus] _, context in
        if readiness.isDraining { throw APIError.unavailable("the node is stopping: send requests to another") }
        if let bus, !bus.status.listening {
            throw APIError.unavailable("the node does not hear the other nodes yet (its event bus does not listen)")
        }
        if let since = health.unreachableSince {
            throw APIError.unavailable(
                "the store has been unreachable since \(since) (\(health.reason ?? "no answer")): try again shortly")
        }
        return try context.respond(["status": "ready"])
    }
    if configuration.metricsAddress == nil {
        router.on(.metrics) { _, _ in await metricsResponse(services) }
    }
    OpenAPIDocument(logger: logger).addRoutes(to: router)

    let api = router.group().add(middleware: AuthMiddleware(authority: services.authority))
    let store = services.store
    let events = EventPublisher(
        hub: services.hub, bus: configuration.eventBus,
        counts: { try await store.recipientCounts(in: $0, among: $1) }, metrics: services.metrics, logger: logger,
        tracing: configuration.tracing)
    let receipts = Receipts(
        store: services.store, events: events,
        audience: ReceiptAudience(fullChannelLimit: configuration.largeChannelMembers), options: services.appOptions)
    AppController(
        store: services.store, options: services.appOptions, rateLimiter: services.rateLimiter,
        limits: configuration.limits,
        rateLimits: configuration.rateLimits, apiKey: configuration.credentials.apiKey,
        webhooks: configuration.webhooks
    ).addRoutes(to: api)
    WebhooksController(outbox: services.outbox).addRoutes(to: api)
    StatusController(
        store: services.store, health: services.health, outbox: services.outbox, hub: services.hub,
        bus: configuration.eventBus,
        webhooks: webhookSender, retention: configuration.receiptLogRetention, time: configuration.time,
        startedAt: configuration.time.wallNow
    ).addRoutes(to: api)
    UsersController(store: services.store, events: events, limits: configuration.limits).addRoutes(to: api)
    UnreadController(store: services.store, metrics: services.metrics, logger: logger).addRoutes(to: api)
    SyncController(store: services.store, limits: configuration.limits, receipts: receipts).addRoutes(to: api)
    ChannelTypesController(store: services.store).addRoutes(to: api)
    ChannelsController(
        store: services.store, hub: services.hub, events: events, receipts: receipts, limits: configuration.limits
    ).addRoutes(to: api)
    MessagesController(store: services.store, events: events, receipts: receipts, limits: configuration.limits)
        .addRoutes(to: api)
    ConnectController(
        store: services.store, hub: services.hub, authority: services.authority, limits: configuration.limits,
        receipts: receipts,
        rateLimiter: configuration.rateLimits.enabled ? services.rateLimiter : nil, bus: configuration.eventBus,
        listenWait: configuration.storeDeadline.timeout, time: configuration.time, logger: logger
    ).addRoutes(to: router)
    if configuration.demo {
        DemoController(authority: services.authority).addRoutes(to: router, logger: logger)
    }
    return router
}

/// On graceful shutdown, says the node drains (`GET /ready` answers 503) and ends every
/// WebSocket's event stream so its handler returns and the socket closes.
struct ConnectionShutdown: Service {
    let hub: ConnectionHub
    let readiness: NodeReadiness

    func run() async throws {
        // Returns when graceful shutdown begins; throws (and so also returns) when cancelled.
        _ = try? await gracefulShutdown()
        readiness.drain()
        hub.closeAll()
    }
}

/// Closes every WebSocket before the HTTP server's graceful shutdown does: run it after the
/// application in one service group (`ticks serve` does), which tells its services to stop last
/// first. The node drains (`GET /ready` answers 503), takes no new socket, and closes the open
/// ones with 1011, waiting up to `limit` for them; the HTTP server's own shutdown, which comes
/// next, would close them with 1000, which Stream's clients take as final (they came back only
/// after their 35 s connection check).
public struct SocketsClosedFirst: Service {
    let hub: ConnectionHub
    let readiness: NodeReadiness
    let time: TimeSource
    let limit: Duration

    public init(services: TicksServices, time: TimeSource, limit: Duration = .seconds(5)) {
        self.hub = services.hub
        self.readiness = services.readiness
        self.time = time
        self.limit = limit
    }

    public func run() async throws {
        // Returns when graceful shutdown begins; throws (and so also returns) when cancelled.
        _ = try? await gracefulShutdown()
        readiness.drain()
        await hub.shutDown(within: limit, time: time)
    }
}

/// Graceful shutdown overran its bound: what was left was cancelled (`runWithShutdownBound`).
public struct ShutdownOverran: Error, CustomStringConvertible {
    public let bound: Duration
    /// What the node still waited for: requests in flight, services that had not ended.
    public let unfinished: [String]

    public var description: String {
        "graceful shutdown took longer than \(bound): cancelled what was left (\(unfinished.joined(separator: ", ")))"
    }
}

/// Runs `group`, whose graceful shutdown may take `bound` on `time` from the moment the node
/// drains (`NodeReadiness`, which `SocketsClosedFirst` or `ConnectionShutdown` tells). Past it, what
/// the node still waits for is logged, the group is cancelled, so that its services and requests end
/// at once, and `ShutdownOverran` is thrown: a stop (systemd's `TimeoutStopSec`, an orchestrator's
/// grace period) always ends in a known time, saying what held it, rather than in a SIGKILL.
public func runWithShutdownBound(
    _ group: ServiceGroup, readiness: NodeReadiness, bound: Duration, time: TimeSource, logger: Logger
) async throws {
    try await withThrowingTaskGroup(of: Void.self) { tasks in
        tasks.addTask { try await group.run() }
        tasks.addTask {
            await readiness.waitUntilDraining()
            try await time.sleep(for: bound)
            let overran = ShutdownOverran(bound: bound, unfinished: readiness.unfinished)
            logger.error("\(overran)")
            throw overran
        }
        // The group ended (the bound's task is then cancelled), or the bound passed (the group is then
        // cancelled, and waited for, as the error leaves).
        try await tasks.next()
        tasks.cancelAll()
    }
}

/// Runs the event bus until graceful shutdown begins.
struct EventBusService: Service {
    let bus: any EventBus
    let hub: ConnectionHub

    func run() async throws {
        try await cancelWhenGracefulShutdown {
            try await bus.run(hub: hub)
        }
    }
}

/// The node was asked to stop (SIGTERM, SIGINT) while it prepared its store, before it served
/// anything: `ticks serve` then exits 0. `whilePreparing` is what the cancelled preparation threw.
public struct StoppedBeforeServing: Error, CustomStringConvertible {
    public let whilePreparing: any Error

    public var description: String { "stopped before serving, while preparing the store" }
}

/// A service's type, or for one waiting for the store, the type of the one it runs (what a shutdown
/// that overran names: `NodeReadiness.unfinished`).
func serviceName(_ service: any Service) -> String {
    if let waiting = service as? AfterStorePrepared { return serviceName(waiting.base) }
    return String(describing: type(of: service))
}

/// Runs `base` once the store is prepared; returns without running it when the node stops first.
struct AfterStorePrepared: Service, CustomStringConvertible {
    let prepared: Opening
    let base: any Service

    var description: String { String(describing: base) }

    func run() async throws {
        do {
            try await cancelWhenGracefulShutdown { try await prepared.wait() }
        } catch is CancellationError {
            return
        }
        try await base.run()
    }
}

/// An address of its own for `GET /metrics` (`TicksServerConfiguration.metricsAddress`).
public struct MetricsAddress: Sendable, Equatable {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }
}

/// The metrics in Prometheus's text format.
private func metricsResponse(_ services: TicksServices) async -> Response {
    Response(
        status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
        body: .init(
            byteBuffer: .init(
                string: await services.metrics.exposition(
                    store: services.store, health: services.health, outbox: services.outbox,
                    readiness: services.readiness))))
}

/// A second listener that serves only `GET /metrics` (anything else is 404), run beside the
/// API's as one of its services: it starts and stops with the server.
private func metricsApplication(
    at address: MetricsAddress, services: TicksServices, configuration: TicksServerConfiguration, logger: Logger
) -> some Service {
    let router = Router()
    router.get(RouterPath(APIEndpoint.metrics.path)) { _, _ in await metricsResponse(services) }
    return Application(
        router: router,
        configuration: .init(address: .hostname(address.host, port: address.port), serverName: "ticks-metrics"),
        onServerRunning: { channel in await configuration.onMetricsRunning(channel.localAddress?.port ?? 0) },
        logger: logger)
}
