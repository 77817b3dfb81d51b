import Foundation
import HummingbirdWSClient
import Logging
import NIOHTTP1
import Synchronization

/// Ticks over its Stream-compatible HTTP API and WebSocket.
struct TicksTarget: ReceiptTarget {
    let name = "ticks"
    let supportsDelivered = true
    let baseURL: String
    /// Where WebSockets connect: `baseURL`, or another node sharing its database.
    let socketBaseURL: String
    let apiKey: String
    let tokens: Tokens
    let http: HTTP
    /// Readers send their receipts as frames on sockets of their own (Ticks'
    /// extension) instead of HTTP requests; filled by `listen`.
    var readerSockets: ReaderSockets?

    func url(_ path: String) -> String { "\(baseURL)\(path)?api_key=\(apiKey)" }

    func headers(_ token: String) -> [(String, String)] {
        [("Authorization", token), ("stream-auth-type", "jwt")]
    }

    /// Calls made as the server (set-up only).
    func admin(_ method: HTTPMethod, _ path: String, _ json: String?) async throws {
        try await http.call(method, url(path), headers: headers(try await tokens.server()), json: json)
    }

    /// A messaging channel of `members` (upserted already), the first its creator: made with the first
    /// hundred (Stream's limit for a new channel), then a hundred at a time.
    func createChannel(_ id: String, members: [String]) async throws {
        let path = "/channels/messaging/\(id)"
        let first = members.prefix(100).map { "\"\($0)\"" }.joined(separator: ",")
        try await admin(
            .POST, "\(path)/query", "{\"data\": {\"members\": [\(first)], \"created_by\": {\"id\": \"\(members[0])\"}}}")
        for batch in stride(from: 100, to: members.count, by: 100).map({ members[$0..<min($0 + 100, members.count)] }) {
            let list = batch.map { "\"\($0)\"" }.joined(separator: ",")
            try await admin(.POST, path, "{\"add_members\": [\(list)]}")
        }
    }

    func upsertUsers(_ ids: [String]) async throws {
        for batch in stride(from: 0, to: ids.count, by: 100).map({ Array(ids[$0..<min($0 + 100, ids.count)]) }) {
            let users = batch.map { "\"\($0)\": {\"id\": \"\($0)\"}" }.joined(separator: ",")
            try await admin(.POST, "/users", "{\"users\": {\(users)}}")
        }
    }

    func prepare(channels count: Int, readersPerChannel: Int, messagesPerChannel: Int, prefix: String) async throws
        -> [BenchChannel]
    {
        let plans = (0..<count).map { index in
            (index: index, sender: "\(prefix)s\(index)", readers: (0..<readersPerChannel).map { "\(prefix)r\(index)x\($0)" })
        }
        try await upsertUsers(plans.flatMap { [$0.sender] + $0.readers })
        let made = Locked<[BenchChannel]>([])
        try await forEachConcurrently(plans, width: 16) { plan in
            let id = "\(prefix)c\(plan.index)"
            let members = ([plan.sender] + plan.readers).map { "\"\($0)\"" }.joined(separator: ",")
            try await admin(
                .POST, "/channels/messaging/\(id)/query",
                "{\"data\": {\"members\": [\(members)], \"created_by\": {\"id\": \"\(plan.sender)\"}}}")
            let senderToken = try await tokens.user(plan.sender)
            var messageIDs: [String] = []
            // One after the other, so the log's order is the ids' order.
            for number in 0..<messagesPerChannel {
                let messageID = "\(id)m\(number)"
                try await http.call(
                    .POST, url("/channels/messaging/\(id)/message"), headers: headers(senderToken),
                    json: "{\"message\": {\"id\": \"\(messageID)\", \"text\": \"message \(number)\"}}")
                messageIDs.append(messageID)
            }
            var readerTokens: [String] = []
            for reader in plan.readers { readerTokens.append(try await tokens.user(reader)) }
            let channel = BenchChannel(
                index: plan.index, id: id, sender: plan.sender, senderToken: senderToken, readers: plan.readers,
                readerTokens: readerTokens, messageIDs: messageIDs)
            made.withLock { $0.append(channel) }
        }
        return made.withLock { $0 }.sorted { $0.index < $1.index }
    }

    func listen(to channels: [BenchChannel], seen: @escaping @Sendable (String) -> Void) async throws -> Listening {
        let connected = Counter()
        let tasks = channels.map { channel in
            Task {
                await runSocket(user: channel.sender, token: channel.senderToken, connected: connected) { frame in
                    guard let key = Self.receiptSeen(in: frame) else { return }
                    seen(key)
                }
            }
        }
        var readerTasks: [Task<Void, Never>] = []
        if let readerSockets {
            readerSockets.reset()
            for channel in channels {
                for (index, reader) in channel.readers.enumerated() {
                    let socket = readerSockets.socket(channel: channel.index, reader: index)
                    readerTasks.append(
                        Task {
                            // On the node the requests go to: its receipts are the ones measured.
                            await runSocket(
                                user: reader, token: channel.readerTokens[index], connected: connected,
                                on: baseURL, outgoing: socket.frames
                            ) { frame in socket.received(frame) }
                        })
                }
            }
        }
        let expected = channels.count + (readerSockets == nil ? 0 : channels.reduce(0) { $0 + $1.readers.count })
        let deadline = ContinuousClock.now + .seconds(60)
        while connected.value < expected {
            guard ContinuousClock.now < deadline else {
                throw HTTP.Failure(status: 0, body: "only \(connected.value) of \(expected) sockets connected")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        return Listening(tasks: tasks + readerTasks)
    }

    /// Keeps one WebSocket open as `user`, handing every text frame to
    /// `onFrame` and writing what `outgoing` yields.
    func runSocket(
        user: String, token: String, connected: Counter, on node: String? = nil, outgoing: AsyncStream<String>? = nil,
        onFrame: @escaping @Sendable (String) -> Void
    ) async {
        let json = "{\"user_id\":\"\(user)\"}".addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        let wsBase = (node ?? socketBaseURL).replacingOccurrences(of: "http://", with: "ws://")
        var logger = Logger(label: "bench-socket")
        logger.logLevel = .critical
        _ = try? await WebSocketClient.connect(
            url: "\(wsBase)/connect?api_key=\(apiKey)&json=\(json)&authorization=\(token)",
            configuration: .init(maxFrameSize: 1 << 20), logger: logger
        ) { inbound, outbound, _ in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    var first = true
                    for try await message in inbound.messages(maxSize: 1 << 20) {
                        guard case .text(let text) = message else { continue }
                        if first {
                            first = false
                            connected.increment()
                        }
                        onFrame(text)
                    }
                }
                if let outgoing {
                    group.addTask { for await frame in outgoing { try await outbound.write(.text(frame)) } }
                }
                try await group.next()
                group.cancelAll()
            }
        }
    }

