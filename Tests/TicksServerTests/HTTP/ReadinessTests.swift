import Foundation
import HTTPTypes
import HummingbirdTesting
import Logging
import Testing
import TicksProtocol

@testable import TicksServer

/// `GET /ready` (docs/operations.md, "Readiness"): what a balancer checks. The time limit
/// catches a listener that never comes, not slowness: in CI's full parallel run on two cores
/// a PostgreSQL-backed test here took over 60 s (stop 80), so the limit is 10 minutes.
@Suite("Readiness", .timeLimit(.minutes(10)))
struct ReadinessTests {
    @Test("200 while the node serves; 503 with Retry-After while its store is away and once it drains",
          arguments: StoreKind.all)
    func ready(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            let ready = try await server.call(.get, "/ready", apiKey: nil, headers: [:])
            #expect(ready.status == 200, "\(ready.body)")
            #expect(try ready.json()["status"].string == "ready")

            server.services.health.failed(.unreachable("connection refused"))
            let away = try await server.call(.get, "/ready", apiKey: nil)
            try away.expectError(503, code: -1)
            #expect(away.headers[.retryAfter] == "1")
            #expect(try away.json()["message"].string?.contains("connection refused") == true)
            // /health says only that the process answers.
            #expect(try await server.call(.get, "/health", apiKey: nil).status == 200)

            server.services.health.probeAnswered()
            #expect(try await server.call(.get, "/ready", apiKey: nil).status == 200)

            server.services.readiness.drain()
            let draining = try await server.call(.get, "/ready", apiKey: nil)
            try draining.expectError(503, code: -1)
            #expect(draining.headers[.retryAfter] == "1")
        }
    }

    @Test("PostgreSQL: 503 while the node's event bus does not listen (its sockets would miss other nodes' events)")
    func busNotListening() async throws {
        guard PostgresTestDatabase.url != nil else { return }
        try await PostgresTestDatabase.withStore { store, location in
            let pool = try #require(store.unbounded as? PostgresEngine).transactions.pool
            // A listener that cannot connect (nothing listens on port 1) never listens.
            var refused = location
            refused.port = 1
            let deaf = PostgresEventBus(
                pool: pool, configuration: try refused.connectionConfiguration(), schema: location.schema,
                logger: PostgresTestDatabase.logger)
            try await Self.serving(store: store, bus: deaf) { ready in
                let answer = try await ready()
                #expect(answer.status == 503, "\(answer.body)")
                #expect(answer.headers[.retryAfter] == "1")
                #expect(answer.body.contains("does not listen"), "\(answer.body)")
                #expect(!deaf.status.listening)
            }
            // The same with a listener that connects: 200 once it listens.
            let hearing = PostgresEventBus(
                pool: pool, configuration: try location.connectionConfiguration(), schema: location.schema,
                logger: PostgresTestDatabase.logger)
            try await Self.serving(store: store, bus: hearing) { ready async throws in
                // No clock: the suite's time limit bounds a listener that never comes.
                await hearing.untilListening()
                #expect(try await ready().status == 200)
            }
        }
    }

    typealias Answer = (status: Int, body: String, headers: HTTPFields)

    /// The application `ticks serve` builds on `store` with `bus`, its services running; `body`
    /// asks its `GET /ready`.
    private static func serving(
        store: SQLStore, bus: PostgresEventBus,
        _ body: @Sendable (_ ready: @Sendable () async throws -> Answer) async throws -> Void
    ) async throws {
        var configuration = TicksServerConfiguration(
            host: "127.0.0.1", port: 0,
            credentials: try Credentials(apiKey: TestKeys.apiKey, apiSecret: TestKeys.apiSecret))
        configuration.eventBus = bus
        var logger = Logger(label: "ticks-test")
        logger.logLevel = .warning
        let (application, _) = await buildApplication(configuration: configuration, store: store, logger: logger)
        try await application.test(.router) { client in
            try await body {
                let response = try await client.execute(uri: "/ready", method: .get)
                return (Int(response.status.code), String(buffer: response.body), response.headers)
            }
        }
    }
}
