import ArgumentParser
import Foundation
import Synchronization

/// Scenario 2: one channel of M connected members; one message; everyone reads it.
struct Group: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "One channel of M members on WebSocket; one message; all mark it read. Time to a full read count.")

    @OptionGroup var server: ServerOptions
    @Option(help: "Members, the sender included.") var members = 100
    @Option(help: "Mark-read requests in flight at once.") var concurrency = 128
    @Option(help: "HTTP connections to the server.") var connections = 64

    struct Result: Codable {
        var scenario = "group"
        var params: [String: Int]
        /// From the first mark read to the sender having seen every member's read.
        var time_to_read_count_ms: Double
        /// From the first mark read to the sender's `message.read_by_all` for the message (R13); -1 when
        /// none came (a server without it).
        var time_to_read_by_all_ms: Double
        /// The server's CPU (user and system, from its `/metrics`) from the send to the
        /// last frame, per mark read; nil when it does not report it.
        var server_cpu_us_per_mark: Double?
        var achieved_rate: Double
        var latency_ms: LatencySummary
        var errors: Int
        var connect_rate: Double
        var frames_sent: Int
        var bytes_sent: Int
        var frames_per_member: Double
    }

    func run() async throws {
        guard members >= 2 else { throw ValidationError("--members must be at least 2") }
        try await server.withTicks(connections: connections) { ticks in
            let result = try await measure(ticks)
            try report(
                [
                    "group of \(members): full read count at the sender after \(result.time_to_read_count_ms) ms,"
                        + " message.read_by_all after \(result.time_to_read_by_all_ms) ms",
                    "  server CPU per mark: \(result.server_cpu_us_per_mark.map { "\($0) µs" } ?? "not reported")",
                    "  marks: \(result.achieved_rate)/s, errors \(result.errors); each mark → sender: \(result.latency_ms.text)",
                    "  server sent \(result.frames_sent) frames, \(result.bytes_sent) bytes"
                        + " (\(result.frames_per_member) frames per member); connected at \(result.connect_rate)/s",
                ], json: result, asJSON: server.json)
        }
    }

    func measure(_ ticks: TicksTarget) async throws -> Result {
        let prefix = runPrefix()
        let ids = (0..<members).map { "\(prefix)m\($0)" }
        try await ticks.upsertUsers(ids)
        let channel = "\(prefix)g"
        try await ticks.createChannel(channel, members: ids)
        var signed: [String] = []
        for id in ids { signed.append(try await ticks.tokens.user(id)) }
        let tokens = signed

        let messageID = "\(prefix)gm"
        let readers = Locked(Set<String>())
        let allRead = Locked<ContinuousClock.Instant?>(nil)
        let readByAll = Locked<ContinuousClock.Instant?>(nil)
        let book = LatencyBook()
        let expected = members - 1
        let connected = Counter()
        let connectStart = ContinuousClock.now
        let sockets = (0..<members).map { index in
            Task {
                await ticks.runSocket(user: ids[index], token: tokens[index], connected: connected) { frame in
                    guard index == 0 else { return }
                    if frame.contains("message.read_by_all"), frame.contains("\"\(messageID)\"") {
                        readByAll.withLock { $0 = $0 ?? .now }
                    }
                    guard let key = TicksTarget.receiptSeen(in: frame), key.hasSuffix("|\(messageID)|read") else { return }
                    book.seen(key)
                    let reader = String(key.prefix { $0 != "|" })
                    let count = readers.withLock { set in
                        set.insert(reader)
                        return set.count
                    }
                    if count == expected { allRead.withLock { $0 = $0 ?? .now } }
                }
            }
        }
        while connected.value < members {
            guard ContinuousClock.now - connectStart < .seconds(300) else {
                throw HTTP.Failure(status: 0, body: "only \(connected.value) of \(members) members connected")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        let connectRate = Double(members) / (ContinuousClock.now - connectStart).seconds

        let cpu0 = try await ticks.serverCPUSeconds()
        let frames0 = try await ticks.metric("ticks_ws_frames_sent_total")
        let bytes0 = try await ticks.metric("ticks_ws_bytes_sent_total")
        try await ticks.http.call(
            .POST, ticks.url("/channels/messaging/\(channel)/message"), headers: ticks.headers(tokens[0]),
            json: "{\"message\": {\"id\": \"\(messageID)\", \"text\": \"everyone read this\"}}")
        let errors = Counter()
        let start = ContinuousClock.now
        try await forEachConcurrently(Array(1..<members), width: concurrency) { index in
            let key = receiptKey(reader: ids[index], message: messageID, kind: .read)
            book.start(key)
            do {
                try await ticks.http.call(
                    .POST, ticks.url("/channels/messaging/\(channel)/read"), headers: ticks.headers(tokens[index]),
                    json: "{\"message_id\": \"\(messageID)\"}")
            } catch {
                book.cancel(key)
                errors.increment()
            }
        }
        let marksDone = ContinuousClock.now
        let deadline = ContinuousClock.now + .seconds(120)
        while allRead.withLock({ $0 }) == nil, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        let done = allRead.withLock { $0 }
        // The read by all comes with the last move, beside its message.read: wait a little for it.
        let lastDeadline = ContinuousClock.now + .seconds(5)
        while done != nil, readByAll.withLock({ $0 }) == nil, ContinuousClock.now < lastDeadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        let cpu1 = try await ticks.serverCPUSeconds()
        try await Task.sleep(for: .seconds(1))
        let frames = Int(try await ticks.metric("ticks_ws_frames_sent_total") - frames0)
        let bytes = Int(try await ticks.metric("ticks_ws_bytes_sent_total") - bytes0)
        for socket in sockets { socket.cancel() }
        for socket in sockets { await socket.value }
        return Result(
            params: ["members": members, "concurrency": concurrency],
            time_to_read_count_ms: done.map { ((($0 - start).seconds) * 1000).rounded() } ?? -1,
            time_to_read_by_all_ms: readByAll.withLock { $0 }.map { ((($0 - start).seconds) * 1000).rounded() } ?? -1,
            server_cpu_us_per_mark: microsecondsEach(
                cpu0.flatMap { before in cpu1.map { $0 - before } }, over: expected),
            achieved_rate: (Double(expected) / (marksDone - start).seconds).rounded(),
            latency_ms: book.summary, errors: errors.value, connect_rate: connectRate.rounded(), frames_sent: frames,
            bytes_sent: bytes, frames_per_member: (Double(frames) / Double(members) * 100).rounded() / 100)
    }
}

/// Scenario 3: idle authenticated WebSockets and what they cost the server.
struct Connections: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "K idle authenticated WebSocket connections: server memory per connection and connect rate.")

    @OptionGroup var server: ServerOptions
    @Option(help: "Connections to open.") var count = 1000
    @Option(help: "Connection attempts in flight at once.") var concurrency = 100

    struct Result: Codable {
        var scenario = "connections"
        var params: [String: Int]
        var connect_rate: Double
        var server_rss_before_bytes: Int
        var server_rss_after_bytes: Int
        var server_bytes_per_connection: Int
        var generator_rss_bytes: Int
        var errors: Int
    }

    func run() async throws {
        let ticks = try await server.ticks(connections: 16)
        let prefix = runPrefix()
        let ids = (0..<count).map { "\(prefix)u\($0)" }
        try await ticks.upsertUsers(ids)
        var signed: [String] = []
        for id in ids { signed.append(try await ticks.tokens.user(id)) }
        let tokens = signed
        try await Task.sleep(for: .seconds(1))
        let before = Int(try await ticks.metric("ticks_process_resident_memory_bytes"))
        let connected = Counter()
        let start = ContinuousClock.now
        let gate = AsyncSemaphore(concurrency)
        var sockets: [Task<Void, Never>] = []
        for index in 0..<count {
            await gate.wait()
            let target = connected.value + 1
            sockets.append(
                Task {
                    await ticks.runSocket(user: ids[index], token: tokens[index], connected: connected) { _ in }
                })
            // Release the slot once this one is up (or after a while, if it never comes).
            Task {
                let limit = ContinuousClock.now + .seconds(30)
                while connected.value < target, ContinuousClock.now < limit {
                    try? await Task.sleep(for: .milliseconds(2))
                }
                gate.signal()
            }
        }
        let deadline = ContinuousClock.now + .seconds(300)
        while connected.value < count, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        let elapsed = (ContinuousClock.now - start).seconds
        try await Task.sleep(for: .seconds(3))
        let after = Int(try await ticks.metric("ticks_process_resident_memory_bytes"))
        let own = Self.residentBytes()
        let result = Result(
            params: ["count": count, "concurrency": concurrency],
            connect_rate: (Double(connected.value) / elapsed).rounded(), server_rss_before_bytes: before,
            server_rss_after_bytes: after, server_bytes_per_connection: (after - before) / max(connected.value, 1),
            generator_rss_bytes: own, errors: count - connected.value)
        for socket in sockets { socket.cancel() }
        for socket in sockets { await socket.value }
        await ticks.http.shutdown()
        try report(
            [
                "\(connected.value) of \(count) connections at \(result.connect_rate)/s",
                "  server memory \(before / 1_048_576) → \(after / 1_048_576) MiB:"
                    + " \(result.server_bytes_per_connection / 1024) KiB per connection"
                    + " (the generator itself: \(own / 1_048_576) MiB)",
            ], json: result, asJSON: server.json)
    }

    static func residentBytes() -> Int {
        guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8),
            let pages = statm.split(separator: " ").dropFirst().first.flatMap({ Int($0) })
        else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}

