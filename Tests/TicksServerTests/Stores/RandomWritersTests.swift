import Foundation
import HTTPTypes
import Logging
import Synchronization
import Testing
import TicksProtocol
import TicksReceipts

@testable import TicksServer

/// Many clients at once, each doing the conflicting operations at random
/// through the API for a while (issue 40): sends and replies, reads of
/// channels and threads, mark unread, deliveries, deletes, leaving and
/// coming back, plays, truncates, mark all read, privacy changes, recounts.
/// `InterleavingTests` makes each race happen
/// every time; this finds the ones nobody listed (it found a delete racing
/// a mark unread, and a send's deadlocks). Afterwards what was kept
/// must be what a count from the messages gives, and docs/receipt-rules.md's
/// invariants must hold when read back.
@Suite("Concurrent writers: many clients at random")
struct RandomWritersTests {
    static let channels = ["rw0", "rw1", "rw2"]
    static let users = (0..<6).map { "u\($0)" }
    /// How long the clients run: some hundreds of calls on PostgreSQL, over a thousand on SQLite.
    static let running: Duration = .seconds(4)

    /// The ids of the messages sent so far, per channel: what the clients name.
    final class Sent: Sendable {
        private let ids = Mutex<[String: [String]]>(
            Dictionary(uniqueKeysWithValues: RandomWritersTests.channels.map { ($0, ["\($0)-p"]) }))
        func any(in channel: String, using random: inout SQLiteStoreTests.SplitMix) -> String {
            ids.withLock { $0[channel]! }.randomElement(using: &random)!
        }
        func add(_ id: String, in channel: String) { ids.withLock { $0[channel, default: []].append(id) } }
        /// Every call answered, in order: what a failure shows.
        let log = Mutex<[String]>([])
    }

    /// What one client (one user, so its own calls are in order) was told.
    struct Acknowledged {
        /// Per channel, the message its last answered mark read went up to, while nothing has moved it back since.
        var readUpTo: [String: String] = [:]
    }

