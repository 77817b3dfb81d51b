import Foundation
import Synchronization
import Testing
import TicksClient
import TicksTestSupport

/// Automatic mark-delivered against a real server: batched, throttled, and
/// only when it tells the sender something.
@Suite("Marking delivered automatically")
struct DeliveryTests {
    static let route = "/channels/delivered"

    @Test("150 channels: at most 100 a call, at most one call a second, every channel delivered")
    func batchedAndThrottled() async throws {
        try await LiveServer.with { server in
            try await server.upsert("alice", "bob")
            let channels = (1...150).map { "messaging:b\($0)" }
            for cid in channels { try await server.createChannel(cid, members: ["alice", "bob"]) }
            // bob's client waits on a clock the test advances: the calls are counted per second that passes.
            let clock = ManualClock()
            // His reconnects do not wait on it: a socket a loaded machine drops comes back at once
            // (a 2026-12-02 loaded run waited 600 s for a message on a socket that never came back).
            let bob = try await server.connected("bob") {
                $0.clock = clock
                $0.reconnectBackoff = Backoff(initialDelay: .zero, maxDelay: .zero)
            }
            for (index, cid) in channels.enumerated() {
                try await server.send(cid, id: "b-msg\(index + 1)", from: "alice")
            }
            // Every message has reached bob's client (each one counts as an unread channel)…
            _ = try await eventually("150 unread channels") {
                await bob.unreadTotals.unreadChannels == 150 ? true : nil
            }
            _ = try await eventually("the first call") { server.markDeliveredCalls >= 1 ? true : nil }
            @Sendable func allDelivered() async throws -> Bool {
                for index in channels.indices {
                    if try await bob.receipts(for: "b-msg\(index + 1)").deliveredCount != 1 { return false }
                }
                return true
            }
            // The throttle's wait: a second after the last call ended, which was at the clock's time now.
            @Sendable func throttled() -> Bool { clock.deadlines.contains(clock.now.offset + .seconds(1)) }
            // While the clock stands still, one call went out (the first, at once); then one more for each
            // second the test lets pass, each with at most 100 channels, until every channel is delivered.
            @Sendable func waitingOrDone() async throws -> Bool? {
                if throttled() { return true }
                return try await allDelivered() ? false : nil
            }
            var seconds = 0
            while try await eventually("the next call waiting for the clock, or every channel delivered", waitingOrDone)
            {
                let before = server.markDeliveredCalls
                #expect(before == 1 + seconds, "calls when \(seconds) s had passed")
                try #require(seconds < 3, "150 channels took more than three calls")
                clock.advance(by: .seconds(1))
                seconds += 1
                _ = try await eventually("a call after \(seconds) s") {
                    server.markDeliveredCalls > before ? true : nil
                }
            }
            // 149 channels or more after the first call need two more; fewer, one.
            #expect((1...2).contains(seconds), "\(seconds) s")
            #expect(server.markDeliveredCalls == 1 + seconds)
            // None of them was refused for carrying more than 100 entries.
            #expect(server.requestCount(route: Self.route, status: 400) == 0)
            #expect(server.socketReceipts("mark_delivered", refused: true) == 0)
            await bob.disconnect()
        }
    }

    @Test("own messages, and messages already read, are not marked")
    func skipsOwnAndRead() async throws {
        try await LiveServer.with { server in
            try await server.upsert("alice", "bob")
            try await server.createChannel("messaging:own", members: ["alice", "bob"])
            try await server.createChannel("messaging:read", members: ["alice", "bob"])
            try await server.send("messaging:read", id: "already", from: "alice")
            try await server.markRead("messaging:read", "bob")
            let bob = try await server.connected("bob")
            let own = await bob.channel(ChannelID(type: "messaging", id: "own"))
            try await own.load()
            try await own.send("mine", id: "mine1")
            try await own.wait("sent") { $0.message(withID: "mine1")?.deliveryStatus == .sent }
            let read = await bob.channel(ChannelID(type: "messaging", id: "read"))
            try await read.load()
            try await Task.sleep(for: .milliseconds(1500))
            #expect(server.markDeliveredCalls == 0)

            // A new message from alice is marked, once.
            try await server.send("messaging:own", id: "theirs1", from: "alice")
            try await own.wait("delivered to bob") { state in
                state.reads.first { $0.user.id == "bob" }?.lastDeliveredMessageId == "theirs1"
            }
            #expect(server.markDeliveredCalls == 1)
            await bob.disconnect()
        }
    }

    @Test("a user whose privacy settings turn delivery receipts off never marks")
    func privacyOff() async throws {
        try await LiveServer.with { server in
            try await server.upsert("alice", "bob", privateDeliveries: ["bob"])
            try await server.createChannel("messaging:p", members: ["alice", "bob"])
            let bob = try await server.connected("bob")
            let channel = await bob.channel(ChannelID(type: "messaging", id: "p"))
            try await channel.load()
            try await server.send("messaging:p", id: "p1", from: "alice")
            try await channel.wait("arrived") { $0.message(withID: "p1") != nil }
            try await Task.sleep(for: .milliseconds(1200))
            #expect(server.markDeliveredCalls == 0)
            await bob.disconnect()
        }
    }

    @Test("messages that arrived while offline are marked delivered after connecting")
    func catchUpOnConnect() async throws {
        try await LiveServer.with { server in
            try await server.upsert("alice", "bob")
            for index in 1...3 {
                try await server.createChannel("messaging:c\(index)", members: ["alice", "bob"])
                try await server.send("messaging:c\(index)", id: "c\(index)", from: "alice")
            }
            let alice = try await server.connected("alice") { $0.marksDelivered = false }
            let c2 = await alice.channel(ChannelID(type: "messaging", id: "c2"))
            try await c2.load()
            #expect(try await c2.status(of: "c2") == .sent)

            let bob = try await server.connected("bob")
            try await c2.wait("delivered to bob") { $0.message(withID: "c2")?.deliveryStatus == .delivered }
            for index in 1...3 {
                _ = try await eventually("c\(index) delivered") {
                    try await alice.receipts(for: "c\(index)").deliveredCount == 1 ? true : nil
                }
            }
            #expect(server.markDeliveredCalls == 1)
            await alice.disconnect()
            await bob.disconnect()
        }
    }
}
