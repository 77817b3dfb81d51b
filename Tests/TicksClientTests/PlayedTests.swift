import Foundation
import Testing
import TicksClient
import TicksTestSupport

/// Played voice notes and videos (R14) as the SDK shows them, against a live server.
@Suite("Played voice notes as the sender sees them")
struct PlayedTests {
    let group = ChannelID(type: "messaging", id: "voice")

    @Test("a recipient marks a voice note played; the sender's message and read indicator show it, once per player")
    func markPlayed() async throws {
        try await LiveServer.with { server in
            try await server.upsert("alice", "bob", "carol")
            try await server.createChannel("messaging:voice", members: ["alice", "bob", "carol"])
            try await server.sendVoiceNote("messaging:voice", id: "v1", from: "alice")
            let alice = try await server.connected("alice")
            let trip = await alice.channel(group)
            try await trip.load()
            let bob = try await server.connected("bob")
            let bobTrip = await bob.channel(group)
            try await bobTrip.load()
            let loaded = try await bobTrip.wait("the voice note") { $0.message(withID: "v1") != nil }
            let voice = try #require(loaded.message(withID: "v1"))
            #expect(voice.isPlayable && !voice.isPlayed)
            #expect(voice.attachments.count == 1)

            let first = try #require(try await bob.markPlayed(messageId: "v1"))
            let again = try await bob.markPlayed(messageId: "v1")
            #expect(again == first, "the server keeps the first play")
            let played = try await trip.wait("played by bob") { $0.message(withID: "v1")?.isPlayed == true }
            let message = try #require(played.message(withID: "v1"))
            #expect(message.playedBy == ["bob"] && message.playedCount == 1)
            try await server.markRead("messaging:voice", "bob")
            try await server.markPlayed("v1", by: "carol")
            let both = try await trip.wait("played by two") { $0.message(withID: "v1")?.playedCount == 2 }
            let indicator = both.readIndicator(for: try #require(both.message(withID: "v1")))
            #expect(indicator.isPlayed && indicator.playedCount == 2)
            #expect(indicator.accessibilityLabel.hasSuffix("played by 2"), "\(indicator.accessibilityLabel)")
            #expect(try await alice.receipts(for: "v1").playedCount == 2)
            // bob's own model shows his play too (his connections hear it).
            let bobs = try await bobTrip.wait("bob's play") {
                $0.message(withID: "v1")?.playedBy.contains("bob") == true
            }
            #expect(bobs.message(withID: "v1")?.isSentByCurrentUser == false)
            // The author cannot play their own: the server's 400.
            await #expect(throws: TicksClientError.self) { try await alice.markPlayed(messageId: "v1") }
            await alice.disconnect()
            await bob.disconnect()
        }
    }
}
