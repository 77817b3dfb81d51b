import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import ServiceLifecycle
import TicksProtocol

/// What a Ticks server needs to start.
public struct TicksServerConfiguration: Sendable {
    public var host: String
    public var port: Int
    public var credentials: Credentials
    /// Frames that may wait for one connection before it is closed as too slow.
    public var connectionBufferCapacity: Int
    /// How often the server pings each WebSocket; one that does not answer is closed.
    public var pingInterval: Duration
    /// In channels with more members than this, read and delivered events go
    /// only to the authors of the messages they cover (SPEC §7).
    public var largeChannelMembers = 100
    /// Serves the web demo at `/` and hands out user tokens at `/demo/token` to anyone (`ticks serve --demo`).
    public var demo = false
    /// How events reach the connections on other nodes sharing the store; nil with one node.
    public var eventBus: (any EventBus)?
    /// Called once the server listens, with the port it got (useful with port 0).
    public var onServerRunning: @Sendable (_ port: Int) async -> Void = { _ in }

    public init(
        host: String = "127.0.0.1", port: Int = 3030, credentials: Credentials, connectionBufferCapacity: Int = 1024,
        pingInterval: Duration = .seconds(30)
    ) {
        self.host = host
        self.port = port
        self.credentials = credentials
        self.connectionBufferCapacity = connectionBufferCapacity
        self.pingInterval = pingInterval
    }
}

/// The parts of a running server that tests and the CLI reach into.
public struct TicksServices: Sendable {
    public let store: any TicksStore
    public let hub: ConnectionHub
    public let metrics: ServerMetrics
    public let authority: TokenAuthority
}

/// Builds the application the `ticks serve` binary runs; tests build the same one.
public func buildApplication(
    configuration: TicksServerConfiguration, store: any TicksStore, logger: Logger
) async -> (application: some ApplicationProtocol, services: TicksServices) {
    let metrics = ServerMetrics()
    let hub = ConnectionHub(
        bufferCapacity: configuration.connectionBufferCapacity, metrics: metrics, logger: logger)
    let authority = await TokenAuthority(credentials: configuration.credentials)
    let services = TicksServices(store: store, hub: hub, metrics: metrics, authority: authority)
    let router = buildRouter(services: services, configuration: configuration, logger: logger)
    let webSocketResponder = router.buildResponder()
    let application = Application(
        router: router,
        server: HTTPServerBuilder { responder in
            QuiescingChildChannel(
                base: HTTP1WebSocketUpgradeChannel(
                    responder: responder, webSocketResponder: webSocketResponder,
                    configuration: .init(
                        ws: .init(
                            maxFrameSize: ConnectController.maxInboundFrame,
                            autoPing: .enabled(timePeriod: configuration.pingInterval)))))
        },
        configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "ticks"),
        services: [ConnectionShutdown(hub: hub)] + (configuration.eventBus.map { [EventBusService(bus: $0, hub: hub)] } ?? []),
        onServerRunning: { channel in await configuration.onServerRunning(channel.localAddress?.port ?? 0) },
        logger: logger)
    return (application, services)
}

/// Every route: `/health` and `/metrics` are open, the Stream API needs a token; demo mode adds the web client.
func buildRouter(services: TicksServices, configuration: TicksServerConfiguration, logger: Logger)
    -> Router<TicksRequestContext>
{
    let router = Router(context: TicksRequestContext.self)
    router.add(middleware: StreamErrorMiddleware())
    router.add(middleware: RequestMetricsMiddleware(metrics: services.metrics))

    router.get("health") { _, context in
        try context.respond(["status": "ok"])
    }
    router.get("metrics") { _, _ in
        Response(
            status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
            body: .init(byteBuffer: .init(string: await services.metrics.exposition(store: services.store))))
    }

    let api = router.group().add(middleware: AuthMiddleware(authority: services.authority))
    let events = EventPublisher(
        hub: services.hub, bus: configuration.eventBus, metrics: services.metrics, logger: logger,
        audience: ReceiptAudience(fullChannelLimit: configuration.largeChannelMembers))
    UsersController(store: services.store).addRoutes(to: api)
    ChannelTypesController(store: services.store).addRoutes(to: api)
    ChannelsController(store: services.store, hub: services.hub, events: events).addRoutes(to: api)
    MessagesController(store: services.store).addRoutes(to: api)
    ConnectController(store: services.store, hub: services.hub, authority: services.authority, logger: logger)
        .addRoutes(to: router)
    if configuration.demo {
        DemoController(authority: services.authority).addRoutes(to: router, logger: logger)
    }
    return router
}

/// On graceful shutdown, ends every WebSocket's event stream so its handler returns and the socket closes.
struct ConnectionShutdown: Service {
    let hub: ConnectionHub

    func run() async throws {
        // Returns when graceful shutdown begins; throws (and so also returns) when cancelled.
        _ = try? await gracefulShutdown()
        hub.closeAll()
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
