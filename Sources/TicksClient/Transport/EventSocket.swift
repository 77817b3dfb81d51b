import Foundation
import HummingbirdWSClient
import Logging
import Synchronization
import TicksProtocol

/// One WebSocket session on `GET /connect`: it hands every event to the
/// caller in the order the server sent them, sends Stream's health check
/// every `healthCheckInterval`, and ends when the socket closes or goes quiet.
struct EventSocket: Sendable {
    let url: String
    let healthCheckInterval: Duration
    let time: TimeSource
    /// Receipts to send as frames while the socket is open.
    let requests: SocketRequests
    let logger: Logger

    /// The connect URL for `baseURL`: http becomes ws, https wss.
    init(
        baseURL: URL, apiKey: String, userID: String, token: String, healthCheckInterval: Duration,
        time: TimeSource, requests: SocketRequests, logger: Logger
    ) {
        var base = baseURL.absoluteString
        while base.hasSuffix("/") { base.removeLast() }
        if base.hasPrefix("https://") {
            base = "wss://" + base.dropFirst("https://".count)
        } else if base.hasPrefix("http://") {
            base = "ws://" + base.dropFirst("http://".count)
        }
        let json = (try? JSONEncoder().encode(ConnectParameters(userID: userID))).map { String(decoding: $0, as: UTF8.self) }
        func escaped(_ text: String) -> String {
            text.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? text
        }
        url = "\(base)/connect?api_key=\(escaped(apiKey))&json=\(escaped(json ?? "{}"))&authorization=\(escaped(token))"
        self.healthCheckInterval = healthCheckInterval
        self.time = time
        self.requests = requests
        self.logger = logger
    }

    struct ConnectParameters: Encodable {
        var userID: String
        var serverDeterminesConnectionID = true
        enum CodingKeys: String, CodingKey {
            case userID = "user_id"
            case serverDeterminesConnectionID = "server_determines_connection_id"
        }
    }

    /// When the socket last received a frame, shared by its reader and its health checker.
    private final class LastFrame: Sendable {
        let instant: Mutex<Duration>
        init(_ now: Duration) { instant = Mutex(now) }
    }

    /// The socket went quiet for two health-check periods: treat it as dead.
    struct Stale: Error {}

    private struct ErrorFrame: Decodable {
        var error: APIErrorBody
    }

    /// Runs one session. Throws `TicksClientError.api` when the server refused
    /// the connection (its only frame is the error), `unreachable` when it
    /// could not connect; returns when the socket closed.
    func run(onEvent: @escaping @Sendable (Event) async -> Void) async throws {
        let time = time
        let lastFrame = LastFrame(time.now)
        let interval = healthCheckInterval
        let logger = logger
        let requests = requests
        defer { requests.detach() }
        do {
            try await WebSocketClient.connect(
                url: url, configuration: .init(maxFrameSize: 1 << 22), logger: logger
            ) { inbound, outbound, _ in
                let outgoing = requests.attach()
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for try await message in inbound.messages(maxSize: 1 << 22) {
                            lastFrame.instant.withLock { $0 = time.now }
                            guard case .text(let text) = message else { continue }
                            // An answer to a receipt sent on this socket (it may carry an error: not a refusal).
                            if let ack = SocketReceipt.Ack.ack(in: text) {
                                requests.received(ack)
                                continue
                            }
                            let data = Data(text.utf8)
                            if let refusal = try? JSONDecoder().decode(ErrorFrame.self, from: data) {
                                throw TicksClientError.api(
                                    statusCode: refusal.error.statusCode, code: refusal.error.code,
                                    message: refusal.error.message)
                            }
                            do {
                                await onEvent(try JSONDecoder().decode(Event.self, from: data))
                            } catch {
                                // An event type this client does not know: skip it.
                                logger.debug("skipped a frame", metadata: ["frame": "\(text.prefix(200))"])
                            }
                        }
                    }
                    group.addTask {
                        // Ends only when the session does (`SocketRequests.detach`).
                        for await frame in outgoing { try await outbound.write(.text(frame)) }
                    }
                    group.addTask {
                        while true {
                            try await time.sleep(for: interval)
                            try await outbound.write(.text(#"[{"type":"health.check"}]"#))
                            let quiet = time.now - lastFrame.instant.withLock { $0 }
                            if quiet > interval * 2 { throw Stale() }
                        }
                    }
                    try await group.next()
                    group.cancelAll()
                }
            }
        } catch let error as TicksClientError {
            throw error
        } catch is CancellationError {
            throw CancellationError()
        } catch is Stale {
            logger.info("the connection went quiet; reconnecting")
        } catch {
            throw TicksClientError.unreachable(String(describing: error))
        }
    }
}