    @Test(
        "six clients at random for four seconds: nothing to recount, no receipt of a non-member, no cursor behind what was acknowledged",
        arguments: StoreKind.all)
    func randomWriters(kind: StoreKind) async throws {
        let seed = UInt64.random(in: 1...UInt64.max)
        try await TestServer.run(kind) { server in
            try await Self.setUp(server)
            let sent = Sent()
            let until = ContinuousClock.now + Self.running
            let (told, total) = try await withThrowingTaskGroup(of: (String, Acknowledged, Int).self) { group in
                for (index, user) in Self.users.enumerated() {
                    group.addTask {
                        var random = SQLiteStoreTests.SplitMix(state: seed &+ UInt64(index))
                        var told = Acknowledged()
                        var serial = 0
                        while ContinuousClock.now < until {
                            serial += 1
                            try await Self.step(
                                server, user, serial: serial, random: &random, sent: sent, told: &told, seed: seed)
                        }
                        return (user, told, serial)
                    }
                }
                return try await group.reduce(into: ([String: Acknowledged](), 0)) {
                    $0.0[$1.0] = $1.1
                    $0.1 += $1.2
                }
            }
            let store = try #require(server.store as? SQLStore)
            let recount = try await store.recountUnread(of: nil)
            // On a failure, the calls of those whose counts were wrong, in the order they were answered.
            let named = Set(recount.fixes.map(\.userID))
            let calls = sent.log.withLock { $0.filter { named.contains(String($0.split(separator: " ")[0])) } }
            #expect(
                recount.fixedCount == 0,
                "seed \(seed), \(total) calls: \(recount.fixes)\n\(calls.joined(separator: "\n"))")
            // Reported, not asserted (issue 40): how often PostgreSQL broke a circle or a serialisation here.
            let retried = (
                deadlock: store.health.retries(.deadlock), serialization: store.health.retries(.serialization)
            )
            Logger(label: "ticks-test").info(
                """
                random writers on \(kind): \(total) calls in \(Self.running), retried after a deadlock \(retried.deadlock), \
                after a serialisation failure \(retried.serialization)
                """)
            try await Self.expectNoReceiptOfNonMembers(store, seed: seed)
            try await Self.expectCursorsAtLeast(told, store, seed: seed)
        }
    }

    /// Users u0…u5, members of three channels, each with a voice note and a thread's parent.
    static func setUp(_ server: TestServer) async throws {
        try await server.upsert("u0", "u1", "u2", "u3", "u4", "u5")
        for channel in channels {
            try await server.createChannel("messaging:\(channel)", members: users, createdBy: "u0")
            try await server.sendVoiceNote("messaging:\(channel)", id: "\(channel)-v", from: "u0")
            try await server.send("messaging:\(channel)", id: "\(channel)-p", from: "u1")
        }
    }

    /// One call of `user`, chosen at random; any answer but a 5xx is fine (a call of
    /// someone who just left is refused), and what a mark read acknowledged is kept in `told`.
    static func step(
        _ server: TestServer, _ user: String, serial: Int, random: inout SQLiteStoreTests.SplitMix,
        sent: Sent, told: inout Acknowledged, seed: UInt64
    ) async throws {
        let channel = channels.randomElement(using: &random)!
        let path = "/channels/messaging/\(channel)"
        let some = sent.any(in: channel, using: &random)
        let id = "\(channel)-\(user)-\(serial)"
        var method = HTTPRequest.Method.post
        let call: (String, String)
        var acknowledges: String?
        switch Int.random(in: 0..<110, using: &random) {
        case 0..<20:
            call = ("\(path)/message", #"{"message": {"id": "\#(id)", "text": "hi", "user": {"id": "\#(user)"}}}"#)
        case 20..<30:
            call = (
                "\(path)/message",
                #"{"message": {"id": "\#(id)", "text": "re", "parent_id": "\#(channel)-p", "user": {"id": "\#(user)"}}}"#
            )
        case 30..<45:
            call = ("\(path)/read", #"{"user": {"id": "\#(user)"}, "message_id": "\#(some)"}"#)
            acknowledges = some
        case 45..<52: call = ("\(path)/read", #"{"user": {"id": "\#(user)"}, "thread_id": "\#(channel)-p"}"#)
        case 52..<57: call = ("/threads/read", #"{"user_id": "\#(user)"}"#)
        case 57..<65: call = ("\(path)/unread", #"{"user": {"id": "\#(user)"}, "message_id": "\#(some)"}"#)
        case 65..<73:
            call = (
                "/channels/delivered?user_id=\(user)",
                #"{"latest_delivered_messages": [{"cid": "messaging:\#(channel)", "id": "\#(some)"}], "user_id": "\#(user)"}"#
            )
        case 73..<78:
            method = .delete
            call = ("/messages/\(some)", "")
        case 78..<83: call = (path, #"{"remove_members": ["\#(user)"]}"#)
        case 83..<90: call = (path, #"{"add_members": ["\#(user)"]}"#)
        case 90..<97: call = ("/messages/\(channel)-v/played", #"{"user_id": "\#(user)"}"#)
        case 97..<100: call = ("\(path)/truncate", "{}")
        case 100..<103: call = ("/channels/read", #"{"user": {"id": "\#(user)"}}"#)
        case 103..<106:
            let shares = Bool.random(using: &random)
            call = (
                "/users",
                #"{"users": {"\#(user)": {"id": "\#(user)", "privacy_settings": {"read_receipts": {"enabled": \#(shares)}}}}}"#
            )
        default: call = ("/unread/recount", #"{"user_ids": ["\#(user)"]}"#)
        }
        let reply = try await server.call(method, call.0, body: method == .delete ? nil : call.1)
        sent.log.withLock { $0.append("\(user) \(method) \(call.0) \(call.1) → \(reply.status)") }
        #expect(reply.status < 500, "seed \(seed): \(call.0) \(call.1) → \(reply.status) \(reply.body)")
        guard (200..<300).contains(reply.status) else { return }
        if call.0 == "/unread/recount" {
            // Every count is right whenever a change commits: a recount in the middle fixes nothing either.
            #expect(try reply.json()["fixed_count"].int == 0, "seed \(seed): \(reply.body)")
        }
        if call.0.hasSuffix("/message") { sent.add(id, in: channel) }
        // What moves this user's read cursor back: marking unread, leaving (a member back starts afresh).
        if call.0.hasSuffix("/unread") || call.1.contains("remove_members") { told.readUpTo[channel] = nil }
        if let acknowledges { told.readUpTo[channel] = acknowledges }
    }

    /// R6: a member who left has no receipts: no read state, no receipt log, no thread read state, no play.
    static func expectNoReceiptOfNonMembers(_ store: SQLStore, seed: UInt64) async throws {
        for table in ["cursor_move", "thread_read", "message_play"] {
            let strays = try await store.engine.read {
                Step.row(
                    """
                    SELECT COUNT(*) FROM \(raw: table) t WHERE NOT EXISTS
                      (SELECT 1 FROM member m WHERE m.channel_pk = t.channel_pk AND m.user_id = t.user_id)
                    """
                ).map { try $0?.int(0) ?? -1 }
            }
            #expect(strays == 0, "seed \(seed): \(strays) rows of \(table) name a user who is not a member")
        }
    }

    /// A read cursor is never behind what a mark read answered, unless the user moved it back since.
    static func expectCursorsAtLeast(_ told: [String: Acknowledged], _ store: SQLStore, seed: UInt64) async throws {
        for (user, acknowledged) in told {
            for (channel, messageID) in acknowledged.readUpTo {
                guard let (message, record) = try await store.message(id: messageID),
                    let member = try await store.member(user, of: record)
                else { continue }
                #expect(
                    member.cursors.read >= message.seq,
                    "seed \(seed): \(user) in \(channel) was told read up to \(messageID) (\(message.seq)), is at \(member.cursors.read)"
                )
            }
        }
    }
}
