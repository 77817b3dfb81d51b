import Foundation
import Testing
import TicksClient
import TicksTestSupport

/// Every transition of the status diagram in docs/concepts.md ("Message status"), as the sender's client sees
/// it with real members acting on a real server.
@Suite("Delivery status and receipts as the sender sees them")
struct ReceiptTests {
    let group = ChannelID(type: "messaging", id: "trip")

    func setUpGroup(_ server: LiveServer, privateReads: Set<String> = []) async throws {
        try await server.upsert("alice", "bob", "carol", "dave", privateReads: privateReads)
        try await server.createChannel("messaging:trip", members: ["alice", "bob", "carol"])
    }

    @Test("sent → delivered → read, the read count rising, readers most recent first, receipt events")
    func fullPath() async throws {
        try await LiveServer.with { server in
            try await setUpGroup(server)
            let alice = try await server.connected("alice")
            let receipts = Recorder(alice.receiptEvents())
            let trip = await alice.channel(group)
            try await trip.load()
            let bob = try await server.connected("bob")
            let bobTrip = await bob.channel(group)
            try await bobTrip.load()

            try await trip.send("Tickets booked", id: "t1")
            // Bob's client marks it delivered by itself when it arrives.
            let delivered = try await trip.wait("delivered") { $0.message(withID: "t1")?.deliveryStatus == .delivered }
            let t1 = try #require(delivered.message(withID: "t1"))
            #expect(delivered.deliveredReads(for: t1).map(\.user.id) == ["bob"])
            #expect(delivered.reads(for: t1).isEmpty)
            #expect(t1.deliveredCount == 1 && t1.readCount == 0)

            try await bobTrip.markRead()
            let read = try await trip.wait("read by bob") { $0.message(withID: "t1")?.readCount == 1 }
            #expect(read.message(withID: "t1")?.deliveryStatus == .read)
            try await Task.sleep(for: .milliseconds(5))
            try await server.markRead("messaging:trip", "carol")
            let both = try await trip.wait("read by two") { $0.message(withID: "t1")?.readCount == 2 }
            let message = try #require(both.message(withID: "t1"))
            #expect(both.reads(for: message).map(\.user.id) == ["carol", "bob"])
            #expect(both.deliveredReads(for: message).isEmpty)

            let events = try await eventually("three receipt events") {
                let all = receipts.all.filter { $0.messageId == "t1" }
                return all.count >= 3 ? all : nil
            }
            #expect(events.map(\.receiptType) == [.delivered, .read, .read])
            #expect(events.map(\.user.id) == ["bob", "bob", "carol"])
            #expect(events[0].deliveredAt != nil && events[1].readAt != nil)
            #expect(events.allSatisfy { $0.cid == group })

            // Exact per-message times from the server.
            let exact = try await alice.receipts(for: "t1")
            #expect(exact.readCount == 2 && exact.deliveredCount == 2)
            #expect(exact.readBy.map(\.user.id) == ["carol", "bob"])
            #expect(exact.receipts.allSatisfy { $0.readAt != nil && $0.deliveredAt != nil })
            await alice.disconnect()
            await bob.disconnect()
        }
    }

    @Test("others' messages have no status; own messages do")
    func onlyOwnMessages() async throws {
        try await LiveServer.with { server in
            try await setUpGroup(server)
            try await server.send("messaging:trip", id: "from-bob", from: "bob")
            let alice = try await server.connected("alice")
            let trip = await alice.channel(group)
            try await trip.load()
            let state = try await trip.state
            let message = try #require(state.message(withID: "from-bob"))
            #expect(!message.isSentByCurrentUser)
            #expect(message.deliveryStatus == nil)
            #expect(state.readIndicator(for: message).state == .hidden)
            await alice.disconnect()
        }
    }

    @Test("R6: the only reader removed takes read back to sent; with another delivery, to delivered")
    func removedReader() async throws {
        try await LiveServer.with { server in
            try await setUpGroup(server)
            let alice = try await server.connected("alice") { $0.marksDelivered = false }
            let trip = await alice.channel(group)
            try await trip.load()
            try await trip.send("one", id: "r1")
            try await trip.wait("sent") { $0.message(withID: "r1")?.deliveryStatus == .sent }
            try await server.markRead("messaging:trip", "bob")
            try await trip.wait("read") { $0.message(withID: "r1")?.deliveryStatus == .read }
            try await server.removeMembers("messaging:trip", ["bob"])
            let back = try await trip.wait("back to sent") { $0.message(withID: "r1")?.deliveryStatus == .sent }
            #expect(back.members.map(\.id).sorted() == ["alice", "carol"])
            #expect(back.reads.map(\.user.id).contains("bob") == false)

            try await trip.send("two", id: "r2")
            try await trip.wait("r2 sent") { $0.message(withID: "r2")?.deliveryStatus == .sent }
            try await server.markDelivered("carol", [("messaging:trip", "r2")])
            try await server.addMembers("messaging:trip", ["bob"])
            // R5: bob joins having read everything already there.
            try await trip.wait("read by the new member") { $0.message(withID: "r2")?.deliveryStatus == .read }
            try await server.removeMembers("messaging:trip", ["bob"])
            try await trip.wait("back to delivered") { $0.message(withID: "r2")?.deliveryStatus == .delivered }
            await alice.disconnect()
        }
    }

