import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Testing
import TicksProtocol
import TicksTestSupport

@testable import TicksServer

/// Which store a test runs against: the same test body runs on each.
enum StoreKind: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case memory
    case disk
    case postgres

    var testDescription: String { rawValue }

    /// The stores of this run: with `TICKS_TEST_POSTGRES_URL` set, PostgreSQL
    /// (each test in a schema of its own); otherwise SQLite, in memory and on disk.
    static var all: [StoreKind] { PostgresTestDatabase.url == nil ? [.memory, .disk] : [.postgres] }
    /// What a test that does not ask for a store gets.
    static var standard: StoreKind { all[0] }

    /// How long a test's store call may take: far above the production default (5 s),
    /// since every test starts at once on a machine that may be saturated beside them;
    /// the deadline's own behaviour is tested on a test's clock (`StoreDeadlineTests`)
    /// and against the real engines (tests/python/test_database_faults.py).
    static let deadline = StoreDeadline(timeout: Patience.wait)

    /// Runs `body` with a new, empty store of this kind, removed afterwards.
    func withStore<Value: Sendable>(
        _ body: (SQLStore) async throws -> Value
    ) async throws -> Value {
        switch self {
        case .memory:
            return try await body(try SQLStore.memory(deadline: Self.deadline))
        case .disk:
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
                "ticks-test-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: folder) }
            return try await body(
                try SQLStore.sqlite(path: folder.appendingPathComponent("ticks.sqlite").path, deadline: Self.deadline))
        case .postgres:
            return try await PostgresTestDatabase.withStore { store, _ in try await body(store) }
        }
    }
}

enum TestKeys {
    static let apiKey = "testkey"
    static let apiSecret = "a-test-secret-that-is-long-enough-for-hs256"
}

/// How a test reaches the server: through its router in this process (no
/// socket), or on a loopback port (`LiveServer`, needed for WebSockets and
/// for anything about connections).
enum ServerSetup: Sendable {
    case router
    case live
}

/// A running test server and a client for it. The usual set-up of a test
/// (users, channels, messages, receipts) comes from `WireCalls`, shared with
/// the SDK's tests.
struct TestServer: Sendable {
    private let road: Road
    let services: TicksServices
    let serverToken: String

    private enum Road: Sendable {
        case router(any TestClientProtocol)
        case live(LiveServer)
    }

    /// For `.live`, the server's port: each call opens a connection of its
    /// own with a read timeout that allows a machine saturated beside the
    /// tests. HummingbirdTesting's client gives up after a fixed 20 s
    /// without a byte, and keeps one connection, which the server's idle
    /// timeout may close while a test waits on its clock.
    var livePort: Int? {
        guard case .live(let server) = road else { return nil }
        return server.port
    }

    /// How long a live call may wait for its answer: the bar is a busy machine, not an idle one.
    static let patience: Duration = Patience.wait

    var store: any TicksStore { services.store }

    /// Builds the same application `ticks serve` runs and drives it; `.live`
    /// runs it as `LiveServer`, on a loopback port.
    static func run<Value: Sendable>(
        _ kind: StoreKind = .standard, _ setup: ServerSetup = .router, limits: ServerLimits = .patient,
        rateLimits: RateLimits = RateLimits(), largeChannelMembers: Int = 100, demo: Bool = false,
        webhooks: WebhookSettings = WebhookSettings(), time: TimeSource = .system,
        receiptLogRetention: ReceiptLogRetention = ReceiptLogRetention(), browserOrigins: BrowserOrigins = .any,
        _ body: @Sendable (TestServer) async throws -> Value
    ) async throws -> Value {
        var logger = Logger(label: "ticks-test")
        logger.logLevel = .warning
        var configuration = TicksServerConfiguration(
            host: "127.0.0.1", port: 0,
            credentials: try Credentials(apiKey: TestKeys.apiKey, apiSecret: TestKeys.apiSecret))
        configuration.limits = limits
        configuration.rateLimits = rateLimits
        configuration.largeChannelMembers = largeChannelMembers
        configuration.demo = demo
        configuration.webhooks = webhooks
        configuration.time = time
        configuration.receiptLogRetention = receiptLogRetention
        configuration.browserOrigins = browserOrigins
        return try await kind.withStore { store in
            switch setup {
            case .router:
                let (application, services) = await buildApplication(
                    configuration: configuration, store: store, logger: logger)
                let serverToken = try await services.authority.serverToken()
                return try await application.test(.router) { client in
                    try await body(TestServer(road: .router(client), services: services, serverToken: serverToken))
                }
            case .live:
                return try await live(configuration: configuration, store: store, logger: logger, body)
            }
        }
    }

    /// A live server of `configuration` on `store`, for a test that sets what `run` does not
    /// (an event bus of its own).
    static func live<Value: Sendable>(
        configuration: TicksServerConfiguration, store: SQLStore, logger: Logger,
        _ body: @Sendable (TestServer) async throws -> Value
    ) async throws -> Value {
        try await LiveServer.with(configuration: configuration, logger: logger, openStore: { _ in store }) { server in
            let services = try #require(server.services)
            let serverToken = try await server.serverToken()
            return try await body(TestServer(road: .live(server), services: services, serverToken: serverToken))
        }
    }

