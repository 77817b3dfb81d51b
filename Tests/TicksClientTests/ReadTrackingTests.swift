import Foundation
import Testing
import TicksClient
import TicksServer
import TicksTestSupport

/// `ReadTracker` and `PushDelivery` against a real server.
@Suite("Read tracking and delivery from a push")
struct ReadTrackingTests {
    let cid = ChannelID(type: "messaging", id: "rt")

    /// How many times the server took a mark read, over HTTP or the socket.
    func markReadCalls(_ server: LiveServer) -> Int {
        server.requestCount(route: "/channels/{type}/{id}/read") + server.socketReceipts("mark_read")
    }

    @Test("marks read the newest message on screen only at the bottom, with the app active; at most once per throttle")
    func rule() async throws {
        try await LiveServer.with { server in
            try await server.upsert("alice", "bob")
            try await server.createChannel("messaging:rt", members: ["alice", "bob"])
            for index in 1...4 { try await server.send("messaging:rt", id: "m\(index)", from: "alice") }
            // bob's client waits on a clock the test advances: the marks are counted per throttle period that passes.
            let clock = ManualClock()
            // His reconnects do not wait on it: a socket a loaded machine drops comes back at once
            // (a 2026-12-02 loaded run waited 600 s for a message on a socket that never came back).
            let bob = try await server.connected("bob") {
                $0.clock = clock
                $0.reconnectBackoff = Backoff(initialDelay: .zero, maxDelay: .zero)
            }
            let channel = await bob.channel(cid)
            try await channel.load()
            let tracker = ReadTracker(channel: channel, throttle: .milliseconds(600))
            /// The tracker waits for the throttle: 600 ms after its last mark, made at the clock's time now.
            @Sendable func throttled() -> Bool { clock.deadlines.contains(clock.now.offset + .milliseconds(600)) }

            await tracker.setVisibleMessages(["m1", "m2"])
            await tracker.setAppActive(true)
            try await Task.sleep(for: .milliseconds(300))
            #expect(markReadCalls(server) == 0, "not at the bottom")
            await tracker.setAppActive(false)
            await tracker.setAtBottom(true)
            try await Task.sleep(for: .milliseconds(300))
            #expect(markReadCalls(server) == 0, "the app is not active")

            await tracker.setAppActive(true)
            try await eventually("read up to m2") {
                try await server.readState("messaging:rt", of: "bob")?["last_read_message_id"].string == "m2"
                    ? true : nil
            }
            try await eventually("the tracker counted it") { await tracker.marksSent == 1 ? true : nil }
            // Scrolling on: many changes while the clock stands still wait for the throttle; once it
            // has passed, one call with the newest seen.
            for _ in 0..<10 {
                await tracker.setVisibleMessages(["m2", "m3"])
                await tracker.setVisibleMessages(["m3", "m4"])
            }
            try await eventually("the next mark waiting for the clock") { throttled() ? true : nil }
            #expect(await tracker.marksSent == 1)
            clock.advance(by: .milliseconds(600))
            try await eventually("read up to m4") {
                try await server.readState("messaging:rt", of: "bob")?["last_read_message_id"].string == "m4"
                    ? true : nil
            }
            try await eventually("the tracker counted it") { await tracker.marksSent == 2 ? true : nil }
            let marks = 2
            #expect(markReadCalls(server) == marks)
            // Nothing new on screen: nothing to mark. Own messages alone read nothing.
            await tracker.setVisibleMessages(["m3", "m4"])
            try await channel.send("mine", id: "b1")
            try await channel.wait("b1 sent") { $0.message(withID: "b1")?.deliveryStatus == .sent }
            await tracker.setVisibleMessages(["m4", "b1"])
            try await eventually("the tracker waiting for the clock") { throttled() ? true : nil }
            clock.advance(by: .milliseconds(600))
            try await Task.sleep(for: .milliseconds(900))
            #expect(markReadCalls(server) == marks)
            // A new message from alice, seen at the bottom, is read.
            try await server.send("messaging:rt", id: "m5", from: "alice")
            try await channel.wait("m5 arrived") { $0.message(withID: "m5") != nil }
            await tracker.setVisibleMessages(["b1", "m5"])
            try await eventually("read up to m5") {
                try await server.readState("messaging:rt", of: "bob")?["last_read_message_id"].string == "m5"
                    ? true : nil
            }
            // (The server has the read before the tracker has counted its answer.)
            try await eventually("the tracker counted it") { await tracker.marksSent == marks + 1 ? true : nil }
            // Stopped, it marks nothing more.
            await tracker.stop()
            try await server.send("messaging:rt", id: "m6", from: "alice")
            try await channel.wait("m6 arrived") { $0.message(withID: "m6") != nil }
            await tracker.setVisibleMessages(["m5", "m6"])
            try await Task.sleep(for: .milliseconds(900))
            #expect(await tracker.marksSent == marks + 1)
            #expect(markReadCalls(server) == marks + 1)
            await bob.disconnect()
        }
    }

