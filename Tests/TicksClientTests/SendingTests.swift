import Foundation
import GRDB
import Synchronization
import Testing
import TicksTestSupport
@testable import TicksClient

/// The outbox and the send path against a real server: pending → sent,
/// offline, retry budget, resend, restarts, lost answers (docs/concepts.md "Message status"; R11, R12 in docs/receipt-rules.md).
@Suite("Sending through the outbox")
struct SendingTests {
    let cid = ChannelID(type: "messaging", id: "room")

    func setUp(_ server: LiveServer) async throws {
        try await server.upsert("alice", "bob")
        try await server.createChannel("messaging:room", members: ["alice", "bob"])
    }

    @Test("a message is pending at once, then sent, and the server has it once")
    func sendAndAcknowledge() async throws {
        try await LiveServer.with { server in
            try await setUp(server)
            let alice = try await server.connected("alice")
            let room = await alice.channel(cid)
            try await room.load()
            let updates = Recorder(await room.updates())
            let message = try await room.send("Who is in?", id: "m1")
            #expect(message.localState == .pending)
            #expect(message.deliveryStatus == .pending)
            #expect(message.isSentByCurrentUser)
            // The recorder reads the updates on a task of its own: wait for
            // it to have seen `sent`, not only for the state to be sent.
            let seen = try await eventually("m1 sent, as an update") {
                let statuses = updates.all.compactMap { $0.message(withID: "m1")?.deliveryStatus }
                return statuses.last == .sent ? statuses : nil
            }
            #expect(seen.first == .pending)
            #expect(try await server.messageIDs("messaging:room") == ["m1"])
            #expect(try await room.state.message(withID: "m1")?.localState == nil)
            await alice.disconnect()
        }
    }

