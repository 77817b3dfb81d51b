import Foundation
import Testing
import TicksProtocol
import TicksTestSupport

@testable import TicksServer

/// Played (R14, docs/receipt-rules.md): a member's first play of a voice note
/// or video is kept once, told as `message.played` to those who may see the
/// player's reads, listed in the message's receipts, and written to the
/// webhook outbox; on every store.
@Suite("Played voice notes and videos")
struct PlayedTests {
    @Test("the store keeps the first play; a repeat finds it and is not a change; leaving takes it", arguments: StoreKind.all)
    func storeKeepsFirstPlay(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await server.upsert("alice", "bob")
            try await server.createChannel("messaging:ab", members: ["alice", "bob"], createdBy: "alice")
            try await server.sendVoiceNote("messaging:ab", id: "v1", from: "alice")
            let store = server.store
            let (message, _) = try #require(try await store.message(id: "v1"))
            #expect(message.attachments.count == 1 && message.custom.isEmpty, "the attachments are not custom data")
            let first = try await store.markPlayed(message, by: "bob", now: Timestamp(microseconds: 1_000_000))
            #expect(first.created && first.playedAt == Timestamp(microseconds: 1_000_000))
            #expect(first.player.id == "bob" && first.channel.cid.rawValue == "messaging:ab")
            let again = try await store.markPlayed(message, by: "bob", now: Timestamp(microseconds: 9_000_000))
            #expect(!again.created && again.playedAt == first.playedAt)
            let receipts = try #require(try await store.receipts(forMessage: "v1"))
            #expect(receipts.entries.map(\.playedAt) == [first.playedAt])
            // A member who leaves takes their plays with them (R6, R14): back, they play afresh.
            let sql = try #require(store as? SQLStore)
            @Sendable func plays() async throws -> Int64 {
                try await sql.engine.read { Step.row("SELECT COUNT(*) FROM message_play").map { try $0?.int(0) ?? -1 } }
            }
            try await server.removeMembers("messaging:ab", ["bob"])
            #expect(try #require(try await store.receipts(forMessage: "v1")).entries.isEmpty)
            #expect(try await plays() == 0)
            await #expect(throws: StoreError.self, "a non-member's play is refused by the store itself") {
                try await store.markPlayed(message, by: "bob", now: Timestamp(microseconds: 15_000_000))
            }
            try await server.addMembers("messaging:ab", ["bob"])
            let fresh = try await store.markPlayed(message, by: "bob", now: Timestamp(microseconds: 20_000_000))
            #expect(fresh.created && fresh.playedAt == Timestamp(microseconds: 20_000_000))
            // A hard delete of the channel takes its plays with it.
            #expect(try await plays() == 1)
            try await server.ok(.delete, "/channels/messaging/ab?hard_delete=true")
            #expect(try await plays() == 0)
        }
    }

    @Test(
        "message.played reaches the members once; a private player's reaches only their own connections",
        arguments: StoreKind.all)
    func events(kind: StoreKind) async throws {
        try await TestServer.run(kind, .live) { server in
            try await server.upsert("alice", "bob", "finn", privateReads: ["finn"])
            try await server.createChannel("messaging:g", members: ["alice", "bob", "finn"], createdBy: "alice")
            try await server.sendVoiceNote("messaging:g", id: "v1", from: "alice")
            let alice = try await TestSocket.connect(server, as: "alice")
            let bob = try await TestSocket.connect(server, as: "bob")
            let finn = try await TestSocket.connect(server, as: "finn")
            defer { [alice, bob, finn].forEach { $0.close() } }

            let answer = try await server.call(
                .post, "/messages/v1/played", body: "{}", token: try await server.token("finn"))
            #expect(answer.status == 201, "\(answer.body)")
            let own = try await finn.next("message.played")
            #expect(own["user"]["id"].string == "finn" && own["message_id"].string == "v1")
            // bob's play: everyone hears it, and its answer carries the event.
            let played = try await server.markPlayed("v1", by: "bob")
            #expect(played["event"]["type"].string == "message.played")
            for socket in [alice, bob, finn] {
                let event = try await socket.next("message.played")
                #expect(event["user"]["id"].string == "bob" && event["cid"].string == "messaging:g")
                #expect(event["played_at"].string == played["played_at"].string)
            }
            // A repeat tells nothing; finn's play never reached alice or bob.
            let repeated = try await server.call(.post, "/messages/v1/played", body: #"{"user_id": "bob"}"#)
            #expect(repeated.status == 200)
            try await server.send("messaging:g", id: "barrier", from: "alice")
            for socket in [alice, bob] {
                _ = try await socket.next("message.new")
                #expect(!socket.pending.contains { $0["type"].string == "message.played" })
            }
            // Receipts: finn's own play for finn; not for the others.
            let forFinn = try await server.ok(.get, "/messages/v1/receipts", token: try await server.token("finn"))
            #expect(forFinn["played_count"].int == 2)
            let forAlice = try await server.ok(.get, "/messages/v1/receipts", token: try await server.token("alice"))
            #expect(forAlice["played_count"].int == 1)
            #expect(
                forAlice["receipts"].array.compactMap { $0["played_at"].exists ? $0["user"]["id"].string : nil } == [
                    "bob"
                ])
        }
    }

    @Test("a first play is written to the webhook outbox, a private one and a repeat are not", arguments: StoreKind.all)
    func webhooks(kind: StoreKind) async throws {
        let hook = URL(string: "http://127.0.0.1:9/hook")!
        try await TestServer.run(kind, webhooks: WebhookTests.settings(webhook: hook)) { server in
            try await server.upsert("alice", "bob", "finn", privateReads: ["finn"])
            try await server.createChannel("messaging:w", members: ["alice", "bob", "finn"], createdBy: "alice")
            try await server.sendVoiceNote("messaging:w", id: "v1", from: "alice")
            try await server.markPlayed("v1", by: "finn")
            try await server.markPlayed("v1", by: "bob")
            try await server.markPlayed("v1", by: "bob")
            let calls = try await WebhookTests.waiting(server, hook, "messaging:w")
            let played = calls.filter { $0.eventType == "message.played" }
            #expect(played.count == 1)
            let payload = try JSON(parsing: try #require(played.first).payload)
            #expect(payload["user"]["id"].string == "bob" && payload["message_id"].string == "v1")
            #expect(payload["played_at"].exists && payload["channel_id"].string == "w")
        }
    }

    @Test("who may play what: 400s, 403, 404, played_events off", arguments: StoreKind.all)
    func refusals(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await server.upsert("alice", "bob", "olga")
            try await server.createChannel("messaging:r", members: ["alice", "bob"], createdBy: "alice")
            try await server.sendVoiceNote("messaging:r", id: "v1", from: "alice")
            try await server.send("messaging:r", id: "t1", from: "alice")
            let bob = try await server.token("bob")
            try
                (try await server.call(.post, "/messages/v1/played", body: "{}", token: try await server.token("alice")))
                .expectError(400, code: 4)
            try (try await server.call(.post, "/messages/t1/played", body: "{}", token: bob)).expectError(400, code: 4)
            try (try await server.call(.post, "/messages/v1/played", body: "{}", token: try await server.token("olga")))
                .expectError(403, code: 17)
            try (try await server.call(.post, "/messages/nope/played", body: "{}", token: bob)).expectError(
                404, code: 16)
            try (try await server.call(.post, "/messages/v1/played", body: "{}")).expectError(400, code: 4)
            // A server token naming a non-member: accepted, nothing kept.
            let outsider = try await server.ok(.post, "/messages/v1/played", #"{"user_id": "olga"}"#)
            #expect(!outsider["played_at"].exists)
            try await server.wireCall(.put, "/channeltypes/messaging", #"{"played_events": false}"#, as: nil)
            let off = try await server.call(.post, "/messages/v1/played", body: "{}", token: bob)
            try off.expectError(400, code: 4)
            #expect(off.body.contains("played_events"))
            #expect(try await server.ok(.get, "/messages/v1/receipts")["played_count"].int == 0)
        }
    }
}
