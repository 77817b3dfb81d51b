import Foundation
import Logging
import PostgresNIO
import Synchronization
import Testing
import TicksTestSupport

@testable import TicksServer

/// Two nodes' event buses on one PostgreSQL schema. An event a node cannot
/// deliver to the others must not vanish: the users it was for have their
/// connections on the other nodes closed, so their clients resync.
@Suite("PostgreSQL event bus", .enabled(if: PostgresTestDatabase.url != nil))
struct EventBusTests {
    struct Node {
        let bus: PostgresEventBus
        let hub: ConnectionHub
        let metrics: ServerMetrics
    }

    /// Runs `body` with nodes A (with `queueBytes`) and B, their buses running, and a client of their schema.
    func withNodes(
        queueBytes: Int = 64 << 20, counts: RecipientCountsReader? = nil,
        _ body: @Sendable (Node, Node, PostgresClient) async throws -> Void
    ) async throws {
        try await PostgresTestDatabase.withStore { store, location in
            let pool = try #require(store.unbounded as? PostgresEngine).transactions.pool
            let client = pool.client
            func node(queueBytes: Int) throws -> Node {
                let metrics = ServerMetrics()
                let hub = ConnectionHub(
                    bufferBytes: 1 << 20, maxConnectionsPerUser: 10, metrics: metrics, logger: PostgresTestDatabase.logger)
                let bus = PostgresEventBus(
                    pool: pool, configuration: try location.connectionConfiguration(), schema: location.schema,
                    queueBytes: queueBytes, deadline: StoreKind.deadline, counts: counts, logger: PostgresTestDatabase.logger)
                return Node(bus: bus, hub: hub, metrics: metrics)
            }
            let a = try node(queueBytes: queueBytes)
            let b = try node(queueBytes: 64 << 20)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await a.bus.run(hub: a.hub) }
                group.addTask { try await b.bus.run(hub: b.hub) }
                defer { group.cancelAll() }
                try await body(a, b, client)
            }
        }
    }

    /// A frame `size` bytes long, as JSON.
    static func event(_ label: String, size: Int = 100) -> EncodedEvent {
        let padding = String(repeating: "x", count: max(size - 30 - label.count, 0))
        return EncodedEvent(Data(#"{"type":"\#(label)","pad":"\#(padding)"}"#.utf8))
    }

    /// Publishes small events from A until one reaches `userID` on B: both listeners are up.
    static func waitUntilConnected(_ a: Node, _ frames: Collector, _ userID: String) async throws {
        // One ping a second at most: pings must not fill a small queue while A is still connecting.
        let deadline = ContinuousClock.now + Patience.wait
        while ContinuousClock.now < deadline {
            a.bus.publish(event("ping"), to: [userID])
            if await frames.first(within: .seconds(1), where: { $0.contains("ping") }) != nil { return }
        }
        Issue.record("the nodes never heard each other")
    }

    /// Connections of bob and carol on `b`, each once it hears `a`.
    static func bobAndCarol(on b: Node, hearing a: Node) async throws -> (Collector, Collector) {
        let bob = Collector(try b.hub.register(userID: "bob").frames)
        let carol = Collector(try b.hub.register(userID: "carol").frames)
        try await waitUntilConnected(a, bob, "bob")
        try await waitUntilConnected(a, carol, "carol")
        return (bob, carol)
    }

    /// Reads one connection's frames as they come (an `AsyncStream` has one
    /// reader, and ends for good when that reader is cancelled).
    final class Collector: Sendable {
        private final class Box: Sendable {
            let state = Mutex<(texts: [String], ended: Bool)>(([], false))
        }
        private let box = Box()
        private let task: Task<Void, Never>

        init(_ frames: AsyncStream<OutboundFrame>) {
            let box = self.box
            task = Task {
                for await frame in frames {
                    let text = String(buffer: frame.buffer)
                    box.state.withLock { $0.texts.append(text) }
                }
                box.state.withLock { $0.ended = true }
            }
        }

        var texts: [String] { box.state.withLock { $0.texts } }

        /// Takes the first frame that `matches`, waiting up to `timeout`.
        func first(within timeout: Duration, where matches: (String) -> Bool) async -> String? {
            let deadline = ContinuousClock.now + timeout
            repeat {
                let found = box.state.withLock { state -> String? in
                    guard let index = state.texts.firstIndex(where: matches) else { return nil }
                    return state.texts.remove(at: index)
                }
                if let found { return found }
                try? await Task.sleep(for: .milliseconds(5))
            } while ContinuousClock.now < deadline
            return nil
        }

        /// Whether the connection is closed within `timeout`.
        func ends(within timeout: Duration) async -> Bool {
            let deadline = ContinuousClock.now + timeout
            repeat {
                if box.state.withLock({ $0.ended }) { return true }
                try? await Task.sleep(for: .milliseconds(5))
            } while ContinuousClock.now < deadline
            return false
        }

        deinit { task.cancel() }
    }

    @Test("an event that cannot be published (the batch table is gone) closes its users' connections on the other node")
    func publishFailureResyncs() async throws {
        try await withNodes { a, b, client in
            let bob = Collector(try b.hub.register(userID: "bob").frames)
            let carol = Collector(try b.hub.register(userID: "carol").frames)
            try await Self.waitUntilConnected(a, bob, "bob")
            try await client.query("ALTER TABLE event_batch RENAME TO event_batch_away")
            // Too large for a notification: it must go through event_batch, which is not there.
            a.bus.publish(Self.event("lost", size: 20_000), to: ["bob"])
            #expect(await bob.ends(within: Patience.wait), "bob's connection on B stayed open after A lost an event for him")
            #expect(!bob.texts.contains { $0.contains("lost") })
            #expect(a.metrics.registry.emitToString().contains("ticks_bus_events_lost_total 1"))
            // Carol missed nothing: her connection stays.
            #expect(await carol.ends(within: .milliseconds(300)) == false)
            try await client.query("ALTER TABLE event_batch_away RENAME TO event_batch")
        }
    }

    @Test("an event that does not fit the queue closes its users' connections on the other node; the others still flow")
    func queueFullResyncs() async throws {
        try await withNodes(queueBytes: 10_000) { a, b, _ in
            let (bob, carol) = try await Self.bobAndCarol(on: b, hearing: a)
            a.bus.publish(Self.event("too-big", size: 20_000), to: ["bob"])
            a.bus.publish(Self.event("fits"), to: ["carol"])
            #expect(await bob.ends(within: Patience.wait), "bob's connection on B stayed open after A dropped an event for him")
            #expect(!bob.texts.contains { $0.contains("too-big") })
            #expect(await carol.first(within: Patience.wait, where: { $0.contains("fits") }) != nil)
            #expect(await carol.ends(within: .milliseconds(300)) == false)
        }
    }

    @Test("message.new travels once with each recipient's counts, and arrives whole on the other node")
    func personalCounts() async throws {
        try await withNodes { a, b, _ in
            let (bob, carol) = try await Self.bobAndCarol(on: b, hearing: a)
            let event = try EncodedEvent(
                object: Data(#"{"type":"message.new","text":"hi"}"#.utf8),
                counts: [
                    "bob": UnreadEnding(channel: 1, messages: 4, channels: 2),
                    "carol": UnreadEnding(channel: 2, messages: 2, channels: 1),
                ])
            a.bus.publish(event, to: ["bob", "carol"])
            for (frames, counts) in [(bob, [1, 4, 2]), (carol, [2, 2, 1])] {
                let text = try #require(await frames.first(within: Patience.wait, where: { !$0.contains("ping") }))
                let json = try JSON(parsing: text)
                #expect(json["type"].string == "message.new")
                #expect([json["unread_count"].int, json["total_unread_count"].int, json["unread_channels"].int] == counts)
            }
        }
    }

    @Test("a message to every member, unlisted: the other node finds its connected members as it reads their counts, once for both events")
    func everyMember() async throws {
        let asked = Mutex<[[String]?]>([])
        let reader: RecipientCountsReader = { channelPK, users in
            asked.withLock { $0.append(users) }
            // Channel 42's members are amy and bob.
            return channelPK != 42 ? [] : ["amy", "bob"].filter { users?.contains($0) ?? true }.map {
                RecipientUnread(userID: $0, channelUnread: 3, totals: UnreadTotals(messages: 7, channels: 2))
            }
        }
        try await withNodes(counts: reader) { a, b, _ in
            let (bob, carol) = try await Self.bobAndCarol(on: b, hearing: a)
            for (type, audience) in [("message.new", ConnectionAudience.watchers("messaging:big")), ("notification.message_new", .notWatching("messaging:big"))] {
                let event = try EncodedEvent(
                    object: Data(#"{"type":"\#(type)","text":"hi"}"#.utf8), countsToReadIn: 42, audience: audience)
                a.bus.publish(toEveryMember: event, memberCount: 1_000)
            }
            // bob never watched a channel: he hears the channel's event alone.
            let text = try #require(await bob.first(within: Patience.wait, where: { $0.contains("message.new") }))
            let json = try JSON(parsing: text)
            #expect(json["type"].string == "message.new" && json["unread_count"].int == 3 && json["total_unread_count"].int == 7)
            a.bus.publish(Self.event("after"), to: ["carol"])
            #expect(await carol.first(within: Patience.wait, where: { $0.contains("after") }) != nil)
            #expect(!carol.texts.contains { $0.contains("message.new") }, "carol, no member, got it")
            // B held two users among a channel of 1,000: it asked for them, once for the two entries (one batch) or twice.
            let asks = asked.withLock { $0 }
            #expect((1...2).contains(asks.count) && asks.allSatisfy { $0?.sorted() == ["bob", "carol"] }, "\(asks)")
        }
    }

    @Test("a message to every member that does not fit the queue closes every connection on the other node")
    func everyMemberLostResyncsEveryone() async throws {
        try await withNodes(queueBytes: 10_000) { a, b, _ in
            let (bob, carol) = try await Self.bobAndCarol(on: b, hearing: a)
            let padding = String(repeating: "x", count: 20_000)
            let event = try EncodedEvent(
                object: Data(#"{"type":"message.new","text":"\#(padding)"}"#.utf8), countsToReadIn: 42,
                audience: .watchers("messaging:big"))
            a.bus.publish(toEveryMember: event, memberCount: 1_000)
            a.bus.publish(Self.event("fits"), to: ["dave"])
            for user in [bob, carol] {
                #expect(await user.ends(within: Patience.wait), "a connection on B stayed open after A dropped a message to every member")
            }
        }
    }

    @Test("a notification of a node of the release before, with each recipient's ending, arrives whole")
    func previousReleaseEndings() async throws {
        try await withNodes { a, b, client in
            let bob = Collector(try b.hub.register(userID: "bob").frames)
            try await Self.waitUntilConnected(a, bob, "bob")
            let payload = #"{"node":"old","entries":[{"frame":"{\"type\":\"message.new\"","users":["bob"],"#
                + #""endings":[",\"unread_count\":3}"]}]}"#
            try await client.query("SELECT pg_notify(\(b.bus.channel), \(payload))")
            let text = try #require(await bob.first(within: Patience.wait, where: { !$0.contains("ping") }))
            #expect(try JSON(parsing: text)["unread_count"].int == 3)
        }
    }

    @Test("events too large for a notification go out in order, a run of them as one stored batch")
    func largeEventsShareAStoredBatch() async throws {
        try await withNodes { a, b, client in
            let bob = Collector(try b.hub.register(userID: "bob").frames)
            try await Self.waitUntilConnected(a, bob, "bob")
            let before = try await Self.storedBatches(client)
            // As a send to a large channel: message.new and notification.message_new, each past a
            // notification; small events on either side.
            let labels = ["small-1", "large-1", "large-2", "small-2", "small-3"]
            for label in labels {
                a.bus.publish(Self.event(label, size: label.hasPrefix("large") ? 20_000 : 100), to: ["bob"])
            }
            var arrived: [String] = []
            for _ in labels {
                let text = try #require(await bob.first(within: Patience.wait, where: { !$0.contains("ping") }))
                arrived.append(try #require(try JSON(parsing: text)["type"].string))
            }
            #expect(arrived == labels)
            // Both large ones in one row, unless A's publisher took the queue between them
            // (`EventBusPayloadTests` holds how a round is split).
            #expect((1...2).contains(try await Self.storedBatches(client) - before))
        }
    }

    static func storedBatches(_ client: PostgresClient) async throws -> Int {
        try await client.query("SELECT count(*) FROM event_batch").collect().first?.decode(Int.self) ?? -1
    }

    /// A tiny event for `audience`.
    static func event(_ label: String, for audience: ConnectionAudience) -> EncodedEvent {
        EncodedEvent(shared: .init(string: #"{"type":"\#(label)"}"#), personal: nil, audience: audience)
    }

    @Test("a watch made on one node reaches the connection on the other, and events keep their audience across the bus")
    func watchAcrossNodes() async throws {
        try await withNodes { a, b, _ in
            let registration = try b.hub.register(userID: "bob")
            let connection = registration.outbox.id
            let bob = Collector(registration.frames)
            try await Self.waitUntilConnected(a, bob, "bob")
            // A does not hold the connection: the watch goes through the bus.
            a.bus.watch(WatchChange(connection: connection, user: "bob", cid: "m:w", watching: true))
            // Published after the watch, in order: a frame for x's watchers would have come first.
            a.bus.publish(Self.event("x-channel", for: .watchers("m:x")), to: ["bob"])
            a.bus.publish(Self.event("w-channel", for: .watchers("m:w")), to: ["bob"])
            a.bus.publish(Self.event("x-notice", for: .notWatching("m:x")), to: ["bob"])
            a.bus.publish(Self.event("w-notice", for: .notWatching("m:w")), to: ["bob"])
            a.bus.publish(Self.event("everyone", for: .everyConnection), to: ["bob"])
            let last = await bob.first(within: Patience.wait) { $0.contains("everyone") }
            #expect(last != nil)
            var heard: [String] = []
            for text in bob.texts where !text.contains("ping") { heard.append(text) }
            #expect(heard == [#"{"type":"w-channel"}"#, #"{"type":"x-notice"}"#])
            // Stopping travels the same way.
            a.bus.watch(WatchChange(connection: connection, user: "bob", cid: "m:w", watching: false))
            a.bus.publish(Self.event("w-notice-2", for: .notWatching("m:w")), to: ["bob"])
            let stopped = await bob.first(within: Patience.wait) { $0.contains("w-notice-2") }
            #expect(stopped != nil)
        }
    }
}