    func optionalToken(_ userID: String?) async throws -> String? {
        guard let userID else { return nil }
        return try await token(userID)
    }

    func token(_ userID: String) async throws -> String {
        try await services.authority.userToken(for: userID)
    }

    /// A call to the API: `token` nil means the server token; the answer's JSON body.
    @discardableResult
    func call(
        _ method: HTTPRequest.Method, _ path: String, body: String? = nil, token: String? = nil,
        apiKey: String? = TestKeys.apiKey, headers extra: HTTPFields = [:]
    ) async throws -> Reply {
        var headers = extra
        headers[.authorization] = token ?? serverToken
        let authType = HTTPField.Name("stream-auth-type")!
        if headers[authType] == nil { headers[authType] = "jwt" }
        headers[.contentType] = "application/json"
        var uri = path
        if let apiKey { uri += (path.contains("?") ? "&" : "?") + "api_key=\(apiKey)" }
        return try await execute(uri: uri, method: method, headers: headers, body: body.map { ByteBuffer(string: $0) })
    }

    /// A request as given, without a token or an api key; on `.live`, on a connection of its own.
    func execute(uri: String, method: HTTPRequest.Method, headers: HTTPFields = [:], body: ByteBuffer? = nil)
        async throws -> Reply
    {
        switch road {
        case .router(let client):
            let response = try await client.execute(uri: uri, method: method, headers: headers, body: body)
            return Reply(
                status: Int(response.status.code), body: String(buffer: response.body), headers: response.headers)
        case .live(let server):
            let request = TestClient.Request(uri, method: method, authority: "localhost", headers: headers, body: body)
            let response = try await Self.untilConnected {
                try await TestClient.withClient(
                    host: "127.0.0.1", port: server.port, configuration: .init(timeout: Self.patience)
                ) { try await $0.execute(request) }
            }
            return Reply(
                status: Int(response.status.code), body: response.body.map { String(buffer: $0) } ?? "",
                headers: response.headers)
        }
    }

    /// Runs `call` again while its connect times out, up to `patience`:
    /// HummingbirdTesting's client gives a loopback connect a fixed 5 s,
    /// which a machine saturated beside the tests can exceed. A connect that
    /// timed out sent nothing, so trying again cannot repeat a request.
    private static func untilConnected<Value>(_ call: () async throws -> Value) async throws -> Value {
        let deadline = ContinuousClock.now + patience
        while true {
            do {
                return try await call()
            } catch ChannelError.connectTimeout where ContinuousClock.now < deadline {
                continue
            }
        }
    }

    /// Calls that must succeed.
    @discardableResult
    func ok(_ method: HTTPRequest.Method, _ path: String, _ body: String? = nil, token: String? = nil) async throws
        -> JSON
    {
        let reply = try await call(method, path, body: body, token: token)
        try #require((200..<300).contains(reply.status), "\(method) \(path) → \(reply.status) \(reply.body)")
        return try reply.json()
    }
}

/// The set-up calls shared with the SDK's tests (`upsert`, `createChannel`,
/// `send`, `markRead`, `readState`, …) go through `ok`: a call that fails is
/// the test's issue, and on `.live` each waits for its answer up to `patience`.
extension TestServer: WireCalls {
    @discardableResult
    func wireCall(_ verb: WireVerb, _ path: String, _ body: String?, as user: String?) async throws -> JSON {
        try await ok(HTTPRequest.Method(verb.rawValue)!, path, body, token: try await optionalToken(user))
    }
}

struct Reply: Sendable {
    let status: Int
    let body: String
    var headers: HTTPFields = [:]

    func json() throws -> JSON { try JSON(parsing: body) }

    /// Asserts a Stream-format error with this status and code.
    func expectError(_ status: Int, code: Int, sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(self.status == status, "\(body)", sourceLocation: sourceLocation)
        let json = try json()
        #expect(json["code"].int == code, "\(body)", sourceLocation: sourceLocation)
        #expect(json["StatusCode"].int == status, sourceLocation: sourceLocation)
        #expect(json["message"].string?.isEmpty == false, sourceLocation: sourceLocation)
        #expect(json["duration"].string?.hasSuffix("ms") == true, sourceLocation: sourceLocation)
        #expect(json["more_info"].string != nil, sourceLocation: sourceLocation)
        guard case .array(let details)? = json["details"].value else {
            Issue.record("no details array: \(body)", sourceLocation: sourceLocation)
            return
        }
        #expect(details.allSatisfy { JSON($0).int != nil }, sourceLocation: sourceLocation)
    }
}

extension ServerLimits {
    /// The server's limits with its header and idle timeouts at `TestServer.patience`: those are
    /// for real clients, and a test's client on a saturated machine may not get its head read in
    /// 10 s. Tests start from these; a test of the timeouts sets its own.
    static var patient: ServerLimits {
        var limits = ServerLimits()
        limits.headerTimeout = TestServer.patience
        limits.idleTimeout = TestServer.patience
        return limits
    }
}
