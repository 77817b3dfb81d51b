import Crypto
import Foundation
import HTTPTypes
import Synchronization
import Testing
import TicksProtocol
import TicksTestSupport

@testable import TicksServer

/// Webhooks and the push hook (docs/webhooks.md) on every store: the calls a
/// change owes are written in its transaction, then sent to real HTTP
/// receivers — signed, retried, in order per channel, dead after too many
/// failures and tried again on request.
@Suite("Webhooks")
struct WebhookTests {
    /// Settings for a test: every event to `webhook`, pushes to `push`, short waits.
    static func settings(webhook: URL?, push: URL? = nil, attempts: Int = 8) -> WebhookSettings {
        var settings = WebhookSettings()
        settings.webhooks = webhook.map { [WebhookSettings.Webhook(url: $0)] } ?? []
        settings.pushURL = push
        settings.maxAttempts = attempts
        settings.firstBackoff = .milliseconds(50)
        settings.maxBackoff = .milliseconds(200)
        // Long enough that a loaded machine's slow answer is not a failure.
        settings.callTimeout = .seconds(5)
        return settings
    }

    /// The backoff and call timeout of a test that runs the sender on a `ManualClock`: far longer
    /// than any test takes, so a retry or a timeout comes only when the test advances the clock.
    static let backoff: Duration = .seconds(60)
    static let callTimeout: Duration = .seconds(600)

    /// Settings for a test on a `ManualClock`: every retry waits `backoff`, a call `callTimeout`.
    static func clockSettings(webhook: URL?, attempts: Int = 8) -> WebhookSettings {
        var settings = Self.settings(webhook: webhook, attempts: attempts)
        settings.firstBackoff = backoff
        settings.maxBackoff = backoff
        settings.callTimeout = callTimeout
        return settings
    }

    /// The calls waiting in the outbox for `target` in `cid`, in order.
    static func waiting(_ server: TestServer, _ target: URL, _ cid: String) async throws -> [OutboxCall] {
        let store = try #require(server.store as? SQLStore)
        return try await store.outboxQueue(target: ReceiverURL(target.absoluteString).name, cid: cid, limit: 100)
    }

