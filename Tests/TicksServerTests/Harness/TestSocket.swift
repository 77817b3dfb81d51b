import Foundation
import HTTPTypes
import HummingbirdWSClient
import Logging
import NIOCore
import Synchronization
import Testing
import TicksTestSupport

/// A real WebSocket client of a live test server that keeps every frame it
/// receives, so a test can wait for the next event of a type.
final class TestSocket: Sendable {
    let userID: String
    /// What the connection's task and the test share.
    private final class Shared: Sendable {
        let frames = Mutex<[JSON]>([])
        let writer = Mutex<WebSocketOutboundWriter?>(nil)
        /// How the connection ended, once it has: a waiting `next` then fails at once.
        let ended = Mutex<String?>(nil)
    }
    private let shared = Shared()
    private let task: Task<WebSocketCloseFrame?, any Error>

    /// Connects as `userID` (token in the `authorization` query parameter,
    /// as Stream's JS client does, or in the header) and waits for the first
    /// `health.check`.
    static func connect(
        _ server: TestServer, as userID: String, token: String? = nil, tokenInHeader: Bool = false,
        json: String? = nil, reading: Bool = true, waitForHello: Bool = true
    ) async throws -> TestSocket {
        let socket = try await TestSocket(
            server, userID: userID, token: token, tokenInHeader: tokenInHeader, json: json, reading: reading)
        if reading && waitForHello {
            let hello = try await socket.next("health.check")
            socket.helloFrame.withLock { $0 = hello }
        }
        return socket
    }

    /// The first frame the server sent.
    var hello: JSON? { helloFrame.withLock { $0 } }
    private let helloFrame = Mutex<JSON?>(nil)

    private init(
        _ server: TestServer, userID: String, token: String?, tokenInHeader: Bool, json: String?, reading: Bool
    ) async throws {
        self.userID = userID
        let port = try #require(server.livePort)
        let token = try await server.optionalToken(token == nil ? userID : nil) ?? token!
        let payload = json ?? #"{"user_id": "\#(userID)", "server_determines_connection_id": true}"#
        var query = "api_key=\(TestKeys.apiKey)&json=\(payload.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)"
        var headers = HTTPFields()
        if tokenInHeader { headers[.authorization] = token } else { query += "&authorization=\(token)" }
        let configuration = WebSocketClientConfiguration(maxFrameSize: 1 << 20, additionalHeaders: headers)
        var logger = Logger(label: "test-socket")
        logger.logLevel = .critical
        let shared = self.shared
        task = Task {
            let close: WebSocketCloseFrame?
            // NIO's bootstrap gives a loopback connect a fixed 10 s, which a machine saturated beside the
            // tests can exceed (a loaded run: "Connect timeout (10 s)"). A connect that timed out sent
            // nothing, so it is tried again, up to the suite's patience.
            let deadline = ContinuousClock.now + Patience.wait
            do {
                while true {
                    do {
                        close = try await Self.run(
                            url: "ws://127.0.0.1:\(port)/connect?\(query)", configuration, logger, shared, reading)
                        break
                    } catch ChannelError.connectTimeout where ContinuousClock.now < deadline {
                        continue
                    }
                }
            } catch {
                shared.ended.withLock { $0 = "failed: \(error)" }
                throw error
            }
            shared.ended.withLock { $0 = "closed: \(close.map { "\($0.closeCode) \($0.reason ?? "")" } ?? "no close frame")" }
            return close
        }
    }

    private static func run(
        url: String, _ configuration: WebSocketClientConfiguration, _ logger: Logger, _ shared: Shared, _ reading: Bool
    ) async throws -> WebSocketCloseFrame? {
        try await WebSocketClient.connect(
            url: .init(url), configuration: configuration, logger: logger
        ) { inbound, outbound, _ in
            shared.writer.withLock { $0 = outbound }
            guard reading else {
                // A client that never reads: the server must give up on it, not wait.
                try await Task.sleep(for: .seconds(60))
                return
            }
            for try await message in inbound.messages(maxSize: 1 << 20) {
                guard case .text(let text) = message, let json = try? JSON(parsing: text) else { continue }
                shared.frames.withLock { $0.append(json) }
            }
        }
    }

