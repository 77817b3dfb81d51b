import Foundation
import Synchronization
import Testing
import TicksProtocol
import TicksReceipts

@testable import TicksServer

/// PostgreSQL's sends in one call (`SendFunction`, docs/storage.md "Round
/// trips per operation"): a message shown in the channel is stored, and its
/// author's read of it made (R4), by one statement between the channel's lock
/// and the commit; what the function leaves to the step-by-step program (a
/// reply, a retry, an author who is no member, counts kept by sends) is sent
/// by it, in the same transaction, with the same outcome. SQLite always
/// takes the steps: there the same cases check the outcomes alone. Every
/// other store suite sends through both roads, one per store.
@Suite("Sends in one call")
struct SendInOneCallTests {
    /// The statements `body` sent PostgreSQL, in order (none on SQLite).
    static func statements(_ body: () async throws -> Void) async throws -> [String] {
        let sent = Mutex<[String]>([])
        try await PostgresSession.$beforeStatement.withValue({ text in sent.withLock { $0.append(text) } }) {
            try await body()
        }
        return sent.withLock { $0 }
    }

    static func calls(_ statements: [String]) -> Int {
        statements.count { $0.hasPrefix("SELECT * FROM \(SendFunction.name)(") }
    }

    /// Whether the program's own statements stored a message.
    static func stepped(_ statements: [String]) -> Bool {
        statements.contains { $0.hasPrefix("INSERT INTO message ") }
    }

    @Test("a message shown in the channel: the channel's lock, one call, the commit; then its members", arguments: StoreKind.all)
    func oneCall(kind: StoreKind) async throws {
        try await kind.withStore { (store: SQLStore) async throws in
            let channel = try await UnreadPositionsTests.channel(store, "one", now: .now())
            try await UnreadPositionsTests.send(store, "m1", by: "b", to: channel)
            let sent = try await Self.statements {
                _ = try await store.sendMessage(NewMessage(id: "m2", userID: "a", text: "m2", custom: [:]), to: channel, now: .now())
            }
            if kind == .postgres {
                #expect(sent.count == 5 && Self.calls(sent) == 1 && !Self.stepped(sent), "\(sent)")
                #expect(sent.first == "BEGIN" && sent[3] == "COMMIT", "\(sent)")
            }
            // R4: a has read m2 and b's m1 before it; b and c have m2 unread, c m1 too (R7).
            let state = try #require(try await store.member("a", of: channel))
            #expect(state.cursors == Cursors(read: 2, delivered: 2))
            #expect(try await UnreadPositionsTests.unread(store, ["a", "b", "c"]) == [0, 1, 2])
            try await InterleavingTests.expectNothingToRecount(store)
        }
    }

    @Test(
        "a channel of more members than recipientsListedUpTo sent in one call lists no one for message.new; one of that many lists them all",
        arguments: StoreKind.all)
    func largeChannelListsNoOne(kind: StoreKind) async throws {
        try await kind.withStore { (store: SQLStore) async throws in
            let limit = SQLStore.recipientsListedUpTo
            let users = (0...limit).map { "u\($0)" }
            _ = try await store.upsertUsers(users.map { User(id: $0) }, now: .now())
            for (name, members) in [("at", Array(users.prefix(limit))), ("over", users)] {
                let (channel, _) = try await store.createChannel(
                    ChannelID(type: "messaging", id: name), createdBy: "u0", memberIDs: members, custom: [:], now: .now())
                var outcome: SendOutcome?
                let sent = try await Self.statements {
                    outcome = try await store.sendMessage(
                        NewMessage(id: "\(name)1", userID: "u1", text: "hi", custom: [:]), to: channel, now: .now())
                }
                let unlisted = kind == .postgres && members.count > limit
                #expect(outcome?.created == true && outcome?.everyMember == unlisted, "\(name)")
                #expect(outcome?.recipients.count == (unlisted ? 0 : members.count), "\(name)")
                if kind == .postgres {
                    // BEGIN, the lock, the call, COMMIT; and the members' list unless unlisted.
                    #expect(sent.count == (unlisted ? 4 : 5) && Self.calls(sent) == 1, "\(name): \(sent)")
                    #expect(sent.contains { $0.contains("string_agg(user_id") } == !unlisted, "\(name): \(sent)")
                }
                // Every other member has it unread, whichever way their recipients were found.
                let counts = try await store.recipientCounts(in: channel.pk, among: nil)
                #expect(counts.count == members.count && counts.allSatisfy { $0.channelUnread == ($0.userID == "u1" ? 0 : 1) })
            }
        }
    }