    @Test(
        "a change writes the calls it owes in its transaction; a refused change writes none", arguments: StoreKind.all)
    func outboxRows(kind: StoreKind) async throws {
        // Nothing listens there: every call fails and stays in the outbox, waiting for a retry.
        let hook = URL(string: "http://127.0.0.1:9/hook")!
        let push = URL(string: "http://127.0.0.1:9/push")!
        try await TestServer.run(kind, webhooks: Self.settings(webhook: hook, push: push)) { server in
            try await server.upsert("alice", "bob", "dave")
            try await server.ok(
                .post, "/users",
                #"{"users": {"carol": {"id": "carol", "privacy_settings": {"read_receipts": {"enabled": false}}}}}"#)
            try await server.createChannel("messaging:g", members: ["alice", "bob", "carol"], createdBy: "alice")
            try await server.send("messaging:g", id: "m1", from: "alice")
            // Refused: dave is no member; an unknown channel makes the whole mark delivered fail.
            let refused = try await server.call(
                .post, "/channels/messaging/g/message", body: #"{"message": {"id": "d1", "text": "x"}}"#,
                token: try await server.token("dave"))
            try refused.expectError(403, code: 17)
            let unknown = try await server.call(
                .post, "/channels/delivered",
                body:
                    #"{"user_id": "bob", "latest_delivered_messages": [{"cid": "messaging:g", "id": "m1"}, {"cid": "messaging:nope", "id": "m1"}]}"#
            )
            #expect(unknown.status >= 400, "\(unknown.body)")
            try await server.markRead("messaging:g", "bob")
            // carol reads privately (R10): the others, and so the webhooks, learn only that it was delivered.
            try await server.markRead("messaging:g", "carol")
            try await server.markUnread("messaging:g", "bob", from: "m1")
            // carol's mark unread would tell her read position: as private as her reads.
            try await server.markUnread("messaging:g", "carol", from: "m1")

            let calls = try await Self.waiting(server, hook, "messaging:g")
            let told = calls.map { call in
                let json = try? JSON(parsing: call.payload)
                return "\(call.eventType) \(json?["user"]["id"].string ?? "-")"
            }
            #expect(
                told == [
                    "channel.created -", "message.new alice", "message.read bob", "message.delivered carol",
                    // carol's read counts for "all" through her delivery (R13).
                    "message.read_by_all -", "message.delivered_to_all -", "notification.mark_unread bob",
                ])
            #expect(calls.allSatisfy { $0.kind == "webhook" && $0.recipients == nil })
            let payload = try JSON(parsing: try #require(calls.first { $0.eventType == "message.new" }).payload)
            #expect(payload["message"]["id"].string == "m1")
            #expect(payload["cid"].string == "messaging:g")
            #expect(payload["channel_type"].string == "messaging")
            #expect(payload["channel_id"].string == "g")
            let all = try JSON(parsing: try #require(calls.first { $0.eventType == "message.read_by_all" }).payload)
            #expect(all["message_id"].string == "m1" && all["cid"].string == "messaging:g")

            // The push hook: the new message, for the members other than the author (none has a socket).
            let pushes = try await Self.waiting(server, push, "messaging:g")
            #expect(pushes.map(\.eventType) == ["message.new"])
            let recipients = try JSON(parsing: try #require(pushes.first?.recipients))
            #expect(Set(recipients.array.compactMap { $0["user_id"].string }) == ["bob", "carol"])
            #expect(recipients.array.allSatisfy { $0["unread_count"].int == 1 })
        }
    }

    @Test("the outbox stays within its bounds: waiting calls per receiver, dead calls, age", arguments: StoreKind.all)
    func bounds(kind: StoreKind) async throws {
        let hook = URL(string: "http://127.0.0.1:9/hook")!
        // The sender's first call hangs until the clock passes its timeout, which it never does here: the
        // outbox changes only by the trims this test makes.
        let clock = ManualClock()
        var settings = Self.clockSettings(webhook: hook)
        settings.webhooks[0].eventTypes = [.messageNew]
        settings.maxWaiting = 3
        settings.maxDead = 2
        try await TestServer.run(kind, webhooks: settings, time: clock.timeSource) { [settings] server in
            try await server.upsert("alice", "bob")
            try await server.createChannel("messaging:g", members: ["alice", "bob"])
            for index in 1...6 { try await server.send("messaging:g", id: "m\(index)", from: "alice") }
            let store = try #require(server.store as? SQLStore)
            try await store.trimOutbox(settings.bounds, targets: settings.targets, now: .now())
            // The newest 3 wait; of the 3 older ones, dead, the newest 2 are kept.
            let waiting = try await Self.waiting(server, hook, "messaging:g")
            #expect(
                waiting.compactMap { try? JSON(parsing: $0.payload)["message"]["id"].string } == ["m4", "m5", "m6"])
            let dead = try await store.deadCalls(after: 0, limit: 10)
            #expect(dead.compactMap { try? JSON(parsing: $0.payload)["message"]["id"].string } == ["m2", "m3"])
            #expect(dead.allSatisfy { $0.lastError?.hasPrefix("dropped") == true })
            // An attempt that fails after a trim dropped its call (the sender was calling it) leaves it dead.
            let dropped = try #require(dead.first)
            try await store.failed(dropped, attempts: 1, nextAt: .now(), deadAt: nil, error: "refused")
            #expect(try await store.deadCalls(after: 0, limit: 10).map(\.id) == dead.map(\.id))
            #expect(try await Self.waiting(server, hook, "messaging:g").count == 3)
            // Too old: dead too.
            var older = settings
            older.maxAge = .seconds(1)
            try await store.trimOutbox(older.bounds, targets: settings.targets, now: .now() + .seconds(5))
            #expect(try await Self.waiting(server, hook, "messaging:g").isEmpty)
            let counts = try await store.outboxCounts()
            #expect(counts.waiting == 0 && counts.dead == 2)
        }
    }

    @Test(
        "a receiver that cannot be reached is tried by one channel's call at a time, once per backoff; the others wait, counting no attempt",
        arguments: StoreKind.all)
    func unreachableProbe(kind: StoreKind) async throws {
        let hook = URL(string: "http://127.0.0.1:9/hook")!
        let clock = ManualClock()
        var settings = Self.clockSettings(webhook: hook, attempts: 1_000)
        settings.webhooks[0].eventTypes = [.messageNew]
        try await TestServer.run(kind, webhooks: settings, time: clock.timeSource) { server in
            try await server.upsert("alice", "bob")
            for channel in ["a", "b", "c"] {
                try await server.createChannel("messaging:\(channel)", members: ["alice", "bob"])
            }
            @Sendable func attempts() async throws -> [Int] {
                try await ["a", "b", "c"].asyncMap {
                    try await Self.waiting(server, hook, "messaging:\($0)").first?.attempts ?? -1
                }
            }
            // Nothing answers there (the HTTP client keeps trying to connect): an attempt fails when the call
            // timeout passes on the clock.
            @Sendable func calling() -> Int {
                clock.deadlines.filter { $0 == clock.now.offset + Self.callTimeout }.count
            }
            // a's call fails once: the receiver is paused for a backoff, and suspect.
            try await server.send("messaging:a", id: "a1", from: "alice")
            try await eventually { calling() == 1 }
            clock.advance(by: Self.callTimeout)
            try await eventually { try await attempts()[0] == 1 }
            try await server.send("messaging:b", id: "b1", from: "alice")
            try await server.send("messaging:c", id: "c1", from: "alice")
            // Each backoff that passes, one call probes the receiver (the oldest queue's), and only one.
            for round in 1...5 {
                clock.advance(by: Self.backoff)
                try await eventually { calling() >= 1 }
                clock.advance(by: Self.callTimeout)
                try await eventually { try await attempts()[0] == 1 + round }
            }
            let calls = try await ["a", "b", "c"].asyncMap { try await Self.waiting(server, hook, "messaging:\($0)") }
            #expect(calls.map(\.count) == [1, 1, 1], "nothing was lost")
            #expect(try await attempts() == [6, 0, 0])
        }
    }

    @Test("no webhooks configured: no calls are written", arguments: StoreKind.all)
    func noWebhooks(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await server.upsert("alice", "bob")
            try await server.createChannel("messaging:g", members: ["alice", "bob"])
            try await server.send("messaging:g", id: "m1", from: "alice")
            let store = try #require(server.store as? SQLStore)
            let counts = try await store.outboxCounts()
            #expect(counts.waiting == 0 && counts.dead == 0)
        }
    }

    @Test(
        "calls are signed, carry a delivery id, and are retried after failures with the same id",
        arguments: StoreKind.all)
    func signedAndRetried(kind: StoreKind) async throws {
        let receiver = WebhookReceiver()
        // The first message's call fails twice (500, then no answer within the call timeout), then is taken.
        receiver.answer { _, attempt, body in
            // `attempt` is the sender's X-Webhook-Attempt.
            guard body["message"]["id"].string == "m1" else { return (.ok, false) }
            switch attempt {
            case 1: return (.internalServerError, false)
            case 2: return (.ok, true)
            default: return (.ok, false)
            }
        }
        let clock = ManualClock()
        try await receiver.run { base in
            defer { receiver.release() }
            let hook = base.appendingPathComponent("hook")
            try await TestServer.run(kind, .live, webhooks: Self.clockSettings(webhook: hook), time: clock.timeSource) {
                server in
                try await server.upsert("alice", "bob")
                try await server.createChannel("messaging:g", members: ["alice", "bob"])
                try await server.send("messaging:g", id: "m1", from: "alice", text: "héllo")
                @Sendable func m1(_ calls: [WebhookReceiver.Call]) -> [WebhookReceiver.Call] {
                    calls.filter { $0.json["message"]["id"].string == "m1" }
                }
                @Sendable func attempts() async throws -> Int? {
                    try await Self.waiting(server, hook, "messaging:g").first?.attempts
                }
                // Attempt 1 is refused; attempt 2 waits for the backoff, however long the machine takes.
                try await eventually { try await attempts() == 1 }
                #expect(m1(receiver.arrived).map(\.attempt) == [1])
                clock.advance(by: Self.backoff)
                // Attempt 2 gets no answer: it fails when the call timeout passes on the clock.
                try await receiver.wait(for: "attempt 2", arrived: true) { m1($0).count == 2 }
                try await eventually { clock.deadlines.contains(clock.now.offset + Self.callTimeout) }
                #expect(try await attempts() == 1)
                clock.advance(by: Self.callTimeout)
                try await eventually { try await attempts() == 2 }
                // The backoff runs from the failure, not from the start of the attempt that timed out.
                let retry = try #require(try await Self.waiting(server, hook, "messaging:g").first).nextAttemptAt
                #expect(retry > clock.wallNow, "a call that timed out is retried without waiting")
                clock.advance(by: Self.backoff)
                // Attempt 3 is taken; the held answer to attempt 2 finishes after it.
                try await eventually { try await Self.waiting(server, hook, "messaging:g").isEmpty }
                receiver.release()
                try await receiver.wait(for: "the held answer finished") { m1($0).count == 3 }
                let calls = m1(receiver.received)
                #expect(calls.map(\.attempt) == [1, 3, 2])
                #expect(calls.filter(\.delivered).map(\.attempt).sorted() == [2, 3])
                #expect(Set(calls.map(\.deliveryID)).count == 1)
                for call in receiver.received {
                    let expected = WebhookSender.signature(of: call.body, secret: TestKeys.apiSecret)
                    #expect(call.headers[HTTPField.Name("X-Signature")!] == expected)
                    #expect(call.headers[HTTPField.Name("X-Api-Key")!] == TestKeys.apiKey)
                    #expect(call.headers[.contentType] == "application/json")
                }
                // The signature is HMAC-SHA256 of the body with the secret, in hex (checked independently).
                let body = try #require(calls.last).body
                let code = HMAC<SHA256>.authenticationCode(
                    for: body, using: SymmetricKey(data: Data(TestKeys.apiSecret.utf8)))
                #expect(
                    WebhookSender.signature(of: body, secret: TestKeys.apiSecret)
                        == code.map { String(format: "%02x", $0) }.joined())
                #expect(
                    WebhookSender.signature(of: body, secret: "another-secret-that-is-long-enough-x")
                        != WebhookSender.signature(of: body, secret: TestKeys.apiSecret))
            }
        }
    }

    @Test(
        "a channel's calls arrive in order while a failing call holds them back; other channels go on",
        arguments: StoreKind.all)
    func orderPerChannel(kind: StoreKind) async throws {
        let receiver = WebhookReceiver()
        let blocked = Mutex(true)
        receiver.answer { _, _, body in
            // messaging:a's first message is refused until the test lets it through.
            if body["message"]["id"].string == "a0", blocked.withLock({ $0 }) { return (.serviceUnavailable, false) }
            return (.ok, false)
        }
        try await receiver.run { base in
            // Enough attempts that a0 never dies while it is held back, however slow the machine.
            var settings = Self.settings(webhook: base.appendingPathComponent("hook"), attempts: 10_000)
            settings.webhooks[0].eventTypes = [.messageNew]
            try await TestServer.run(kind, .live, webhooks: settings) { server in
                try await server.upsert("alice", "bob")
                try await server.createChannel("messaging:a", members: ["alice", "bob"])
                try await server.createChannel("messaging:b", members: ["alice", "bob"])
                for index in 0..<5 {
                    try await server.send("messaging:a", id: "a\(index)", from: "alice")
                    try await server.send("messaging:b", id: "b\(index)", from: "bob")
                }
                try await receiver.wait(for: "all of b") { calls in
                    calls.filter { $0.delivered && $0.json["cid"].string == "messaging:b" }.count == 5
                }
                // a0 still fails: none of messaging:a's later messages went out before it.
                #expect(!receiver.delivered.contains { $0.json["cid"].string == "messaging:a" })
                blocked.withLock { $0 = false }
                try await receiver.wait(for: "all of a") { calls in
                    calls.filter { $0.delivered && $0.json["cid"].string == "messaging:a" }.count == 5
                }
                for cid in ["messaging:a", "messaging:b"] {
                    let ids = receiver.delivered.filter { $0.json["cid"].string == cid }.compactMap {
                        $0.json["message"]["id"].string
                    }
                    let prefix = String(cid.last!)
                    #expect(ids == (0..<5).map { "\(prefix)\($0)" })
                }
                #expect(receiver.delivered.allSatisfy { $0.type == "message.new" })
            }
        }
    }

    @Test("a call that keeps failing is dead, listed, and delivered when retried", arguments: StoreKind.all)
    func deadAndRetried(kind: StoreKind) async throws {
        let receiver = WebhookReceiver()
        let down = Mutex(true)
        receiver.answer { _, _, _ in down.withLock { $0 } ? (.badGateway, false) : (.ok, false) }
        let clock = ManualClock()
        try await receiver.run { base in
            var settings = Self.clockSettings(webhook: base.appendingPathComponent("hook"), attempts: 3)
            settings.webhooks[0].eventTypes = [.messageNew]
            try await TestServer.run(kind, .live, webhooks: settings, time: clock.timeSource) { server in
                try await server.upsert("alice", "bob")
                try await server.createChannel("messaging:g", members: ["alice", "bob"])
                try await server.send("messaging:g", id: "m1", from: "alice")
                // Each attempt after a backoff on the clock; the third is the last.
                for attempt in 1...2 {
                    try await eventually {
                        try await Self.waiting(server, base.appendingPathComponent("hook"), "messaging:g").first?
                            .attempts == attempt
                    }
                    #expect(receiver.arrived.count == attempt)
                    clock.advance(by: Self.backoff)
                }
                try await receiver.wait(for: "3 attempts") { $0.count >= 3 }
                try await eventually { try await server.ok(.get, "/webhooks/failed")["calls"].array.count == 1 }
                let failed = try await server.ok(.get, "/webhooks/failed")
                let call = failed["calls"][0]
                #expect(call["event_type"].string == "message.new")
                #expect(call["attempts"].int == 3)
                #expect(call["last_error"].string == "HTTP 502")
                #expect(call["cid"].string == "messaging:g")
                #expect(try JSON(parsing: call["payload"].string ?? "")["message"]["id"].string == "m1")
                // A user may not see or retry them.
                let bob = try await server.token("bob")
                try (try await server.call(.get, "/webhooks/failed", token: bob)).expectError(403, code: 17)
                try (try await server.call(.post, "/webhooks/failed/retry", body: "{}", token: bob)).expectError(
                    403, code: 17)
                try (try await server.call(.get, "/webhooks/failed?limit=0")).expectError(400, code: 4)

                down.withLock { $0 = false }
                let id = try #require(call["delivery_id"].string)
                let retried = try await server.ok(
                    .post, "/webhooks/failed/retry", #"{"delivery_ids": ["\#(id)", "unknown"]}"#)
                #expect(retried["retried"].array.compactMap(\.string) == [id])
                try await receiver.wait(for: "the retried call") { calls in
                    calls.contains { $0.deliveryID == id && $0.delivered }
                }
                try await eventually { try await server.ok(.get, "/webhooks/failed")["calls"].array.isEmpty }
                let text = try await server.execute(uri: "/metrics", method: .get).body
                #expect(text.contains(#"ticks_webhook_calls_total{kind="webhook",outcome="dead"} 1"#))
                #expect(text.contains(#"ticks_webhook_calls_total{kind="webhook",outcome="delivered"} 1"#))
            }
        }
    }

    @Test(
        "the push hook names only members with no open socket, each with a delivery-only token",
        arguments: StoreKind.all)
    func pushRecipients(kind: StoreKind) async throws {
        let receiver = WebhookReceiver()
        try await receiver.run { base in
            let settings = Self.settings(webhook: nil, push: base.appendingPathComponent("push"))
            try await TestServer.run(kind, .live, webhooks: settings) { server in
                try await server.upsert("alice", "bob", "carol")
                try await server.createChannel("messaging:g", members: ["alice", "bob", "carol"])
                try await server.createChannel("messaging:other", members: ["alice", "bob"])
                let socket = try await TestSocket.connect(server, as: "carol")
                defer { socket.close() }
                try await server.send("messaging:g", id: "m1", from: "alice")
                try await receiver.wait(for: "the push") { !$0.isEmpty }
                let call = try #require(receiver.received.first)
                #expect(call.path == "/push")
                #expect(call.type == "message.new")
                #expect(call.json["message"]["id"].string == "m1")
                let recipients = call.json["recipients"].array
                #expect(recipients.compactMap { $0["user_id"].string } == ["bob"])
                let token = try #require(recipients.first?["delivery_token"].string)

                // The token marks delivered in its channel, as bob…
                let delivered = try await server.call(
                    .post, "/channels/delivered",
                    body: #"{"latest_delivered_messages": [{"cid": "messaging:g", "id": "m1"}]}"#, token: token)
                #expect(delivered.status == 201 || delivered.status == 200, "\(delivered.body)")
                let bob = try #require(try await server.readState("messaging:g", of: "bob"))
                #expect(bob["last_delivered_message_id"].string == "m1")
                #expect(bob["unread_messages"].int == 1)
                // …and nothing else.
                try (try await server.call(.post, "/channels/messaging/g/read", body: "{}", token: token))
                    .expectError(403, code: 17)
                try
                    (try await server.call(
                        .post, "/channels/messaging/g/message", body: #"{"message": {"id": "b1", "text": "x"}}"#,
                        token: token)).expectError(403, code: 17)
                try (try await server.call(.post, "/channels/messaging/g/query", body: "{}", token: token))
                    .expectError(403, code: 17)
                try
                    (try await server.call(
                        .post, "/channels/delivered",
                        body: #"{"latest_delivered_messages": [{"cid": "messaging:other", "id": "m1"}]}"#, token: token))
                    .expectError(403, code: 17)
                let (close, frames) = try await TestSocket.refusal(server, as: "bob", token: token)
                #expect(close == 1000)
                #expect(frames.first?["error"]["StatusCode"].int == 403)
            }
        }
    }

    @Test("delivery-only tokens: scope and channel are checked, and expire")
    func deliveryTokens() async throws {
        let authority = await TokenAuthority(credentials: try Credentials(apiKey: "k", apiSecret: TestKeys.apiSecret))
        let channel = ChannelID(type: "messaging", id: "g")
        let token = try await authority.deliveryToken(for: "bob", in: channel, expiresIn: .seconds(60))
        #expect(try await authority.grant(for: token) == TokenGrant(principal: .user("bob"), deliveryOnly: channel))
        // A full user token has no such limit.
        #expect(try await authority.grant(for: try await authority.userToken(for: "bob")).deliveryOnly == nil)
        // Expired: refused.
        let expired = try await authority.deliveryToken(for: "bob", in: channel, expiresIn: .seconds(-5))
        await #expect(throws: APIError.tokenExpired("token has expired")) { try await authority.grant(for: expired) }
    }
}
