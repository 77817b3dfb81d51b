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
            // His clock moves while the test waits: a socket that dropped on a loaded machine comes back.
            _ = try await eventually("cu1, live", moving: clock) {
                try await channel.state.message(withID: "cu1") != nil ? true : nil
            }
            // His clock moves while the test waits: a socket that dropped on a loaded machine comes back.
            _ = try await eventually("bob caught up", moving: clock) {
                await bob.isCaughtUp ? true : nil
            }

            let services = try #require(server.services)
            // Closes 1, or 0 when a loaded machine dropped the socket already (a 2026-12-02 loaded
            // run): then it waits for its backoff on the test's clock, or, if it was reconnecting, hears
            // the change live; the end state checked below is the same.
            services.hub.close(usersOf: ["bob"])
            _ = try await eventually("bob's socket down") { await bob.connectionStatus.isConnected ? nil : true }
            _ = try await alice.delete(messageId: "cu1")

            _ = try await eventually("bob reconnected", moving: clock) {
                await bob.connectionStatus.isConnected ? true : nil
            }
            try await channel.wait("the delete, caught up") { $0.message(withID: "cu1")?.isDeleted == true }
            await bob.disconnect()
            await alice.disconnect()
        }
    }

    /// Until 2026-12 `POST /sync` never told "read / delivered by everyone",
    /// so an author whose socket was down when the last member read kept ✓✓
    /// short of everyone until a reload (issue 55's loaded run: finn waited
    /// 600 s for `isDeliveredToAll`).
    @Test(
        "read and delivered by everyone while the author's socket was down shows once it is back",
        arguments: [false, true])
    func reachedAllWhileDown(hidesReads: Bool) async throws {
        try await LiveServer.with { server in
            try await server.upsert("finn", "alice", "bob", privateReads: hidesReads ? ["finn"] : [])
            try await server.createChannel("messaging:cu2", members: ["finn", "alice", "bob"])
            if hidesReads {
                try await server.wireCall(.patch, "/app", #"{"reciprocal_read_receipts": true}"#, as: nil)
            }
            let clock = ManualClock()
            let finn = try await server.connected("finn") {
                $0.clock = clock
                $0.syncOverlap = .zero
                // The clock runs fast below: no health check should end a socket the test keeps.
                $0.healthCheckInterval = .seconds(3600)
            }
            let channel = await finn.channel(ChannelID(type: "messaging", id: "cu2"))
            try await channel.load()
            let sent = try await channel.send("anyone?")
            // finn's retries and reconnects run on his clock: it moves while the test waits, so a
            // send or a socket that failed on a loaded machine is tried again (a 2026-12-02 loaded
            // run waited 600 s here for a catch-up whose socket had dropped).
            _ = try await eventually("stored", moving: clock) {
                try await channel.status(of: sent.id) == .sent ? true : nil
            }
            _ = try await eventually("finn caught up", moving: clock) {
                await finn.isCaughtUp ? true : nil
            }

            let services = try #require(server.services)
            // Closes 1, or 0 when a loaded machine dropped the socket already (a 2026-12-02 loaded
            // run): then it waits for its backoff on the test's clock, or, if it was reconnecting, hears
            // the change live; the end state checked below is the same.
            services.hub.close(usersOf: ["finn"])
            _ = try await eventually("finn's socket down") { await finn.connectionStatus.isConnected ? nil : true }
            try await server.markRead("messaging:cu2", "alice")
            try await server.markRead("messaging:cu2", "bob")

            _ = try await eventually("finn reconnected", moving: clock) {
                await finn.connectionStatus.isConnected ? true : nil
            }
            let caughtUp = try await eventually("delivered to everyone, caught up", moving: clock) {
                let state = try await channel.state
                let shown = state.message(withID: sent.id)
                return shown?.isDeliveredToAll == true && shown?.isReadByAll == !hidesReads ? state : nil
            }
            let shown = try #require(caughtUp.message(withID: sent.id))
            #expect(shown.deliveryStatus == (hidesReads ? .delivered : .read))
            #expect(shown.isReadByAll == !hidesReads)
            await finn.disconnect()
        }
    }
}

/// Waits as `eventually` does, moving the client's `clock` 100 ms at each look: its
/// reconnects and retries run on it, so a socket a loaded machine dropped comes back.
private func eventually<Value: Sendable>(
    _ what: String, moving clock: ManualClock, sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: @Sendable () async throws -> Value?
) async throws -> Value {
    try await eventually(what, sourceLocation: sourceLocation) {
        clock.advance(by: .milliseconds(100))
        return try await condition()
    }
}
