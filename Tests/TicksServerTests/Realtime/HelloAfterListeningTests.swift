import Logging
import NIOWebSocket
import Testing
import TicksProtocol
import TicksTestSupport

@testable import TicksServer

/// A WebSocket's hello (`health.check`) waits until the node's event bus listens
/// (docs/operations.md, "Readiness"): what the other nodes published before it would never
/// reach the connection, while its client, once it has its hello, takes its state as current.
@Suite("A socket's hello waits for the event bus", .timeLimit(.minutes(10)))
struct HelloAfterListeningTests {
    @Test("PostgreSQL: while the bus does not listen a socket gets no hello; at the wait's end it is dropped (1011)")
    func deafBus() async throws {
        guard PostgresTestDatabase.url != nil else { return }
        try await PostgresTestDatabase.withStore { store, location in
            // A listener that cannot connect (nothing listens on port 1) never listens.
            var refused = location
            refused.port = 1
            let deaf = try Self.bus(store, location, connectingTo: refused)
            let clock = ManualClock()
            try await Self.serving(store, bus: deaf, time: clock.timeSource) { server in
                try await server.upsert("alice")
                let waits = clock.deadlines.filter { $0 == clock.now.offset + StoreDeadline.defaultTimeout }.count
                let alice = try await TestSocket.connect(server, as: "alice", waitForHello: false)
                defer { alice.close() }
                // The connection waits for the bus on the clock: one sleep more, of the wait's length
                // (or, were the rule broken, the hello comes).
                try await eventually {
                    clock.deadlines.filter { $0 == clock.now.offset + StoreDeadline.defaultTimeout }.count > waits
                        || !alice.pending.isEmpty
                }
                #expect(server.services.hub.connectionCount == 1)
                #expect(alice.pending.isEmpty, "no hello while the node does not hear the others")
                clock.advance(by: StoreDeadline.defaultTimeout)
                let close = try await alice.closeFrame()
                #expect(close?.closeCode == .unexpectedServerError, "1011: the client comes back")
                #expect(!alice.pending.contains { $0["type"].string == "health.check" })
            }
        }
    }

    @Test("PostgreSQL: with a bus that listens, the hello comes, on a clock nobody advances")
    func listeningBus() async throws {
        guard PostgresTestDatabase.url != nil else { return }
        try await PostgresTestDatabase.withStore { store, location in
            let hearing = try Self.bus(store, location, connectingTo: location)
            let clock = ManualClock()
            try await Self.serving(store, bus: hearing, time: clock.timeSource) { server in
                try await server.upsert("alice")
                let alice = try await TestSocket.connect(server, as: "alice")
                defer { alice.close() }
                #expect(alice.hello?["me"]["id"].string == "alice")
                #expect(hearing.status.listening)
            }
        }
    }

    /// A bus on `store`'s pool whose listener connects as `listener` says.
    private static func bus(_ store: SQLStore, _ location: PostgresLocation, connectingTo listener: PostgresLocation)
        throws -> PostgresEventBus
    {
        let pool = try #require(store.unbounded as? PostgresEngine).transactions.pool
        return PostgresEventBus(
            pool: pool, configuration: try listener.connectionConfiguration(), schema: location.schema,
            logger: PostgresTestDatabase.logger)
    }

    /// A live node on `store` with `bus`, its time on `time`.
    private static func serving(
        _ store: SQLStore, bus: PostgresEventBus, time: TimeSource, _ body: @Sendable (TestServer) async throws -> Void
    ) async throws {
        var configuration = TicksServerConfiguration(
            host: "127.0.0.1", port: 0,
            credentials: try Credentials(apiKey: TestKeys.apiKey, apiSecret: TestKeys.apiSecret))
        configuration.eventBus = bus
        configuration.time = time
        var logger = Logger(label: "ticks-test")
        logger.logLevel = .error
        try await TestServer.live(configuration: configuration, store: store, logger: logger, body)
    }
}
