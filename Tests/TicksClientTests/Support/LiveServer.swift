import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization
import Testing
import TicksClient
import TicksProtocol
import TicksServer
import TicksTestSupport

/// A real Ticks server in this process on a loopback port, with its SQLite
/// file in a folder of its own. It can be stopped and started again on the
/// same port with the same data, as a server restart would.
final class LiveServer: WireCalls {
    static let apiKey = "clienttests"
    static let apiSecret = "a-secret-for-the-client-tests-of-ticks-0123456789"

    let folder: URL
    let databasePath: String
    private let running = Mutex<Running?>(nil)
    private let boundPort = Mutex<Int>(0)

    private struct Running: Sendable {
        let group: ServiceGroup
        let task: Task<Void, any Error>
        let services: TicksServices
    }

    private init() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("ticks-client-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        databasePath = folder.appendingPathComponent("ticks.sqlite").path
    }

    /// Starts a server, runs `body`, and stops the server whatever happens.
    static func with<Value: Sendable>(_ body: (LiveServer) async throws -> Value) async throws -> Value {
        let server = try LiveServer()
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

    var port: Int { boundPort.withLock { $0 } }
    var baseURL: URL { URL(string: "http://127.0.0.1:\(port)")! }
    var isRunning: Bool { running.withLock { $0 != nil } }

    /// Starts (again) on the port of the first start, with the same database.
    func start() async throws {
        guard !isRunning else { return }
        var logger = Logger(label: "ticks-live")
        logger.logLevel = .critical
        let (ready, readyContinuation) = AsyncStream.makeStream(of: Int.self)
        var configuration = TicksServerConfiguration(
            host: "127.0.0.1", port: port,
            credentials: try Credentials(apiKey: Self.apiKey, apiSecret: Self.apiSecret),
            pingInterval: .seconds(5))
        // The tests poll the API (receipts, states) far faster than an app would.
        configuration.rateLimits = .off
        configuration.onServerRunning = { port in
            readyContinuation.yield(port)
            readyContinuation.finish()
        }
        // A long deadline: the SDK's tests run all at once on a machine that may be saturated.
        let store = try SQLStore.sqlite(path: databasePath, deadline: StoreDeadline(timeout: .seconds(120)))
        let (application, services) = await buildApplication(configuration: configuration, store: store, logger: logger)
        let group = ServiceGroup(
            configuration: .init(services: [application], gracefulShutdownSignals: [], logger: logger))
        let task = Task { try await group.run() }
        running.withLock { $0 = Running(group: group, task: task, services: services) }
        var iterator = ready.makeAsyncIterator()
        guard let port = await iterator.next() else {
            try await task.value
            throw TicksClientError.unreachable("the test server did not start")
        }
        boundPort.withLock { $0 = port }
    }

    /// Stops gracefully: open sockets are closed, as on SIGTERM.
    func stop() async throws {
        guard let current = running.withLock({ value -> Running? in
            defer { value = nil }
            return value
        }) else { return }
        await current.group.triggerGracefulShutdown()
        try await current.task.value
    }

    var services: TicksServices? { running.withLock { $0?.services } }

    func token(_ userID: String) async throws -> String {
        let credentials = try Credentials(apiKey: Self.apiKey, apiSecret: Self.apiSecret)
        return try await TokenAuthority(credentials: credentials).userToken(for: userID)
    }

    /// A client for `userID` on this server, with test-sized timings.
    func client(
        _ userID: String, outbox: OutboxLocation = .inMemory, configure: (inout ChatClientConfiguration) -> Void = { _ in }
    ) async throws -> ChatClient {
        var configuration = ChatClientConfiguration(baseURL: baseURL, apiKey: Self.apiKey, outbox: outbox)
        // Generous: a loaded machine may take seconds to answer (a test that wants a timeout sets its own).
        configuration.requestTimeout = .seconds(30)
        configuration.sendBackoff = Backoff(initialDelay: .milliseconds(50), maxDelay: .milliseconds(200))
        configuration.reconnectBackoff = Backoff(initialDelay: .milliseconds(50), maxDelay: .milliseconds(300))
        configure(&configuration)
        return try ChatClient(configuration: configuration)
    }

    /// A connected client for `userID`.
    func connected(
        _ userID: String, outbox: OutboxLocation = .inMemory, configure: (inout ChatClientConfiguration) -> Void = { _ in }
    ) async throws -> ChatClient {
        let client = try await client(userID, outbox: outbox, configure: configure)
        try await client.connect(userID: userID, token: try await token(userID))
        #expect(await client.connectionStatus.isConnected)
        return client
    }

    // MARK: The server's side, through its HTTP API (the set-up calls come from `WireCalls`)

    struct Failure: Error, CustomStringConvertible {
        let status: Int
        let body: String
        var description: String { "HTTP \(status): \(body)" }
    }

    /// A call through the server's HTTP API: a server token, or `user`'s user
    /// token; an answer other than 2xx is thrown as a `Failure`.
    @discardableResult
    func wireCall(_ verb: WireVerb, _ path: String, _ body: String?, as user: String?) async throws -> JSON {
        let token: String
        if let user {
            token = try await self.token(user)
        } else {
            let credentials = try Credentials(apiKey: Self.apiKey, apiSecret: Self.apiSecret)
            token = try await TokenAuthority(credentials: credentials).serverToken()
        }
        let separator = path.contains("?") ? "&" : "?"
        var request = HTTPClientRequest(url: "\(baseURL.absoluteString)\(path)\(separator)api_key=\(Self.apiKey)")
        request.method = .init(rawValue: verb.rawValue)
        request.headers.add(name: "Authorization", value: token)
        request.headers.add(name: "stream-auth-type", value: "jwt")
        if let body { request.body = .bytes(ByteBuffer(string: body)) }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
        let bytes = try await response.body.collect(upTo: 16 << 20)
        let text = String(buffer: bytes)
        guard (200..<300).contains(Int(response.status.code)) else {
            throw Failure(status: Int(response.status.code), body: text)
        }
        return try JSON(parsing: text)
    }

    /// How many times a route was answered (with `status`, if given), from the server's own metrics.
    func requestCount(route: String, status: Int? = nil) -> Int {
        guard let text = services?.metrics.registry.emitToString() else { return 0 }
        return text.split(separator: "\n")
            .filter { $0.hasPrefix("ticks_http_requests_total") && $0.contains("route=\"\(route)\"") }
            .filter { line in status.map { line.contains("status=\"\($0)\"") } ?? true }
            .compactMap { $0.split(separator: " ").last.flatMap { Int($0) } }
            .reduce(0, +)
    }

    /// Receipts of `kind` the server took as frames on a socket (refused ones, or answered ones).
    func socketReceipts(_ kind: String, refused: Bool = false) -> Int {
        guard let text = services?.metrics.registry.emitToString() else { return 0 }
        return text.split(separator: "\n")
            .filter { $0.hasPrefix("ticks_socket_receipts_total") && $0.contains("type=\"\(kind)\"") }
            .filter { $0.contains("outcome=\"\(refused ? "refused" : "ok")\"") }
            .compactMap { $0.split(separator: " ").last.flatMap { Int($0) } }
            .reduce(0, +)
    }

    /// Mark delivered calls the server answered, whichever way they came (HTTP or a frame on the socket).
    var markDeliveredCalls: Int { requestCount(route: "/channels/delivered") + socketReceipts("mark_delivered") }
}
