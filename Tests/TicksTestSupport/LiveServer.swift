import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization
import TicksProtocol
import TicksServer

/// A real Ticks server in this process on a loopback port: the application
/// `ticks serve` builds, run in a service group over a store the caller
/// opens. The server's tests (`TestServer` on `.live`) and the SDK's run this
/// one helper. It can be stopped and started again on the same port, with the
/// store opened again in the same folder, as a server restart would.
public final class LiveServer: WireCalls {
    /// A folder of the server's own for its files (the SDK's tests keep their
    /// SQLite file here), removed when `with` ends without an error.
    public let folder: URL
    private let configuration: TicksServerConfiguration
    private let logger: Logger
    private let openStore: @Sendable (URL) throws -> SQLStore
    private let running = Mutex<Running?>(nil)
    private let boundPort = Mutex<Int>(0)

    private struct Running: Sendable {
        let group: ServiceGroup
        let task: Task<Void, any Error>
        let services: TicksServices
    }

    /// A server with `configuration` (its host and port are the loopback's and
    /// a free one) over the store `openStore` opens, given the server's folder,
    /// at each start.
    public init(
        configuration: TicksServerConfiguration, logger: Logger,
        openStore: @escaping @Sendable (_ folder: URL) throws -> SQLStore
    ) throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("ticks-live-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        var configuration = configuration
        configuration.host = "127.0.0.1"
        configuration.port = 0
        self.configuration = configuration
        self.logger = logger
        self.openStore = openStore
    }

    /// Starts a server, runs `body`, and stops the server whatever happens.
    public static func with<Value: Sendable>(
        configuration: TicksServerConfiguration, logger: Logger,
        openStore: @escaping @Sendable (_ folder: URL) throws -> SQLStore,
        _ body: (LiveServer) async throws -> Value
    ) async throws -> Value {
        let server = try LiveServer(configuration: configuration, logger: logger, openStore: openStore)
        try await server.start()
        do {
            let value = try await body(server)
            try await server.stop()
            try? FileManager.default.removeItem(at: server.folder)
            return value
        } catch {
            try? await server.stop()
            throw error
        }
    }

    public var port: Int { boundPort.withLock { $0 } }
    public var baseURL: URL {
        var components = URLComponents()
        components.scheme = "http"
        components.host = "127.0.0.1"
        components.port = port
        guard let url = components.url else { preconditionFailure("a loopback URL with a port is a URL") }
        return url
    }
    public var isRunning: Bool { running.withLock { $0 != nil } }
    /// The running server's parts (its store, hub, metrics); nil while stopped.
    public var services: TicksServices? { running.withLock { $0?.services } }

    /// Starts (again) on the port of the first start, over the store opened again.
    public func start() async throws {
        guard !isRunning else { return }
        let (ready, readyContinuation) = AsyncStream.makeStream(of: Int.self)
        var configuration = configuration
        configuration.port = port
        configuration.onServerRunning = { port in
            readyContinuation.yield(port)
            readyContinuation.finish()
        }
        let store = try openStore(folder)
        let (application, services) = await buildApplication(configuration: configuration, store: store, logger: logger)
        let group = ServiceGroup(
            configuration: .init(services: [application], gracefulShutdownSignals: [], logger: logger))
        let task = Task { try await group.run() }
        running.withLock { $0 = Running(group: group, task: task, services: services) }
        var iterator = ready.makeAsyncIterator()
        guard let port = await iterator.next() else {
            running.withLock { $0 = nil }
            try await task.value
            throw LiveServerError.didNotStart
        }
        boundPort.withLock { $0 = port }
    }

    /// Stops gracefully: open sockets are closed, as on SIGTERM.
    public func stop() async throws {
        guard
            let current = running.withLock({ value -> Running? in
                defer { value = nil }
                return value
            })
        else { return }
        await current.group.triggerGracefulShutdown()
        try await current.task.value
    }

    // MARK: Tokens and calls through the server's HTTP API

    public var apiKey: String { configuration.credentials.apiKey }

    public func token(_ userID: String) async throws -> String {
        try await TokenAuthority(credentials: configuration.credentials).userToken(for: userID)
    }

    public func serverToken() async throws -> String {
        try await TokenAuthority(credentials: configuration.credentials).serverToken()
    }

    /// An answer other than 2xx, thrown by `wireCall`.
    public struct Failure: Error, CustomStringConvertible {
        public let status: Int
        public let body: String
        public var description: String { "HTTP \(status): \(body)" }
    }

    /// A call through the server's HTTP API: a server token, or `user`'s user
    /// token; an answer other than 2xx is thrown as a `Failure`.
    @discardableResult
    public func wireCall(_ verb: WireVerb, _ path: String, _ body: String?, as user: String?) async throws -> JSON {
        let token: String
        if let user { token = try await self.token(user) } else { token = try await serverToken() }
        let separator = path.contains("?") ? "&" : "?"
        var request = HTTPClientRequest(url: "\(baseURL.absoluteString)\(path)\(separator)api_key=\(apiKey)")
        request.method = .init(rawValue: verb.rawValue)
        request.headers.add(name: "Authorization", value: token)
        request.headers.add(name: "stream-auth-type", value: "jwt")
        if let body { request.body = .bytes(ByteBuffer(string: body)) }
        let response = try await HTTPClient.shared.execute(request, timeout: .init(Patience.wait))
        let bytes = try await response.body.collect(upTo: 16 << 20)
        let text = String(buffer: bytes)
        guard (200..<300).contains(Int(response.status.code)) else {
            throw Failure(status: Int(response.status.code), body: text)
        }
        return try JSON(parsing: text)
    }

    // MARK: The server's own counts, from its metrics

    /// How many times a route was answered (with `status`, if given).
    public func requestCount(route: String, status: Int? = nil) -> Int {
        metric("ticks_http_requests_total", ["route=\"\(route)\""] + (status.map { ["status=\"\($0)\""] } ?? []))
    }

    /// Receipts of `kind` the server took as frames on a socket (refused ones, or answered ones).
    public func socketReceipts(_ kind: String, refused: Bool = false) -> Int {
        metric("ticks_socket_receipts_total", ["type=\"\(kind)\"", "outcome=\"\(refused ? "refused" : "ok")\""])
    }

    /// Mark delivered calls the server answered, whichever way they came (HTTP or a frame on the socket).
    public var markDeliveredCalls: Int {
        requestCount(route: "/channels/delivered") + socketReceipts("mark_delivered")
    }

    /// The sum of `name`'s series whose labels include all of `labels`.
    private func metric(_ name: String, _ labels: [String]) -> Int {
        guard let text = services?.metrics.registry.emitToString() else { return 0 }
        return text.split(separator: "\n")
            .filter { line in line.hasPrefix(name) && labels.allSatisfy { line.contains($0) } }
            .compactMap { $0.split(separator: " ").last.flatMap { Int($0) } }
            .reduce(0, +)
    }
}

public enum LiveServerError: Error, CustomStringConvertible {
    case didNotStart

    public var description: String { "the test server did not start" }
}