/// A counting semaphore for async code.
final class AsyncSemaphore: Sendable {
    private struct State {
        var available: Int
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let state: Mutex<State>

    init(_ count: Int) { state = Mutex(State(available: count)) }

    func wait() async {
        await withCheckedContinuation { continuation in
            let resume = state.withLock { state -> Bool in
                if state.available > 0 {
                    state.available -= 1
                    return true
                }
                state.waiters.append(continuation)
                return false
            }
            if resume { continuation.resume() }
        }
    }

    func signal() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiters.isEmpty {
                state.available += 1
                return nil
            }
            return state.waiters.removeFirst()
        }
        waiter?.resume()
    }
}

/// Scenario 4: what messages and cursor moves cost on disk.
struct Storage: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Bytes on disk per message and per cursor move (the store's own size, before and after).")

    @OptionGroup var server: ServerOptions
    @Option(help: "Messages to write (and then mark read one by one).") var messages = 10000
    @Option(help: "Channels of two to spread them over.") var channels = 100

    struct Result: Codable {
        var scenario = "storage"
        var params: [String: Int]
        var bytes_per_message: Double
        var bytes_per_cursor_move: Double
        var cursor_moves: Int
        var store_bytes_after: Int
    }

    func run() async throws {
        let ticks = try await server.ticks(connections: 32)
        let prefix = runPrefix()
        let perChannel = max(messages / channels, 1)
        let plans = (0..<channels).map { (sender: "\(prefix)s\($0)", reader: "\(prefix)r\($0)", id: "\(prefix)c\($0)") }
        try await ticks.upsertUsers(plans.flatMap { [$0.sender, $0.reader] })
        for plan in plans {
            try await ticks.admin(
                .POST, "/channels/messaging/\(plan.id)/query", "{\"data\": {\"members\": [\"\(plan.sender)\", \"\(plan.reader)\"]}}")
        }
        let size0 = try await ticks.metric("ticks_store_size_bytes")
        try await forEachConcurrently(plans, width: 16) { plan in
            let token = try await ticks.tokens.user(plan.sender)
            for number in 0..<perChannel {
                try await ticks.http.call(
                    .POST, ticks.url("/channels/messaging/\(plan.id)/message"), headers: ticks.headers(token),
                    json: "{\"message\": {\"id\": \"\(plan.id)m\(number)\", \"text\": \"message number \(number)\"}}")
            }
        }
        let size1 = try await ticks.metric("ticks_store_size_bytes")
        let moves0 = try await ticks.metric("ticks_cursor_moves_total")
        try await forEachConcurrently(plans, width: 16) { plan in
            let token = try await ticks.tokens.user(plan.reader)
            for number in 0..<perChannel {
                try await ticks.http.call(
                    .POST, ticks.url("/channels/messaging/\(plan.id)/read"), headers: ticks.headers(token),
                    json: "{\"message_id\": \"\(plan.id)m\(number)\"}")
            }
        }
        let size2 = try await ticks.metric("ticks_store_size_bytes")
        let moves = Int(try await ticks.metric("ticks_cursor_moves_total") - moves0)
        await ticks.http.shutdown()
        let written = perChannel * channels
        let result = Result(
            params: ["messages": written, "channels": channels],
            bytes_per_message: ((size1 - size0) / Double(written) * 10).rounded() / 10,
            bytes_per_cursor_move: ((size2 - size1) / Double(max(moves, 1)) * 10).rounded() / 10, cursor_moves: moves,
            store_bytes_after: Int(size2))
        try report(
            [
                "\(written) messages: \(result.bytes_per_message) bytes each on disk",
                "\(moves) cursor moves: \(result.bytes_per_cursor_move) bytes each on disk",
            ], json: result, asJSON: server.json)
    }
}
