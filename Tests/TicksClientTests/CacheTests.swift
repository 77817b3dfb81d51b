import Foundation
import GRDB
import Testing
import TicksClient
import TicksTestSupport

/// The device cache and catching up after being offline, against a real
/// server that is stopped, changed and started again.
@Suite("Offline cache and sync")
struct CacheTests {
    let c1 = ChannelID(type: "messaging", id: "c1")

    func cacheFile() -> OutboxLocation {
        .file(FileManager.default.temporaryDirectory.appendingPathComponent("ticks-cache-\(UUID().uuidString).sqlite"))
    }

    /// alice and bob in c1, c2, c3; alice sent a1, a2 in c1, bob read a1; bob sent b2 in c2.
    func setUp(_ server: LiveServer) async throws {
        try await server.upsert("alice", "bob")
        for id in ["c1", "c2", "c3"] { try await server.createChannel("messaging:\(id)", members: ["alice", "bob"]) }
        try await server.send("messaging:c1", id: "a1", from: "alice")
        try await server.send("messaging:c1", id: "a2", from: "alice")
        try await server.markRead("messaging:c1", "bob", upTo: "a1")
        try await server.send("messaging:c2", id: "b2", from: "bob")
    }

    /// alice's client on `file`, her list and c1 loaded, then written to the cache and disconnected.
    func warmUp(_ server: LiveServer, file: OutboxLocation) async throws {
        let alice = try await server.connected("alice", outbox: file)
        try await alice.channels().load()
        try await alice.channel(c1).load()
        await alice.disconnect()
    }

    @Test("an app opened offline shows its channels, messages and ticks from the cache at once")
    func offline() async throws {
        let file = cacheFile()
        try await LiveServer.with { server in
            try await setUp(server)
            try await warmUp(server, file: file)
            try await server.stop()

            let alice = try await server.client("alice", outbox: file)
            try await alice.connect(userID: "alice", token: try await server.token("alice"))
            #expect(await !alice.connectionStatus.isConnected)
            let list = await alice.channels()
            try await list.load()
            let rows = await list.state
            #expect(rows.channels.map(\.cid.id) == ["c2", "c1", "c3"])
            #expect(rows.channels.allSatisfy { !$0.isSynced })
            #expect(rows.channels.first?.unreadCount == 1)
            #expect(rows.totalUnreadCount == 1)
            let channel = await alice.channel(c1)
            try await channel.load()
            let state = try await channel.state
            #expect(state.isLoaded && !state.isSynced)
            #expect(state.messages.map(\.id) == ["a1", "a2"])
            #expect(state.message(withID: "a1")?.deliveryStatus == .read)
            #expect(state.message(withID: "a2")?.deliveryStatus == .sent)
            // Written offline: pending, and sent once the server is back.
            try await channel.send("from the plane", id: "a3")
            try await server.start()
            try await channel.wait("synced and sent") {
                $0.isSynced && $0.message(withID: "a3")?.deliveryStatus == .sent
            }
            #expect(try await server.messageIDs("messaging:c1") == ["a1", "a2", "a3"])
            await alice.disconnect()
        }
    }

