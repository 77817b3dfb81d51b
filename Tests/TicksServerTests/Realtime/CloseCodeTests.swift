import Foundation
import Testing
import TicksTestSupport

@testable import TicksServer

/// docs/events.md, "Connecting": Stream's clients take close code 1000 as a
/// final refusal and reconnect on any other. A refused connection closes with
/// 1000; one the server drops (a node that missed events, a client that fell
/// behind, a shutdown) with 1011, so the client comes back and recovers.
@Suite("Close codes")
struct CloseCodeTests {
    @Test("a connection the server drops closes with 1011 (reconnect); a refused one with 1000 (final)")
    func codes() async throws {
        try await TestServer.run(.standard, .live) { server in
            try await server.upsert("bob")
            let bob = try await TestSocket.connect(server, as: "bob")
            #expect(server.services.hub.close(usersOf: ["bob"]) == 1)
            let dropped = try await bob.closeFrame()
            #expect(dropped?.closeCode == .unexpectedServerError, "\(String(describing: dropped))")
            let (refused, frames) = try await TestSocket.refusal(server, as: "bob", token: "garbage")
            #expect(refused == 1000 && frames.count == 1)
        }
    }
}