    @Test("the all-members policy: read only once every other member has read")
    func allMembersPolicy() async throws {
        try await LiveServer.with { server in
            try await setUpGroup(server)
            try await server.send("messaging:trip", id: "p1", from: "alice")
            let alice = try await server.connected("alice") {
                $0.groupPolicy = .allMembers
                $0.marksDelivered = false
            }
            let trip = await alice.channel(group)
            try await trip.load()
            try await server.markRead("messaging:trip", "bob")
            try await trip.wait("bob's read arrived") { $0.message(withID: "p1")?.readCount == 1 }
            #expect(try await trip.status(of: "p1") == .sent)
            try await server.markDelivered("carol", [("messaging:trip", "p1")])
            try await trip.wait("delivered to all") { $0.message(withID: "p1")?.deliveryStatus == .delivered }
            try await server.markRead("messaging:trip", "carol")
            let all = try await trip.wait("read by all") { $0.message(withID: "p1")?.deliveryStatus == .read }
            // The server's facts (R13): the message, its indicator and its receipts say "everyone".
            let p1 = try #require(all.message(withID: "p1"))
            #expect(p1.isReadByAll && p1.isDeliveredToAll)
            #expect(all.readIndicator(for: p1).isReadByEveryone)
            #expect(all.readIndicator(for: p1).accessibilityLabel == "Read by everyone")
            let receipts = try await alice.receipts(for: "p1")
            #expect(receipts.readByAll && receipts.deliveredToAll)
            // A newcomer has read everything already there (R5); the next message waits for them too.
            try await server.addMembers("messaging:trip", ["dave"])
            try await server.send("messaging:trip", id: "p2", from: "alice")
            try await server.markRead("messaging:trip", "bob")
            try await server.markRead("messaging:trip", "carol")
            let waiting = try await trip.wait("p2 read by two of three") { $0.message(withID: "p2")?.readCount == 2 }
            #expect(waiting.message(withID: "p2")?.deliveryStatus == .sent)
            #expect(waiting.message(withID: "p1")?.deliveryStatus == .read)
            try await server.markRead("messaging:trip", "dave")
            try await trip.wait("p2 read by all") { $0.message(withID: "p2")?.isReadByAll == true }
            await alice.disconnect()
        }
    }

