import Foundation
import Synchronization
import Testing
import TicksClient

/// Automatic mark-delivered against a real server: batched, throttled, and
/// only when it tells the sender something.
@Suite("Marking delivered automatically")
struct DeliveryTests {
    static let route = "/channels/delivered"

    /// When each mark-delivered call was answered, sampled from the server's metrics.
    final class CallTimes: Sendable {
        private final class Box: Sendable {
            let instants = Mutex<[ContinuousClock.Instant]>([])
        }
        private let box = Box()
        private let task: Task<Void, Never>

        init(_ server: LiveServer) {
            let box = self.box
            task = Task {
                var seen = 0
                while !Task.isCancelled {
                    let count = server.markDeliveredCalls
                    if count > seen {
                        box.instants.withLock { $0.append(contentsOf: Array(repeating: .now, count: count - seen)) }
                        seen = count
                    }
                    try? await Task.sleep(for: .milliseconds(5))
                }
            }
        }

        var all: [ContinuousClock.Instant] { box.instants.withLock { $0 } }
        deinit { task.cancel() }
    }

    @Test("150 channels: at most 100 a call, at most one call a second, every channel delivered")
    func batchedAndThrottled() async throws {
        try await LiveServer.with { server in
            try await server.upsert("alice", "bob")
            let channels = (1...150).map { "messaging:b\($0)" }
            for cid in channels { try await server.createChannel(cid, members: ["alice", "bob"]) }
            let bob = try await server.connected("bob")
            let calls = CallTimes(server)
            for (index, cid) in channels.enumerated() {
                try await server.send(cid, id: "b-msg\(index + 1)", from: "alice")
            }
            // Every channel ends up delivered to bob.
            _ = try await eventually("all delivered", timeout: .seconds(15)) {
                var all = true
                for (index, _) in channels.enumerated() where all {
                    let receipts = try await bob.receipts(for: "b-msg\(index + 1)")
                    all = receipts.deliveredCount == 1
                }
                return all ? true : nil
            }
            let times = calls.all
            #expect(times.count >= 2, "150 channels need at least two calls")
            #expect(times.count <= 4, "\(times.count) calls")
            // The throttle is 1 s; the times are when a 5 ms poller noticed each call, which a loaded
            // machine can delay, so the bound leaves room (unthrottled calls come milliseconds apart).
            for (earlier, later) in zip(times, times.dropFirst()) {
                #expect(later - earlier >= .milliseconds(600), "calls \(later - earlier) apart")
            }
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