    @Test("a push payload marks its message delivered with one call and no socket; the sender sees ✓✓")
    func pushDelivery() async throws {
        try await LiveServer.with { server in
            try await server.upsert("alice", "bob")
            try await server.createChannel("messaging:rt", members: ["alice", "bob"])
            let alice = try await server.connected("alice")
            let channel = await alice.channel(cid)
            try await channel.load()
            try await channel.send("are you there?", id: "p1")
            try await channel.wait("p1 sent") { $0.message(withID: "p1")?.deliveryStatus == .sent }

            let delivery = PushDelivery(baseURL: server.baseURL, apiKey: LiveServer.apiKey, timeout: .seconds(60))
            let stream: [AnyHashable: Any] = [
                "aps": ["alert": ["title": "Alice", "body": "are you there?"]],
                "stream": ["sender": "stream.chat", "type": "message.new", "version": "v2", "id": "p1", "cid": "messaging:rt"],
            ]
            #expect(try await delivery.markDelivered(payload: stream, token: try await server.token("bob")))
            try await channel.wait("delivered") { $0.message(withID: "p1")?.deliveryStatus == .delivered }
            #expect(try await server.readState("messaging:rt", of: "bob")?["last_delivered_message_id"].string == "p1")

            // A delivery-only token in the payload (Ticks' push hook) is enough, and is all it can do.
            try await server.send("messaging:rt", id: "p2", from: "alice")
            let credentials = try Credentials(apiKey: LiveServer.apiKey, apiSecret: LiveServer.apiSecret)
            let deliveryToken = try await TokenAuthority(credentials: credentials)
                .deliveryToken(for: "bob", in: cid, expiresIn: .seconds(600))
            let pushed: [AnyHashable: Any] = [
                "aps": ["alert": ["title": "Alice", "body": "hello"]], "cid": "messaging:rt", "message_id": "p2",
                "delivery_token": deliveryToken,
            ]
            #expect(PushDelivery.deliveryToken(in: pushed) == deliveryToken)
            #expect(try await delivery.markDelivered(payload: pushed))
            #expect(try await server.readState("messaging:rt", of: "bob")?["last_delivered_message_id"].string == "p2")
            #expect(try await delivery.markDelivered(payload: ["cid": "messaging:rt", "message_id": "p2"]) == false)
            let other = ChannelID(type: "messaging", id: "elsewhere")
            await #expect(throws: TicksClientError.self) {
                try await delivery.markDelivered(messageID: "p2", in: other, token: deliveryToken)
            }

            // The other shapes, and payloads that name nothing.
            let own = PushDelivery.message(inJSON: Data(#"{"cid": "messaging:rt", "message_id": "p2"}"#.utf8))
            #expect(own?.cid == cid && own?.messageID == "p2")
            #expect(PushDelivery.message(in: ["stream": ["id": "p1"]]) == nil)
            #expect(PushDelivery.message(in: ["cid": "nocolon", "message_id": "p1"]) == nil)
            #expect(PushDelivery.message(in: ["cid": "messaging:rt", "message_id": "bad id!"]) == nil)
            #expect(PushDelivery.message(inJSON: Data("not json".utf8)) == nil)
            #expect(try await delivery.markDelivered(payload: ["aps": [:]], token: try await server.token("bob")) == false)
            // A token for someone who is not a member is refused, as any mark delivered would be.
            try await server.upsert("mallory")
            await #expect(throws: TicksClientError.self) {
                try await delivery.markDelivered(messageID: "p1", in: cid, token: try await server.token("mallory"))
            }
            await alice.disconnect()
        }
    }
}