    @Test("R8: read events off hides the status; R9: delivery events off never shows delivered")
    func channelTypeFeatures() async throws {
        try await LiveServer.with { server in
            try await server.upsert("alice", "bob")
            try await server.createChannelType("quiet", readEvents: false, deliveryEvents: false)
            try await server.createChannelType("nodelivery", readEvents: true, deliveryEvents: false)
            try await server.createChannel("quiet:q", members: ["alice", "bob"])
            try await server.createChannel("nodelivery:n", members: ["alice", "bob"])
            let alice = try await server.connected("alice")
            let bob = try await server.connected("bob")

            let quiet = await alice.channel(ChannelID(type: "quiet", id: "q"))
            try await quiet.load()
            try await quiet.send("psst", id: "q1")
            try await quiet.wait("stored") { $0.message(withID: "q1")?.localState == nil }
            try await server.markRead("quiet:q", "bob")
            try await Task.sleep(for: .milliseconds(200))
            let quietState = try await quiet.state
            let q1 = try #require(quietState.message(withID: "q1"))
            #expect(q1.deliveryStatus == nil)
            #expect(quietState.readIndicator(for: q1) == .hidden)

            let plain = await alice.channel(ChannelID(type: "nodelivery", id: "n"))
            try await plain.load()
            let bobPlain = await bob.channel(ChannelID(type: "nodelivery", id: "n"))
            try await bobPlain.load()
            try await plain.send("hi", id: "n1")
            try await plain.wait("sent") { $0.message(withID: "n1")?.deliveryStatus == .sent }
            try await server.markDelivered("bob", [("nodelivery:n", "n1")])
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await plain.status(of: "n1") == .sent)
            // Bob's client never even asks: the type has no delivery events.
            #expect(server.requestCount(route: "/channels/delivered") == 1)
            try await bobPlain.markRead()
            try await plain.wait("read") { $0.message(withID: "n1")?.deliveryStatus == .read }
            await alice.disconnect()
            await bob.disconnect()
        }
    }

    @Test("R10: a member with private read receipts never shows as a reader")
    func privateReads() async throws {
        try await LiveServer.with { server in
            try await setUpGroup(server, privateReads: ["bob"])
            let alice = try await server.connected("alice") { $0.marksDelivered = false }
            let trip = await alice.channel(group)
            try await trip.load()
            try await trip.send("hi", id: "v1")
            try await trip.wait("sent") { $0.message(withID: "v1")?.deliveryStatus == .sent }
            try await server.markRead("messaging:trip", "bob")
            try await server.markRead("messaging:trip", "carol")
            let state = try await trip.wait("carol's read") { $0.message(withID: "v1")?.readCount == 1 }
            let message = try #require(state.message(withID: "v1"))
            #expect(state.reads(for: message).map(\.user.id) == ["carol"])
            // bob writes: sending moves his own read cursor (R4), which stays private too.
            try await server.send("messaging:trip", id: "v2", from: "bob")
            let after = try await trip.wait("bob's message") { $0.message(withID: "v2") != nil }
            let first = try #require(after.message(withID: "v1"))
            #expect(after.reads(for: first).map(\.user.id) == ["carol"])
            #expect(first.readCount == 1)
            await alice.disconnect()
        }
    }

    @Test("mark read up to a message, and mark unread, move the own unread count")
    func ownReadMarks() async throws {
        try await LiveServer.with { server in
            try await setUpGroup(server)
            for index in 1...4 { try await server.send("messaging:trip", id: "u\(index)", from: "bob") }
            let alice = try await server.connected("alice")
            let trip = await alice.channel(group)
            try await trip.load()
            #expect(try await trip.state.unreadCount == 4)
            try await trip.markAsRead(messageId: "u2")
            try await trip.wait("two unread") { $0.unreadCount == 2 }
            try await trip.markRead()
            try await trip.wait("none unread") { $0.unreadCount == 0 }
            try await trip.markUnread(from: "u3")
            let state = try await trip.wait("two unread again") { $0.unreadCount == 2 }
            #expect(state.reads.first { $0.user.id == "alice" }?.lastReadMessageId == "u2")
            await alice.disconnect()
        }
    }

    @Test("receipts made while disconnected are applied after reconnecting, as receipt events")
    func missedReceipts() async throws {
        try await LiveServer.with { server in
            try await setUpGroup(server)
            let alice = try await server.connected("alice") { $0.marksDelivered = false }
            let receipts = Recorder(alice.receiptEvents())
            let trip = await alice.channel(group)
            try await trip.load()
            try await trip.send("while you were away", id: "w1")
            try await trip.wait("sent") { $0.message(withID: "w1")?.deliveryStatus == .sent }

            await alice.disconnect()
            try await server.markDelivered("carol", [("messaging:trip", "w1")])
            try await server.markRead("messaging:trip", "bob")
            #expect(try await trip.status(of: "w1") == .sent)

            try await alice.connect(userID: "alice", token: try await server.token("alice"))
            try await trip.wait("caught up") { $0.message(withID: "w1")?.readCount == 1 }
            let caught = try await eventually("two missed receipts") {
                receipts.all.count >= 2 ? receipts.all : nil
            }
            #expect(Set(caught.map { "\($0.user.id):\($0.receiptType)" }) == ["bob:read", "carol:delivered"])
            #expect(caught.allSatisfy { $0.messageId == "w1" })
            await alice.disconnect()
        }
    }

    @Test("the server restarts: the client reconnects by itself and live receipts flow again")
    func reconnectsAfterServerRestart() async throws {
        try await LiveServer.with { server in
            try await setUpGroup(server)
            let alice = try await server.connected("alice") { $0.marksDelivered = false }
            let statuses = Recorder(await alice.connectionStatuses())
            let trip = await alice.channel(group)
            try await trip.load()
            try await trip.send("before", id: "b1")
            try await trip.wait("sent") { $0.message(withID: "b1")?.deliveryStatus == .sent }

            try await server.stop()
            _ = try await eventually("noticed the drop") { await alice.connectionStatus.isConnected ? nil : true }
            try await server.start()
            _ = try await eventually("reconnected") { await alice.connectionStatus.isConnected ? true : nil }
            let connects = statuses.all.filter(\.isConnected).count
            #expect(connects >= 2)

            try await server.markRead("messaging:trip", "bob")
            try await trip.wait("live read after the restart") { $0.message(withID: "b1")?.deliveryStatus == .read }
            await alice.disconnect()
        }
    }

    @Test("a refused token is an error from connect, and the client stops trying")
    func refusedToken() async throws {
        try await LiveServer.with { server in
            try await server.upsert("alice")
            let alice = try await server.client("alice")
            let bobsToken = try await server.token("bob")
            await #expect(throws: TicksClientError.self) {
                try await alice.connect(userID: "alice", token: bobsToken)
            }
            guard case .refused(let error) = await alice.connectionStatus else {
                Issue.record("expected refused, got \(await alice.connectionStatus)")
                return
            }
            #expect(error == .api(statusCode: 403, code: 17, message: "the token is for 'bob', not 'alice'"))
        }
    }
}
