import Foundation
import Logging
import PostgresNIO

@testable import TicksServer

/// The PostgreSQL server the tests may use (`TICKS_TEST_POSTGRES_URL`); each
/// store lives in a schema of its own, dropped when the test ends.
enum PostgresTestDatabase {
    static var url: String? { ProcessInfo.processInfo.environment["TICKS_TEST_POSTGRES_URL"] }

    static var logger: Logger {
        var logger = Logger(label: "ticks-test-postgres")
        logger.logLevel = .warning
        return logger
    }

    /// How many tests hold a store at once. Swift Testing starts every test
    /// together; each store's pool, its admin connection and any event bus
    /// listeners would together pass the server's max_connections (the bus
    /// tests then never heard each other).
    static let stores = TestSemaphore(permits: 12)

    /// Runs `body` with a migrated store in a new schema, and where that schema is;
    /// `migrationsUpTo`: a store held at an older release's schema (all migrations when nil).
    static func withStore<Value: Sendable>(
        migrationsUpTo: String? = nil, _ body: (SQLStore, PostgresLocation) async throws -> Value
    ) async throws -> Value {
        guard let url else { throw PostgresTestError.notConfigured }
        await stores.acquire()
        defer { Task { await stores.release() } }
        // Small pools: the tests run in parallel, and together they must stay
        // under the server's max_connections (the event bus's listeners need room too).
        var adminConfiguration = try PostgresLocation(url: url).clientConfiguration()
        adminConfiguration.options.maximumConnections = 1
        adminConfiguration.options.minimumConnections = 0
        let admin = PostgresClient(configuration: adminConfiguration, backgroundLogger: logger)
        var location = try PostgresLocation(url: url)
        location.schema = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        var configuration = location.clientConfiguration()
        configuration.options.maximumConnections = 4
        let health = StoreHealth(logger: logger)
        let pool = PostgresPool(
            configuration: configuration, probe: try location.connectionConfiguration(), health: health, logger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await admin.run() }
            group.addTask { try await pool.run() }
            defer { group.cancelAll() }
            try await admin.query("CREATE SCHEMA \(unescaped: location.schema)")
            do {
                let store = SQLStore.postgres(
                    pool: pool, logger: logger, migrationsUpTo: migrationsUpTo, deadline: StoreKind.deadline,
                    health: health)
                try await store.prepare()
                let value = try await body(store, location)
                try await admin.query("DROP SCHEMA \(unescaped: location.schema) CASCADE")
                return value
            } catch {
                try await admin.query("DROP SCHEMA \(unescaped: location.schema) CASCADE")
                throw error
            }
        }
    }
}

enum PostgresTestError: Error {
    case notConfigured
}

/// A counting semaphore for tasks: `acquire` waits while every permit is taken.
actor TestSemaphore {
    private var available: Int
    private var waiters: [CheckedContinuation<Void, Never>] = []

    init(permits: Int) { available = permits }

    func acquire() async {
        if available > 0 {
            available -= 1
            return
        }
        await withCheckedContinuation { waiters.append($0) }
    }

    func release() {
        if waiters.isEmpty {
            available += 1
        } else {
            waiters.removeFirst().resume()
        }
    }
}