    /// Takes the oldest frame of `type`, waiting up to `timeout` for one:
    /// a deadline for a frame that never comes, long enough that a loaded
    /// machine's slow one is not taken for it. A connection that has ended
    /// (closed, or failed to connect) fails at once, with how it ended.
    func next(_ type: String, timeout: Duration = Patience.wait, sourceLocation: SourceLocation = #_sourceLocation)
        async throws -> JSON
    {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            // Read before the frames: a frame that came before the end is still taken.
            let ended = shared.ended.withLock { $0 }
            let found = shared.frames.withLock { frames -> JSON? in
                guard let index = frames.firstIndex(where: { $0["type"].string == type }) else { return nil }
                return frames.remove(at: index)
            }
            if let found { return found }
            if let ended {
                Issue.record("\(userID)'s connection ended before a \(type) came: \(ended)", sourceLocation: sourceLocation)
                throw CancellationError()
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        Issue.record("\(userID) received no \(type) within \(timeout)", sourceLocation: sourceLocation)
        throw CancellationError()
    }

    /// The frames received so far and not taken.
    var pending: [JSON] { shared.frames.withLock { $0 } }

    /// Sends a text frame.
    func send(_ text: String) async throws {
        let outbound = try #require(shared.writer.withLock { $0 })
        try await outbound.write(.text(text))
    }

    /// How the server closed the connection, waiting up to `timeout` for it;
    /// throws `TestSocketTimeout` when it has not.
    func closeFrame(timeout: Duration = Patience.wait) async throws -> WebSocketCloseFrame? {
        let task = self.task
        return try await withThrowingTaskGroup(of: WebSocketCloseFrame?.self) { group in
            group.addTask { try await task.value }
            group.addTask {
                try await Task.sleep(for: timeout)
                task.cancel()
                throw TestSocketTimeout()
            }
            defer { group.cancelAll() }
            return try await group.next()!
        }
    }

    /// Connects with credentials the server must refuse: the code of the
    /// close frame it sent (nil when it sent none; 1000 is a normal closure),
    /// and the frames before.
    ///
    /// Over a plain TCP connection (`RawConnection`), read up to the close
    /// frame (or the connection's end): swift-websocket's client can lose the frames that arrive in
    /// the same read as the 101 response, and under load (stress-ng beside
    /// the suite) it lost them four times in a row, so the test failed on
    /// the client, not on the server.
    static func refusal(
        _ server: TestServer, as userID: String, token: String, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> (close: Int?, frames: [JSON]) {
        let connection = try RawConnection(port: try #require(server.livePort))
        defer { connection.close() }
        try #require(connection.send(RawConnection.connectRequest(userID: userID, token: token)))
        // Until the close frame (the server then waits for the client's close), or the connection's end.
        let received = await connection.readBytes(until: { Self.refusalFrames(in: $0)?.close != nil }, within: Patience.wait)
        guard let (close, frames) = Self.refusalFrames(in: received) else {
            Issue.record(
                "\(userID): no upgrade: \(String(decoding: received.prefix(200), as: UTF8.self))",
                sourceLocation: sourceLocation)
            throw TestSocketTimeout()
        }
        if close == nil { Issue.record("\(userID): the server did not send a close frame", sourceLocation: sourceLocation) }
        return (close, try frames.map { try JSON(parsing: String(decoding: $0, as: UTF8.self)) })
    }

    /// The text frames and the close frame's code in the bytes of a connection
    /// upgraded by a 101 answer; nil when they do not start with one.
    static func refusalFrames(in received: [UInt8]) -> (close: Int?, texts: [ArraySlice<UInt8>])? {
        guard let headEnd = received.firstRange(of: Array("\r\n\r\n".utf8)),
            String(decoding: received[..<headEnd.lowerBound], as: UTF8.self).hasPrefix("HTTP/1.1 101")
        else { return nil }
        var texts: [ArraySlice<UInt8>] = []
        var rest = received[headEnd.upperBound...]
        while let (opcode, payload) = serverFrame(&rest) {
            switch opcode {
            case 0x1: texts.append(payload)
            case 0x8:
                let code = payload.count >= 2 ? Int(payload[payload.startIndex]) << 8 | Int(payload[payload.startIndex + 1]) : 1005
                return (code, texts)
            default: continue
            }
        }
        return (nil, texts)
    }

    /// The first whole frame of `bytes` as a server sends it (unmasked, RFC 6455
    /// section 5.2), taken off the front; nil when no whole frame is there.
    static func serverFrame(_ bytes: inout ArraySlice<UInt8>) -> (opcode: UInt8, payload: ArraySlice<UInt8>)? {
        guard bytes.count >= 2 else { return nil }
        let start = bytes.startIndex
        let opcode = bytes[start] & 0x0F
        var length = Int(bytes[start + 1] & 0x7F)
        var offset = 2
        if length >= 126 {
            let extra = length == 126 ? 2 : 8
            guard bytes.count >= 2 + extra else { return nil }
            length = bytes[(start + 2)..<(start + 2 + extra)].reduce(0) { $0 << 8 | Int($1) }
            offset += extra
        }
        guard length >= 0, bytes.count - offset >= length else { return nil }
        let payload = bytes[(start + offset)..<(start + offset + length)]
        bytes = bytes[(start + offset + length)...]
        return (opcode, payload)
    }

    func close() {
        task.cancel()
    }

    deinit { task.cancel() }
}

struct TestSocketTimeout: Error {}