    @Test("written while the server is down: pending, then sent when it is back, once")
    func offlineThenOnline() async throws {
        try await LiveServer.with { server in
            try await setUp(server)
            try await server.stop()
            let alice = try await server.client("alice") { $0.sendAttempts = 1000 }
            try await alice.connect(userID: "alice", token: try await server.token("alice"))
            #expect(await !alice.connectionStatus.isConnected)
            let room = await alice.channel(cid)
            try await room.send("typed offline", id: "off1")
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await room.status(of: "off1") == .pending)

            try await server.start()
            try await room.wait("off1 sent") { $0.message(withID: "off1")?.deliveryStatus == .sent }
            _ = try await eventually("reconnected") { await alice.connectionStatus.isConnected ? true : nil }
            #expect(try await server.messageIDs("messaging:room") == ["off1"])
            try await room.wait("loaded after reconnecting") { $0.isLoaded }
            await alice.disconnect()
        }
    }

    @Test("the retry budget runs out: failed; it stays failed until resent, then it is sent once")
    func retryExhaustionThenResend() async throws {
        try await LiveServer.with { server in
            try await setUp(server)
            try await server.stop()
            let alice = try await server.client("alice") { $0.sendAttempts = 3 }
            try await alice.connect(userID: "alice", token: try await server.token("alice"))
            let room = await alice.channel(cid)
            try await room.send("doomed", id: "f1")
            let failed = try await room.wait("f1 failed") { $0.message(withID: "f1")?.deliveryStatus == .failed }
            guard case .failed(let reason)? = failed.message(withID: "f1")?.localState else {
                Issue.record("f1 should be failed")
                return
            }
            #expect(reason.contains("reached"))

            try await server.start()
            _ = try await eventually("reconnected") { await alice.connectionStatus.isConnected ? true : nil }
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await room.status(of: "f1") == .failed)
            #expect(try await server.messageIDs("messaging:room").isEmpty)

            try await alice.resend(messageId: "f1")
            try await room.wait("f1 sent after resend") { $0.message(withID: "f1")?.deliveryStatus == .sent }
            #expect(try await server.messageIDs("messaging:room") == ["f1"])
            await #expect(throws: TicksClientError.unknownMessage("nope")) { try await alice.resend(messageId: "nope") }
            await alice.disconnect()
        }
    }

    @Test("with resendsFailedOnReconnect, failed messages go out when the connection is back")
    func failedGoOutOnReconnect() async throws {
        try await LiveServer.with { server in
            try await setUp(server)
            try await server.stop()
            let alice = try await server.client("alice") {
                $0.sendAttempts = 2
                $0.resendsFailedOnReconnect = true
            }
            try await alice.connect(userID: "alice", token: try await server.token("alice"))
            let room = await alice.channel(cid)
            try await room.send("later", id: "later1")
            try await room.wait("later1 failed") { $0.message(withID: "later1")?.deliveryStatus == .failed }
            try await server.start()
            try await room.wait("later1 sent") { $0.message(withID: "later1")?.deliveryStatus == .sent }
            #expect(try await server.messageIDs("messaging:room") == ["later1"])
            await alice.disconnect()
        }
    }

    @Test("R12 on the device: the outbox's connection syncs each commit (synchronous = FULL)")
    func outboxSyncsEachCommit() throws {
        // A DatabasePool would turn WAL on after prepareDatabase and set its
        // writer to NORMAL (commits not fsync'd), as it did on the server.
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ticks-outbox-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let database = try LocalDatabase(.file(folder.appendingPathComponent("outbox.sqlite")))
        let synchronous = try database.writer.write { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") }
        #expect(synchronous == 2, "2 is FULL")
    }

    @Test("a restart with messages in the outbox: the next run sends them, once")
    func restartWithPendingOutbox() async throws {
        try await LiveServer.with { server in
            try await setUp(server)
            let outbox = OutboxLocation.file(server.folder.appendingPathComponent("alice-outbox.sqlite"))
            try await server.stop()

            let first = try await server.client("alice", outbox: outbox) { $0.sendAttempts = 1000 }
            try await first.connect(userID: "alice", token: try await server.token("alice"))
            let room = await first.channel(cid)
            try await room.send("one", id: "p1")
            try await room.send("two", id: "p2")
            // The process goes away with both still pending.
            await first.disconnect()

            try await server.start()
            let second = try await server.connected("alice", outbox: outbox)
            let again = await second.channel(cid)
            try await again.wait("both sent") { state in
                ["p1", "p2"].allSatisfy { state.message(withID: $0)?.deliveryStatus == .sent }
            }
            #expect(try await server.messageIDs("messaging:room") == ["p1", "p2"])
            await second.disconnect()

            // Nothing is left in the outbox for a third run.
            let third = try await server.connected("alice", outbox: outbox)
            let room3 = await third.channel(cid)
            try await room3.load()
            #expect(try await room3.state.messages.allSatisfy { $0.localState == nil })
            await third.disconnect()
        }
    }

    @Test("an answer lost on the way back: the retry gets the stored message, never a second one")
    func lostAnswerIsNotDuplicated() async throws {
        try await LiveServer.with { server in
            try await setUp(server)
            let alice = try await server.connected("alice") {
                $0.requestTimeout = .milliseconds(300)
                $0.sendAttempts = 50
            }
            // (No load: with this short timeout it could itself time out on a busy machine.)
            let room = await alice.channel(cid)
            // Another process holds SQLite's write lock: the server's insert waits,
            // the client gives up on the answer and tries again.
            let lock = try WriteLock(path: server.databasePath)
            _ = try await eventually("the lock is held") { lock.isHeld ? true : nil }
            try await room.send("once", id: "lost1")
            try await Task.sleep(for: .milliseconds(1000))
            lock.release()
            try await room.wait("lost1 sent") { $0.message(withID: "lost1")?.deliveryStatus == .sent }
            // One attempt created it (201), later ones found it stored (200, R11);
            // the client took one answer, so the others were lost.
            let route = "/channels/{type}/{id}/message"
            _ = try await eventually("the server answered several attempts") {
                server.requestCount(route: route) >= 2 ? true : nil
            }
            // The attempt that stored it is counted once its handler returns, which on a busy machine
            // may come after a later attempt found the message and was answered 200 (a failure seen
            // twice in full runs beside the PostgreSQL suite: 0 counted at this line).
            _ = try await eventually("the attempt that stored it was answered") {
                server.requestCount(route: route, status: 201) >= 1 ? true : nil
            }
            #expect(server.requestCount(route: route, status: 201) == 1)
            #expect(try await server.messageIDs("messaging:room") == ["lost1"])
            #expect(try await room.state.messages.map(\.id) == ["lost1"])
            await alice.disconnect()
        }
    }
}

/// Holds SQLite's write lock on a database file from another connection, on a
/// thread of its own, until released: what a slow disk or a long transaction
/// of another process looks like to the server.
final class WriteLock: Sendable {
    private let released = DispatchSemaphore(value: 0)
    private let held = Atomic<Bool>(false)

    init(path: String) throws {
        let queue = try DatabaseQueue(path: path)
        Thread.detachNewThread { [self] in
            try? queue.inTransaction(.immediate) { _ in
                held.store(true, ordering: .releasing)
                released.wait()
                return .rollback
            }
        }
    }

    var isHeld: Bool { held.load(ordering: .acquiring) }

    func release() { released.signal() }
}
