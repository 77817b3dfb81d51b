import Foundation
import Testing
import TicksProtocol
import TicksTestSupport

@testable import TicksServer

/// docs/compatibility.md, "Read state as a time": Stream's clients decide
/// that a member has read (received) a message by comparing the member's
/// `last_read` (`last_delivered_at`) with the message's `created_at`. After
/// partial reads and deliveries, and after mark unread by message or by time,
/// that comparison must give exactly what `GET /messages/{id}/receipts` says,
/// for every message and every member; and `notification.mark_unread` tells
/// the same time.
@Suite("Read state as a time agrees with the receipts")
struct ReadStateTimeTests {
    @Test("every member x every message: last_read and last_delivered_at compare as the receipts say", arguments: StoreKind.all)
    func agree(kind: StoreKind) async throws {
        try await TestServer.run(kind, .live) { server in
            let members = ["alice", "bob", "carol", "dave", "erin", "frank"]
            try await server.upsert("alice", "bob", "carol", "dave", "erin", "frank")
            let cid = "messaging:rt"
            try await server.createChannel(cid, members: members, createdBy: "alice")
            let messages = ["m1", "m2", "m3", "m4", "m5"]
            var sent: [String: Timestamp] = [:]
            for id in messages {
                // Each message in a millisecond of its own: JavaScript's dates cannot tell apart two
                // messages of one millisecond (docs/compatibility.md), so a same-millisecond pair would
                // make the millisecond comparison below wrong by design. Waits for the wall clock, which
                // stamps messages, to pass the previous one's millisecond (a millisecond at most).
                if let previous = sent.values.max() {
                    while Timestamp.now().microseconds / 1000 <= previous.microseconds / 1000 { await Task.yield() }
                }
                let answer = try await server.send(cid, id: id, from: "alice")
                sent[id] = try #require(answer["message"]["created_at"].time)
            }
            let bobSocket = try await TestSocket.connect(server, as: "bob")
            defer { bobSocket.close() }

            // bob read everything, then marked unread from m3 (the reported case).
            try await server.markRead(cid, "bob")
            try await server.markUnread(cid, "bob", from: "m3")
            // carol received up to m2 and read up to m1.
            try await server.markDelivered("carol", [(cid, "m2")])
            try await server.markRead(cid, "carol", upTo: "m1")
            // dave did nothing. erin read everything and marked unread from the first message.
            try await server.markRead(cid, "erin")
            try await server.markUnread(cid, "erin", from: "m1")
            // frank read everything and marked unread from the time m4 was sent.
            try await server.markRead(cid, "frank")
            try await server.ok(
                .post, "/channels/messaging/rt/unread",
                #"{"user_id": "frank", "message_timestamp": "\#(sent["m4"]!.rfc3339)"}"#)

            let state = try await server.ok(.post, "/channels/messaging/rt/query", #"{"user_id": "alice"}"#)
            let reads = Dictionary(
                uniqueKeysWithValues: state["read"].array.compactMap { read in read["user"]["id"].string.map { ($0, read) } })
            for id in messages {
                let receipts = try await server.ok(.get, "/messages/\(id)/receipts?user_id=alice")
                let byUser = Dictionary(
                    uniqueKeysWithValues: receipts["receipts"].array.compactMap { entry in
                        entry["user"]["id"].string.map { ($0, entry) }
                    })
                for member in members where member != "alice" {
                    let read = try #require(reads[member], "no read state of \(member)")
                    let lastRead = try #require(read["last_read"].time)
                    let lastDelivered = try #require(read["last_delivered_at"].time)
                    let receipt = byUser[member]
                    // As Ticks' SDK compares (microseconds) and as Stream's JS client does (milliseconds).
                    for unit: Int64 in [1, 1000] {
                        func since(_ time: Timestamp) -> Int64 { Int64(time.microseconds) / unit }
                        #expect(
                            (since(lastRead) >= since(sent[id]!)) == (receipt?["read_at"].exists ?? false),
                            "\(member) \(id) in units of \(unit) µs: last_read \(lastRead) vs created_at \(sent[id]!), receipt \(String(describing: receipt))")
                        #expect(
                            (since(lastDelivered) >= since(sent[id]!)) == (receipt?["delivered_at"].exists ?? false),
                            "\(member) \(id) in units of \(unit) µs: last_delivered_at \(lastDelivered), receipt \(String(describing: receipt))")
                    }
                }
            }
            // The cases themselves, so that the table above cannot pass by reading nothing.
            #expect(reads["bob"]?["last_read_message_id"].string == "m2")
            #expect(reads["carol"]?["last_read_message_id"].string == "m1")
            #expect(reads["frank"]?["last_read_message_id"].string == "m3")
            #expect(try #require(reads["erin"]?["last_read"].time) < sent["m1"]!)

            // bob's own client heard the same time in notification.mark_unread.
            let unread = try await bobSocket.next("notification.mark_unread")
            let told = try #require(unread["last_read_at"].time)
            #expect(told >= sent["m2"]! && told.microseconds / 1000 < sent["m3"]!.microseconds / 1000, "\(told)")
            #expect(unread["last_read_message_id"].string == "m2" && unread["first_unread_message_id"].string == "m3")
        }
    }
}