    @Test("a retry, a reply, a server's send for a user who is no member: the program sends, as on SQLite",
          arguments: StoreKind.all)
    func programCases(kind: StoreKind) async throws {
        try await kind.withStore { (store: SQLStore) async throws in
            let channel = try await UnreadPositionsTests.channel(store, "steps", now: .now())
            _ = try await store.upsertUsers([User(id: "d")], now: .now())
            let first = NewMessage(id: "m1", userID: "a", text: "m1", custom: [:])
            _ = try await store.sendMessage(first, to: channel, now: .now())
            // A retry of m1 (R11): the call finds the id stored, writes nothing, and the program answers it.
            var retried: SendOutcome?
            let retry = try await Self.statements { retried = try await store.sendMessage(first, to: channel, now: .now()) }
            #expect(retried?.created == false && retried?.message.seq == 1 && retried?.recipients == [])
            // A reply in m1's thread: the program alone (the thread's counts).
            let reply = try await Self.statements {
                _ = try await store.sendMessage(
                    NewMessage(id: "r1", userID: "b", text: "r1", custom: [:], parentID: "m1"), to: channel, now: .now())
            }
            // d is no member; a server token may send as d, who gets no read state (m2 is seq 3: r1 took 2).
            var byServer: SendOutcome?
            let server = try await Self.statements {
                byServer = try await store.sendMessage(
                    NewMessage(id: "m2", userID: "d", text: "m2", custom: [:], byServer: true), to: channel, now: .now())
            }
            #expect(byServer?.created == true && byServer?.message.seq == 3 && byServer?.recipients.sorted() == ["a", "b", "c"])
            #expect(try await store.member("d", of: channel) == nil)
            if kind == .postgres {
                #expect(Self.calls(retry) == 1 && !Self.stepped(retry), "\(retry)")
                #expect(Self.calls(reply) == 0 && Self.stepped(reply), "\(reply)")
                #expect(Self.calls(server) == 1 && Self.stepped(server), "\(server)")
            }
            // a: m2 (d's); b: m1, m2; c: m1, m2 (r1 counts in its thread alone).
            #expect(try await UnreadPositionsTests.unread(store, ["a", "b", "c"]) == [1, 2, 2])
            try await InterleavingTests.expectNothingToRecount(store)
        }
    }

    /// PostgreSQL: `SendFunction` called as the store calls it, under the channel's lock; what its
    /// author's read asked R13, one `Reaching` per kind (`MovesFunction` step 4).
    static func reachings(ofSending id: String, by author: String, to channel: ChannelRecord, in store: SQLStore)
        async throws -> [Reaching]
    {
        let new = NewMessage(id: id, userID: author, text: id, custom: [:])
        let afterwords = try await store.engine.write {
            Fetch.channel(pk: channel.pk, lock: true).then { found in
                Step.rows(
                    StoreSQL.send(
                        new, custom: "{}", to: channel.pk, channel.cid, seq: found.channel.lastSeq + 1,
                        at: StoreRules.messageTime(now: .now(), after: found.channel.lastMessageAt).microseconds)
                ).map { rows in try rows.dropFirst().map { try $0.text(37) } }
            }
        }
        return try afterwords.compactMap { text in
            guard case .reaching(let reaching) = try MoveAfterword.decode(text) else { return nil }
            return reaching
        }
    }

    @Test(
        "a send's read that passes only its author's own messages asks R13 nothing; one that passes another's asks, and R13 holds after both",
        arguments: StoreKind.all)
    func ownMessagesAskNothing(kind: StoreKind) async throws {
        try await kind.withStore { (store: SQLStore) async throws in
            let channel = try await UnreadPositionsTests.channel(store, "own", now: .now())
            try await UnreadPositionsTests.send(store, "m1", by: "a", to: channel)
            if kind == .postgres {
                // a's read passes m2 alone, a's: both kinds asked nothing. b's passes a's m1 and m2: asked.
                let own = try await Self.reachings(ofSending: "m2", by: "a", to: channel, in: store)
                #expect(own.map(\.kind) == [.read, .delivered] && own.allSatisfy { !$0.others && $0.lowest.isEmpty })
                #expect(own.allSatisfy { !$0.reached && $0.messages.isEmpty && $0.from == 1 && $0.to == 2 })
                let others = try await Self.reachings(ofSending: "m3", by: "b", to: channel, in: store)
                #expect(others.map(\.kind) == [.read, .delivered] && others.allSatisfy { $0.others && $0.lowest.count == 3 })
            } else {
                try await UnreadPositionsTests.send(store, "m2", by: "a", to: channel)
                try await UnreadPositionsTests.send(store, "m3", by: "b", to: channel)
            }
            // c reads all: a's m2 is read by all (b read it by sending m3), b's m3 is not (a has not read it).
            let reached = try await store.markRead("c", in: channel.cid, upTo: nil, audience: UnreadPositionsTests.everyone, now: .now())
                .reachedAll
            #expect(reached.filter { $0.kind == .read } == [ReachedAll(kind: .read, author: "a", messageID: "m2", seq: 2)])
            // a's next send passes b's m3: it makes m3 read by all, and says so.
            let sent = try await store.sendMessage(NewMessage(id: "m4", userID: "a", text: "m4", custom: [:]), to: channel, now: .now())
            #expect(sent.reachedAll.filter { $0.kind == .read } == [ReachedAll(kind: .read, author: "b", messageID: "m3", seq: 3)])
            try await InterleavingTests.expectNothingToRecount(store)
        }
    }

    @Test("counts kept by sends: the call writes nothing and the program counts every member", arguments: StoreKind.all)
    func keptCounts(kind: StoreKind) async throws {
        try await kind.withStore { (store: SQLStore) async throws in
            let channel = try await UnreadPositionsTests.channel(store, "kept", now: .now())
            try await UnreadPositionsTests.send(store, "m1", by: "a", to: channel)
            _ = try await store.updateAppOptions(.init(unreadCounting: .kept))
            let sent = try await Self.statements { try await UnreadPositionsTests.send(store, "m2", by: "a", to: channel) }
            if kind == .postgres {
                #expect(Self.calls(sent) == 1 && Self.stepped(sent), "\(sent)")
                #expect(sent.contains { $0.hasPrefix("UPDATE member SET unread = unread + CASE") }, "\(sent)")
            }
            let rows = try await UnreadPositionsTests.rows(store, channel)
            #expect(rows.counted == 0 && rows.members["b"] == [2, 0] && rows.members["c"] == [2, 0], "\(rows)")
            try await InterleavingTests.expectNothingToRecount(store)
        }
    }
}