    private struct Frame: Decodable {
        struct User: Decodable { let id: String }
        let type: String
        let user: User?
        let last_read_message_id: String?
        let last_delivered_message_id: String?
    }

    static func receiptSeen(in text: String) -> String? {
        guard text.contains("message.read") || text.contains("message.delivered"),
            let frame = try? JSONDecoder().decode(Frame.self, from: Data(text.utf8)), let user = frame.user?.id
        else { return nil }
        switch frame.type {
        case "message.read": return frame.last_read_message_id.map { receiptKey(reader: user, message: $0, kind: .read) }
        case "message.delivered":
            return frame.last_delivered_message_id.map { receiptKey(reader: user, message: $0, kind: .delivered) }
        default: return nil
        }
    }

    func mark(_ kind: ReceiptKind, channel: BenchChannel, reader: Int, message: Int) async throws {
        let token = channel.readerTokens[reader]
        let messageID = channel.messageIDs[message]
        if let readerSockets {
            let cid = "messaging:\(channel.id)"
            let frame =
                switch kind {
                case .read: #"{"type":"mark_read","request_id":"\#(message)","cid":"\#(cid)","message_id":"\#(messageID)"}"#
                case .delivered:
                    #"{"type":"mark_delivered","request_id":"\#(message)","latest_delivered_messages":[{"cid":"\#(cid)","id":"\#(messageID)"}]}"#
                }
            try await readerSockets.socket(channel: channel.index, reader: reader).send(frame)
            return
        }
        switch kind {
        case .read:
            try await http.call(
                .POST, url("/channels/messaging/\(channel.id)/read"), headers: headers(token),
                json: "{\"message_id\": \"\(messageID)\"}")
        case .delivered:
            try await http.call(
                .POST, url("/channels/delivered"), headers: headers(token),
                json: "{\"latest_delivered_messages\": [{\"cid\": \"messaging:\(channel.id)\", \"id\": \"\(messageID)\"}]}")
        }
    }

    /// From the server's `/metrics`, as every run measures it.
    func serverCPUSeconds() async throws -> Double? {
        try await metric("ticks_process_cpu_seconds_total")
    }

    /// A number from the server's `/metrics` (0 when absent), summed over label sets.
    func metric(_ name: String) async throws -> Double {
        let text = String(buffer: try await http.call(.GET, "\(baseURL)/metrics"))
        return text.split(separator: "\n")
            .filter { $0.hasPrefix(name + " ") || $0.hasPrefix(name + "{") }
            .compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }
            .reduce(0, +)
    }
}

/// A thread-safe count.
final class Counter: Sendable {
    private let count = Atomic<Int>(0)
    func increment(by amount: Int = 1) { count.add(amount, ordering: .relaxed) }
    var value: Int { count.load(ordering: .relaxed) }
}

/// The readers' sockets of a run that sends receipts as frames: one each,
/// used by that reader alone, one receipt at a time.
final class ReaderSockets: Sendable {
    private let sockets = Mutex<[String: ReaderSocket]>([:])

    /// New sockets for a new run (a socket's frames are read by one connection only).
    func reset() {
        sockets.withLock { $0 = [:] }
    }

    func socket(channel: Int, reader: Int) -> ReaderSocket {
        sockets.withLock { all in
            let key = "\(channel)/\(reader)"
            if let socket = all[key] { return socket }
            let socket = ReaderSocket()
            all[key] = socket
            return socket
        }
    }
}

/// One reader's socket: frames to send, and the acks that answer them in order.
final class ReaderSocket: Sendable {
    let frames: AsyncStream<String>
    private let writer: AsyncStream<String>.Continuation
    private let waiting = Mutex<[CheckedContinuation<Void, any Error>]>([])
    /// What a frame that answers one sent holds: an ack, or (`Pings`) the server's health.check.
    private let answer: String

    init(answeredBy answer: String = #""type":"ack""#) {
        (frames, writer) = AsyncStream.makeStream(of: String.self)
        self.answer = answer
    }

    /// Sends a receipt and waits for its ack; throws when the server refused it.
    func send(_ frame: String) async throws {
        try await withCheckedThrowingContinuation { continuation in
            waiting.withLock { $0.append(continuation) }
            writer.yield(frame)
        }
    }

    /// A frame the server sent this reader: answers answer the oldest frame waiting.
    func received(_ text: String) {
        guard text.contains(answer) else { return }
        let next = waiting.withLock { $0.isEmpty ? nil : $0.removeFirst() }
        if text.contains(#""error":"#) {
            next?.resume(throwing: HTTP.Failure(status: 0, body: String(text.prefix(300))))
        } else {
            next?.resume()
        }
    }
}
