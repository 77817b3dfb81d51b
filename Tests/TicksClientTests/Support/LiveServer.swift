import Foundation
import Logging
import Testing
import TicksClient
import TicksServer
import TicksTestSupport

/// The SDK's tests run `LiveServer` (TicksTestSupport) over SQLite, its file
/// in the server's folder, so a restart finds the same data.
extension LiveServer {
    static let apiKey = "clienttests"
    static let apiSecret = "a-secret-for-the-client-tests-of-ticks-0123456789"

    var databasePath: String { folder.appendingPathComponent(Self.databaseName).path }
    private static let databaseName = "ticks.sqlite"

    /// Starts a server for the SDK's tests, runs `body`, and stops the server whatever happens.
    static func with<Value: Sendable>(_ body: (LiveServer) async throws -> Value) async throws -> Value {
        var logger = Logger(label: "ticks-live")
        logger.logLevel = .critical
        var configuration = TicksServerConfiguration(
            host: "127.0.0.1", port: 0,
            credentials: try Credentials(apiKey: apiKey, apiSecret: apiSecret),
            pingInterval: .seconds(5))
        // The tests poll the API (receipts, states) far faster than an app would.
        configuration.rateLimits = .off
        // The header and idle timeouts are for real clients (10 s, 60 s): a test's client on a
        // saturated machine may not get its head read in 10 s, or may reuse a connection just as
        // the server drops it as idle; either ends the call with `remoteConnectionClosed` (a loaded
        // run, 2026-12-03: CatchUpTests). The server's own tests do the same (`ServerLimits.patient`).
        configuration.limits.headerTimeout = Patience.wait
        configuration.limits.idleTimeout = Patience.wait
        // A long deadline: the SDK's tests run all at once on a machine that may be saturated.
        let deadline = StoreDeadline(timeout: Patience.wait)
        return try await with(
            configuration: configuration, logger: logger,
            openStore: { try SQLStore.sqlite(path: $0.appendingPathComponent(databaseName).path, deadline: deadline) },
            body)
    }

    /// A client for `userID` on this server, with test-sized timings.
    func client(
        _ userID: String, outbox: OutboxLocation = .inMemory,
        configure: (inout ChatClientConfiguration) -> Void = { _ in }
    ) async throws -> ChatClient {
        var configuration = ChatClientConfiguration(baseURL: baseURL, apiKey: Self.apiKey, outbox: outbox)
        // A deadline for an answer that never comes, not a measure: under stress-ng beside the
        // suite, 30 s was exceeded (scripts/test-under-load). A test that wants a timeout sets its own.
        configuration.requestTimeout = Patience.wait
        configuration.sendBackoff = Backoff(initialDelay: .milliseconds(50), maxDelay: .milliseconds(200))
        configuration.reconnectBackoff = Backoff(initialDelay: .milliseconds(50), maxDelay: .milliseconds(300))
        configure(&configuration)
        return try ChatClient(configuration: configuration)
    }

    /// A connected client for `userID`.
    func connected(
        _ userID: String, outbox: OutboxLocation = .inMemory,
        configure: (inout ChatClientConfiguration) -> Void = { _ in }
    ) async throws -> ChatClient {
        let client = try await client(userID, outbox: outbox, configure: configure)
        try await client.connect(userID: userID, token: try await token(userID))
        #expect(await client.connectionStatus.isConnected)
        return client
    }
}
