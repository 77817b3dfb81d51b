import Foundation
import Testing
import TicksClient
import TicksTestSupport

/// Reciprocal read receipts (R15) as the SDK shows them, against a live server:
/// with the app's setting on, a user who hides their reads sees their own
/// messages delivered (✓✓) and delivered to everyone, never read; with it
/// off, the same messages show read.
@Suite("Reciprocal read receipts as the SDK shows them")
struct ReciprocalReceiptsTests {
    let group = ChannelID(type: "messaging", id: "recip")

    @Test("a user who hides their reads sees their message delivered, not read, while the app's setting is on")
    func hiderSeesDeliveries() async throws {
        try await LiveServer.with { server in
            try await server.upsert("alice", "bob", "finn", privateReads: ["finn"])
            try await server.createChannel("messaging:recip", members: ["alice", "bob", "finn"])
            try await server.wireCall(.patch, "/app", #"{"reciprocal_read_receipts": true}"#, as: nil)
            let finn = try await server.connected("finn")
            let chat = await finn.channel(group)
            try await chat.load()
            let sent = try await chat.send("did you hear it?")
            _ = try await chat.wait("stored") { $0.message(withID: sent.id)?.deliveryStatus == .sent }

            try await server.markRead("messaging:recip", "alice")
            try await server.markRead("messaging:recip", "bob")
            // "Delivered to everyone" and the two cursors can reach the client by different roads
            // (the live event, a catch-up, a reload after a cursor at a message it had not loaded):
            // what is waited for is where they end, both there (a 2026-12-02 loaded run saw the
            // first without the second).
            let delivered = try await chat.wait("delivered to everyone, by both") {
                $0.message(withID: sent.id)?.isDeliveredToAll == true && $0.message(withID: sent.id)?.deliveredCount == 2
            }
            let shown = try #require(delivered.message(withID: sent.id))
            #expect(shown.deliveryStatus == .delivered, "never read: finn hides his own reads")
            #expect(shown.readCount == 0, "finn sees no read (R15)")
            #expect(!shown.isReadByAll)
            let receipts = try await finn.receipts(for: sent.id)
            #expect(receipts.readCount == 0 && !receipts.readByAll)
            await finn.disconnect()

            // Off: reconnected and reloaded, the same message shows read by everyone.
            try await server.wireCall(.patch, "/app", #"{"reciprocal_read_receipts": false}"#, as: nil)
            let again = try await server.connected("finn")
            let reloaded = await again.channel(group)
            try await reloaded.load()
            let read = try await reloaded.wait("read by everyone") { $0.message(withID: sent.id)?.isReadByAll == true }
            #expect(read.message(withID: sent.id)?.deliveryStatus == .read)
            #expect(try await again.receipts(for: sent.id).readCount == 2)
            await again.disconnect()
        }
    }
}
