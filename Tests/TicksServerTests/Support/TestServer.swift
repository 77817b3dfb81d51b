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

    /// Runs `body` with a new, empty store of this kind, removed afterwards.
    func withStore<Value: Sendable>(
        _ body: (any TicksStore) async throws -> Value
    ) async throws -> Value {
        switch self {
        case .memory:
            return try await body(try SQLStore.memory())
        case .disk:
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ticks-test-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: folder) }
            return try await body(try SQLStore.sqlite(path: folder.appendingPathComponent("ticks.sqlite").path))
        case .postgres:
            return try await PostgresTestDatabase.withStore { store, _ in try await body(store) }
        }
    }
}

enum TestKeys {
    static let apiKey = "testkey"
    static let apiSecret = "a-test-secret-that-is-long-enough-for-hs256"
}

/// A running test server and a client for it.
struct TestServer: Sendable {
    let client: any TestClientProtocol
    /// For `.live`, the server's port: each call opens a connection of its
    /// own with a read timeout that allows a machine saturated beside the
    /// tests. HummingbirdTesting's live client gives up after a fixed 20 s
    /// without a byte, and keeps one connection, which the server's idle
    /// timeout may close while a test waits on its clock.
    let livePort: Int?
    let services: TicksServices
    let serverToken: String

    /// How long a live call may wait for its answer: the bar is a busy machine, not an idle one.
    static let patience: Duration = .seconds(180)

    var store: any TicksStore { services.store }

    /// Builds the same application `ticks serve` runs and drives it; `.live`
    /// listens on a loopback port (needed for WebSockets).
    static func run<Value: Sendable>(
        _ kind: StoreKind = .standard, _ setup: TestingSetup = .router, limits: ServerLimits = ServerLimits(),
        rateLimits: RateLimits = RateLimits(), largeChannelMembers: Int = 100, demo: Bool = false,
        webhooks: WebhookSettings = WebhookSettings(), time: TimeSource = .system,
        receiptLogRetention: ReceiptLogRetention = ReceiptLogRetention(),
        _ body: @Sendable (TestServer) async throws -> Value
    ) async throws -> Value {
        var logger = Logger(label: "ticks-test")
        logger.logLevel = .warning
        var configuration = TicksServerConfiguration(
            host: "127.0.0.1", port: 0,
            credentials: try Credentials(apiKey: TestKeys.apiKey, apiSecret: TestKeys.apiSecret))
        configuration.limits = limits
        // The server's header and idle timeouts are for real clients; a test's client on a saturated
        // machine may not get its head read in 10 s. A test that sets its own timeouts keeps them.
        if limits.headerTimeout == ServerLimits().headerTimeout { configuration.limits.headerTimeout = patience }
        if limits.idleTimeout == ServerLimits().idleTimeout { configuration.limits.idleTimeout = patience }
        configuration.rateLimits = rateLimits
        configuration.largeChannelMembers = largeChannelMembers
        configuration.demo = demo
        configuration.webhooks = webhooks
        configuration.time = time
        configuration.receiptLogRetention = receiptLogRetention
        return try await kind.withStore { store in
            let (application, services) = await buildApplication(
                configuration: configuration, store: store, logger: logger)
            let serverToken = try await services.authority.serverToken()
            return try await application.test(setup) { client in
                try await body(
                    TestServer(client: client, livePort: client.port, services: services, serverToken: serverToken))
            }
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
        guard let livePort else {
            let response = try await client.execute(uri: uri, method: method, headers: headers, body: body)
            return Reply(
                status: Int(response.status.code), body: String(buffer: response.body), headers: response.headers)
        }
        let request = TestClient.Request(uri, method: method, authority: "localhost", headers: headers, body: body)
        let response = try await TestClient.withClient(
            host: "127.0.0.1", port: livePort, configuration: .init(timeout: Self.patience)
        ) { try await $0.execute(request) }
        return Reply(
            status: Int(response.status.code), body: response.body.map { String(buffer: $0) } ?? "",
            headers: response.headers)
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

    // MARK: The usual set-up of a test

    func upsert(_ ids: String...) async throws {
        let users = ids.map { "\"\($0)\": {\"id\": \"\($0)\", \"name\": \"\($0.capitalized)\"}" }
        try await ok(.post, "/users", "{\"users\": {\(users.joined(separator: ","))}}")
    }

    func createChannel(_ cid: String, members: [String], createdBy: String? = nil) async throws {
        let list = members.map { "\"\($0)\"" }.joined(separator: ",")
        let creator = createdBy.map { ", \"created_by\": {\"id\": \"\($0)\"}" } ?? ""
        try await ok(.post, "/channels/\(path(cid))/query", "{\"data\": {\"members\": [\(list)]\(creator)}}")
    }

    @discardableResult
    func send(_ cid: String, id: String, from user: String, text: String = "hello") async throws -> JSON {
        try await ok(
            .post, "/channels/\(path(cid))/message",
            "{\"message\": {\"id\": \"\(id)\", \"text\": \"\(text)\", \"user\": {\"id\": \"\(user)\"}}}")
    }

    @discardableResult
    func markRead(_ cid: String, _ user: String, upTo messageID: String? = nil) async throws -> JSON {
        let message = messageID.map { ", \"message_id\": \"\($0)\"" } ?? ""
        return try await ok(.post, "/channels/\(path(cid))/read", "{\"user\": {\"id\": \"\(user)\"}\(message)}")
    }

    func markUnread(_ cid: String, _ user: String, from messageID: String) async throws {
        try await ok(
            .post, "/channels/\(path(cid))/unread", "{\"user\": {\"id\": \"\(user)\"}, \"message_id\": \"\(messageID)\"}")
    }

    func markDelivered(_ user: String, _ entries: [(cid: String, id: String)]) async throws {
        let list = entries.map { "{\"cid\": \"\($0.cid)\", \"id\": \"\($0.id)\"}" }.joined(separator: ",")
        try await ok(
            .post, "/channels/delivered?user_id=\(user)",
            "{\"latest_delivered_messages\": [\(list)], \"user_id\": \"\(user)\"}")
    }

    /// The channel state as `viewer` (a user token) or the server sees it.
    func state(_ cid: String, as viewer: String? = nil) async throws -> JSON {
        let token = try await optionalToken(viewer)
        return try await ok(.post, "/channels/\(path(cid))/query", "{}", token: token)
    }

    /// `viewer`'s view of `member`'s read state, nil when not shown.
    func readState(_ cid: String, of member: String, as viewer: String? = nil) async throws -> JSON? {
        try await state(cid, as: viewer)["read"].array.first { $0["user"]["id"].string == member }
    }

    func receipts(_ messageID: String, as viewer: String? = nil) async throws -> JSON {
        let token = try await optionalToken(viewer)
        return try await ok(.get, "/messages/\(messageID)/receipts", token: token)
    }

    func path(_ cid: String) -> String { cid.replacingOccurrences(of: ":", with: "/") }
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
    }
}
