import Foundation
import Testing
import TicksProtocol

@testable import TicksServer

/// `GET /ready` (docs/operations.md, "Readiness"): what a balancer checks.
@Suite("Readiness")
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
}
