import Foundation
import Logging
import Testing
import TicksTestSupport

@testable import TicksServer

/// docs/events.md, "Watching", in the hub: which connection hears which
/// audience, as a table, and the bound on a connection's watches (a watch
/// carried to the node that holds the connection: `EventBusTests`).
@Suite("Watching in the hub")
struct WatchingHubTests {
    func hub() -> ConnectionHub {
        ConnectionHub(bufferBytes: 1 << 20, maxConnectionsPerUser: 50, metrics: ServerMetrics(), logger: Logger(label: "test"))
    }

    /// A connection's watches (nil: never watched) × the audience → whether it hears.
    static let table: [(watched: Set<String>?, audience: ConnectionAudience, hears: Bool)] = [
        (nil, .everyConnection, true),
        (nil, .watchers("m:w"), true),
        (nil, .notWatching("m:w"), false),
        (["m:w"], .everyConnection, true),
        (["m:w"], .watchers("m:w"), true),
        (["m:w"], .notWatching("m:w"), false),
        (["m:x"], .everyConnection, true),
        (["m:x"], .watchers("m:w"), false),
        (["m:x"], .notWatching("m:w"), true),
        ([], .everyConnection, true),
        ([], .watchers("m:w"), false),
        ([], .notWatching("m:w"), true),
    ]

    @Test("each connection hears the audiences the table gives it, and only those", arguments: 0..<table.count)
    func audience(row: Int) throws {
        let (watched, audience, hears) = Self.table[row]
        let hub = hub()
        let (outbox, frames) = try hub.register(userID: "bob")
        if let watched {
            // Watch one channel and stop it, so the connection is a watcher with exactly `watched`.
            try hub.watch("m:seed", connectionID: outbox.id, userID: "bob")
            hub.stopWatching("m:seed", connectionID: outbox.id, userID: "bob")
            for cid in watched { try hub.watch(cid, connectionID: outbox.id, userID: "bob") }
        }
        let event = EncodedEvent(shared: .init(string: #"{"type":"t"}"#), personal: nil, audience: audience)
        #expect(hub.send(event, to: ["bob"]) == (hears ? 1 : 0), "watched \(String(describing: watched)), \(audience)")
        #expect(hub.anyConnected(among: ["bob"], hearing: audience) == hears)
        #expect(hub.watchers(of: "m:w", among: ["bob"]) == (outbox.hears(.watchers("m:w")) ? ["bob"] : []))
        hub.unregister(outbox)
        _ = frames
    }

    @Test("a user's connections watch at most 10,000 channels together; watching one it watches is no new one; another user's connection is not found")
    func bounds() throws {
        let hub = hub()
        let (outbox, _) = try hub.register(userID: "bob")
        let (second, _) = try hub.register(userID: "bob")
        let limit = ServerLimits.maxWatchedChannelsPerUser
        for index in 0..<(limit - 1) { try hub.watch("m:c\(index)", connectionID: outbox.id, userID: "bob") }
        // The last one on bob's other connection: the bound is the user's, not a connection's.
        try hub.watch("m:on-second", connectionID: second.id, userID: "bob")
        for connection in [outbox, second] {
            #expect(throws: ConnectionHub.WatchRefusal.tooMany(limit: limit)) {
                try hub.watch("m:one-more", connectionID: connection.id, userID: "bob")
            }
        }
        #expect(try hub.watch("m:c0", connectionID: outbox.id, userID: "bob") == nil)  // watched already: nothing new
        #expect(!outbox.hears(.watchers("m:one-more")) && outbox.hears(.watchers("m:c\(limit - 2)")))
        // Another user's connection has a bound of its own.
        let (carols, _) = try hub.register(userID: "carol")
        try hub.watch("m:one-more", connectionID: carols.id, userID: "carol")
        // A watch stopped on one connection makes room on the other.
        hub.stopWatching("m:c0", connectionID: outbox.id, userID: "bob")
        try hub.watch("m:one-more", connectionID: second.id, userID: "bob")
        #expect(throws: ConnectionHub.WatchRefusal.tooMany(limit: limit)) {
            try hub.watch("m:c0", connectionID: outbox.id, userID: "bob")
        }
        // A connection that closes gives its watches back.
        hub.unregister(second)
        try hub.watch("m:c0", connectionID: outbox.id, userID: "bob")
        #expect(throws: ConnectionHub.WatchRefusal.unknownConnection) {
            try hub.watch("m:x", connectionID: outbox.id, userID: "alice")
        }
        #expect(throws: ConnectionHub.WatchRefusal.unknownConnection) {
            try hub.watch("m:x", connectionID: "no-such", userID: "bob")
        }
        #expect(!hub.stopWatching("m:x", connectionID: "no-such", userID: "bob"))
        // A watch taken back leaves the connection as it was: one that never watched hears all again.
        let (fresh, _) = try hub.register(userID: "dave")
        let started = try #require(try hub.watch("m:w", connectionID: fresh.id, userID: "dave"))
        #expect(try hub.watch("m:w", connectionID: fresh.id, userID: "dave") == nil)  // nothing new to take back
        #expect(!fresh.hears(.watchers("m:x")))
        hub.unwatch(started)
        #expect(fresh.hears(.watchers("m:x")) && fresh.hears(.watchers("m:w")) && !fresh.hears(.notWatching("m:x")))
        // The watches of a request taken back together, newest first, leave a connection that had
        // never watched as it was (a channel list that fails part way), one that had as it was too.
        let (listing, _) = try hub.register(userID: "erin")
        let list = try ["m:l1", "m:l2", "m:l3"].compactMap { try hub.watch($0, connectionID: listing.id, userID: "erin") }
        #expect(list.count == 3 && list[0].firstWatch && !list[1].firstWatch)
        hub.unwatch(list)
        #expect(hub.watchedChannels(connectionID: listing.id, userID: "erin") == nil)
        #expect(listing.hears(.watchers("m:l2")) && !listing.hears(.notWatching("m:l2")))
        try hub.watch("m:kept", connectionID: listing.id, userID: "erin")
        hub.unwatch(try ["m:l1", "m:kept"].compactMap { try hub.watch($0, connectionID: listing.id, userID: "erin") })
        #expect(hub.watchedChannels(connectionID: listing.id, userID: "erin") == ["m:kept"])
        // A connection that never watched stays one when told to stop: it still hears every channel.
        let (plain, _) = try hub.register(userID: "carol")
        #expect(hub.stopWatching("m:x", connectionID: plain.id, userID: "carol"))
        #expect(plain.hears(.watchers("m:x")) && plain.hears(.watchers("m:y")) && !plain.hears(.notWatching("m:x")))
    }
}