    @Test("after a restart and time away, one sync brings every cached channel up to date, nothing lost or twice")
    func syncAfterOffline() async throws {
        let file = cacheFile()
        try await LiveServer.with { server in
            try await setUp(server)
            try await warmUp(server, file: file)
            // While alice is away (and the server restarts): news in every channel.
            try await server.stop()
            try await server.start()
            try await server.markRead("messaging:c1", "bob")
            try await server.send("messaging:c2", id: "b3", from: "bob")
            try await server.wireCall(
                .post, "/messages/b2", #"{"message": {"text": "edited", "user_id": "bob"}}"#, as: nil)
            try await server.removeMembers("messaging:c3", ["alice"])
            let queriesBefore = server.requestCount(route: "/channels/{type}/{id}/query")
            let listsBefore = server.requestCount(route: "/channels")

            let alice = try await server.client("alice", outbox: file)
            let list = await alice.channels()
            let receipts = Recorder(alice.receiptEvents())
            try await alice.connect(userID: "alice", token: try await server.token("alice"))
            try await list.load()
            let channel = await alice.channel(c1)
            try await channel.load()
            let c1State = try await channel.wait("c1 caught up") { $0.message(withID: "a2")?.deliveryStatus == .read }
            #expect(c1State.messages.map(\.id) == ["a1", "a2"])
            let rows = try await eventually("the list caught up") {
                let state = await list.state
                return state.channels.map(\.cid.id) == ["c2", "c1"] && state.totalUnreadCount == 2 ? state : nil
            }
            #expect(rows.channels.first?.lastMessage?.id == "b3")
            #expect(rows.channels.first?.unreadCount == 2)
            let c2 = try await alice.channel(ChannelID(type: "messaging", id: "c2")).state
            #expect(c2.message(withID: "b2")?.text == "edited")
            #expect(c2.messages.map(\.id) == ["b2", "b3"])
            // The read that happened while away is reported as a receipt.
            try await eventually("bob's read reported") {
                receipts.all.contains { $0.messageId == "a2" && $0.receiptType == .read } ? true : nil
            }
            #expect(server.requestCount(route: "/sync") >= 1)
            // Sync told it all: no channel had to be loaded again, one list page was asked for.
            #expect(server.requestCount(route: "/channels/{type}/{id}/query") == queriesBefore + 1)
            #expect(server.requestCount(route: "/channels") <= listsBefore + 3)
            await alice.disconnect()
        }
    }

    @Test("a cache too old to sync (over 30 days) is dropped: what is shown loads again, the rest is forgotten")
    func tooOldToSync() async throws {
        let file = cacheFile()
        try await LiveServer.with { server in
            try await setUp(server)
            try await warmUp(server, file: file)
            // As if the app had last run 40 days ago.
            guard case .file(let url) = file else { return }
            var waiting = Configuration()
            waiting.busyMode = .timeout(5)
            let database = try DatabaseQueue(path: url.path, configuration: waiting)
            let old = (Date().timeIntervalSince1970 - 40 * 24 * 3600) * 1_000_000
            try await database.write { db in try db.execute(sql: "UPDATE sync_state SET synced_through = ?", arguments: [Int64(old)]) }
            try await database.close()
            try await server.send("messaging:c1", id: "b1", from: "bob")

            let alice = try await server.client("alice", outbox: file)
            let channel = await alice.channel(c1)
            try await alice.connect(userID: "alice", token: try await server.token("alice"))
            let state = try await channel.wait("c1 loaded again") { $0.isSynced && $0.message(withID: "b1") != nil }
            #expect(state.messages.map(\.id) == ["a1", "a2", "b1"])
            #expect(server.requestCount(route: "/sync") >= 1)
            // c2 and c3 were neither open nor listed: forgotten, and out of the cache.
            try await eventually("c2 forgotten") {
                try await alice.channel(ChannelID(type: "messaging", id: "c2")).state.isLoaded ? nil : true
            }
            await alice.disconnect()
            try await server.stop()
            let offline = try await server.client("alice", outbox: file)
            try await offline.connect(userID: "alice", token: try await server.token("alice"))
            let list = await offline.channels()
            try await list.load()
            #expect(await list.state.channels.map(\.cid.id) == ["c1"])
            await offline.disconnect()
        }
    }

    @Test("bounded: the least recently active channels and the oldest messages are not kept")
    func bounded() async throws {
        let file = cacheFile()
        try await LiveServer.with { server in
            try await server.upsert("alice", "bob")
            for index in 1...4 { try await server.createChannel("messaging:k\(index)", members: ["alice", "bob"]) }
            for index in 1...12 { try await server.send("messaging:k1", id: "k1-\(index)", from: "bob") }
            for index in 2...4 { try await server.send("messaging:k\(index)", id: "k\(index)-1", from: "bob") }
            let limits = CacheLimits(maxChannels: 3, maxMessagesPerChannel: 5)
            let alice = try await server.connected("alice", outbox: file) { $0.cacheLimits = limits }
            try await alice.channels().load()
            try await alice.channel(ChannelID(type: "messaging", id: "k1")).load()
            await alice.disconnect()
            try await server.stop()

            let again = try await server.client("alice", outbox: file) { $0.cacheLimits = limits }
            try await again.connect(userID: "alice", token: try await server.token("alice"))
            let list = await again.channels()
            try await list.load()
            // k1 was active first, so it went; the three most recent stay.
            #expect(await list.state.channels.map(\.cid.id) == ["k4", "k3", "k2"])
            let k4 = await again.channel(ChannelID(type: "messaging", id: "k4"))
            try await k4.load()
            #expect(try await k4.state.messages.map(\.id) == ["k4-1"])
            await again.disconnect()

            // One channel and its newest five messages.
            let small = CacheLimits(maxChannels: 1, maxMessagesPerChannel: 5)
            let oneFile = cacheFile()
            let one = try await server.client("alice", outbox: oneFile) { $0.cacheLimits = small }
            try await server.start()
            try await one.connect(userID: "alice", token: try await server.token("alice"))
            try await server.send("messaging:k1", id: "k1-13", from: "bob")
            try await one.channel(ChannelID(type: "messaging", id: "k1")).load()
            await one.disconnect()
            try await server.stop()
            let oneAgain = try await server.client("alice", outbox: oneFile) { $0.cacheLimits = small }
            try await oneAgain.connect(userID: "alice", token: try await server.token("alice"))
            let k1 = await oneAgain.channel(ChannelID(type: "messaging", id: "k1"))
            try await k1.load()
            let kept = try await k1.state
            #expect(kept.messages.map(\.id) == (9...13).map { "k1-\($0)" })
            #expect(kept.hasOlderMessages)
            await oneAgain.disconnect()
        }
    }
}
