import Foundation
import Testing
import TicksProtocol
import TicksTestSupport

@testable import TicksServer

/// `GET /admin/status` (docs/operations.md, "Watch it"): what the node reports
/// follows what happens on it, and only a server token sees it.
@Suite("Status view")
struct StatusTests {
    @Test("a server token sees the node's status; a user token is refused (403), no token too (401)", arguments: StoreKind.all)
    func access(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await server.upsert("alice", "bob")
            let status = try await server.ok(.get, "/admin/status")
            #expect(status["version"].string == BuildInfo.version)
            #expect(status["commit"].string == BuildInfo.commit)
            #expect(status["store"]["kind"].string == (kind == .postgres ? "postgres" : "sqlite"))
            #expect((status["store"]["size_bytes"].int ?? 0) > 0)
            #expect(status["uptime_seconds"].int.map { $0 >= 0 } == true)
            #expect(status["store"]["receipt_log_retention_seconds"].int == 90 * 86_400)
            #expect(!status["store"]["oldest_receipt_move"].exists, "nobody moved a cursor yet")
            let start = Timestamp.now()
            try await server.createChannel("messaging:s", members: ["alice", "bob"])
            try await server.send("messaging:s", id: "s1", from: "alice")
            try await server.markRead("messaging:s", "bob")
            let oldest = try #require(try await server.ok(.get, "/admin/status")["store"]["oldest_receipt_move"].time)
            #expect(oldest >= start && oldest <= .now())
            #expect(status["webhooks"]["enabled"].bool == false)
            #expect(!status["bus"].exists)
            try await server.call(.get, "/admin/status", token: try await server.token("alice"))
                .expectError(403, code: 17)
            try await server.call(.get, "/admin/status", token: "not.a.jwt").expectError(401, code: 5)
        }
    }

    @Test("connections open on this node and those closed as too slow are counted", arguments: StoreKind.all)
    func connections(kind: StoreKind) async throws {
        var limits = ServerLimits.patient
        limits.connectionBufferBytes = 2 * (128 + 64)
        try await TestServer.run(kind, limits: limits) { server in
            let hub = server.services.hub
            let (_, aliceFrames) = try hub.register(userID: "alice")
            let (_, aliceAgain) = try hub.register(userID: "alice")
            let (bob, bobFrames) = try hub.register(userID: "bob")
            var status = try await server.ok(.get, "/admin/status")
            #expect(status["connections"]["open"].int == 3)
            #expect(status["connections"]["users"].int == 2)
            #expect(status["connections"]["slow_closed"].int == 0)
            // Nobody reads: the third frame passes every buffer's bound.
            for index in 0..<3 {
                hub.send(EncodedEvent(Data((String(index) + String(repeating: ".", count: 99)).utf8)), to: ["bob"])
            }
            #expect(bob.isOverflowed)
            hub.unregister(bob)
            status = try await server.ok(.get, "/admin/status")
            #expect(status["connections"]["open"].int == 2)
            #expect(status["connections"]["users"].int == 1)
            #expect(status["connections"]["slow_closed"].int == 1)
            withExtendedLifetime((aliceFrames, aliceAgain, bobFrames)) {}
        }
    }

    @Test("the webhook outbox is shown per receiver: calls waiting, the oldest's time, this node sending", arguments: StoreKind.all)
    func webhooks(kind: StoreKind) async throws {
        // Nothing answers there; on a clock nobody advances, the first call hangs and the rest wait.
        let hook = URL(string: "http://127.0.0.1:9/hook")!
        let clock = ManualClock()
        var settings = WebhookTests.clockSettings(webhook: hook)
        settings.webhooks[0].eventTypes = [.messageNew]
        try await TestServer.run(kind, webhooks: settings, time: clock.timeSource) { server in
            try await server.upsert("alice", "bob")
            try await server.createChannel("messaging:w", members: ["alice", "bob"])
            let before = Timestamp.now()
            for index in 1...3 { try await server.send("messaging:w", id: "w\(index)", from: "alice") }
            // The lease runs 15 s on the wall clock beneath the test's clock, and the sender renews it
            // only when it looks again: on a loaded machine it could lapse before the status is read
            // (the loaded run of 2026-12-02), and on a clock nobody advances the sender would never
            // look. A poll interval (1 s) each real second lets it renew; at most 30, far from the
            // 60 s backoff, so no call is tried again.
            var lastAdvance = ContinuousClock.now
            var advanced = Duration.zero
            try await eventually {
                if try await server.ok(.get, "/admin/status")["webhooks"]["sending"].bool == true { return true }
                if ContinuousClock.now - lastAdvance >= .seconds(1), advanced < .seconds(30) {
                    clock.advance(by: .seconds(1))
                    advanced += .seconds(1)
                    lastAdvance = ContinuousClock.now
                }
                return false
            }
            let status = try await server.ok(.get, "/admin/status")
            let webhooks = status["webhooks"]
            #expect(webhooks["enabled"].bool == true)
            #expect(webhooks["waiting"].int == 3 && webhooks["dead"].int == 0)
            let receivers = webhooks["receivers"].array
            #expect(receivers.count == 1)
            #expect(receivers.first?["url"].string == hook.absoluteString)
            #expect(receivers.first?["hook"].string == "webhook")
            #expect(receivers.first?["waiting"].int == 3)
            let oldest = try #require(receivers.first?["oldest_waiting"].string.flatMap(Timestamp.init(rfc3339:)))
            #expect(oldest >= before && oldest <= .now())
        }
    }
}
