import Foundation
import Testing
import TicksProtocol
import TicksTestSupport

@testable import TicksClient
@testable import TicksServer

/// A socket that drops and comes back (docs/sdk.md, "Reconnecting"): the
/// catch-up starts from where the client was in step before the drop, so
/// what changed while it was down shows. Until 2026-12 the new connection's
/// first frame moved that point past the outage, and a delete made during it
/// was never seen (issue 55: bob's client kept a deleted message for good).
@Suite("Catching up after a dropped socket")
struct CatchUpTests {
    @Test("a delete made while the socket was down shows once it is back")
    func deleteWhileDown() async throws {
        try await LiveServer.with { server in
            try await server.upsert("alice", "bob")
            try await server.createChannel("messaging:cu", members: ["alice", "bob"])
            let alice = try await server.connected("alice")
            // bob reconnects only when the test moves his clock; with no overlap the catch-up starts
            // exactly where his client was in step, so starting after the outage would miss the delete.
            let clock = ManualClock()
            let bob = try await server.connected("bob") {
                $0.clock = clock
                $0.syncOverlap = .zero
                $0.marksDelivered = false
            }
            let channel = await bob.channel(ChannelID(type: "messaging", id: "cu"))
            try await channel.load()
            try await server.send("messaging:cu", id: "cu1", from: "alice")
            try await channel.wait("cu1, live") { $0.message(withID: "cu1") != nil }
            _ = try await eventually("bob caught up") { await bob.isCaughtUp ? true : nil }

            let services = try #require(server.services)
            #expect(services.hub.close(usersOf: ["bob"]) == 1)
            _ = try await eventually("bob's socket down") { await bob.connectionStatus.isConnected ? nil : true }
            _ = try await alice.delete(messageId: "cu1")

            _ = try await eventually("bob reconnected") {
                clock.advance(by: .milliseconds(100))
                return await bob.connectionStatus.isConnected ? true : nil
            }
            try await channel.wait("the delete, caught up") { $0.message(withID: "cu1")?.isDeleted == true }
            await bob.disconnect()
            await alice.disconnect()
        }
    }
}
