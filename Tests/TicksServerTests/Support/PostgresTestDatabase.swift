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

    /// Runs `body` with a migrated store in a new schema, and where that schema is.
    static func withStore<Value: Sendable>(
        _ body: (PostgresStore, PostgresLocation) async throws -> Value
    ) async throws -> Value {
        guard let url else { throw PostgresTestError.notConfigured }
        let admin = PostgresClient(configuration: try PostgresLocation(url: url).clientConfiguration(), backgroundLogger: logger)
        var location = try PostgresLocation(url: url)
        location.schema = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let client = PostgresClient(configuration: location.clientConfiguration(), backgroundLogger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await admin.run() }
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            try await admin.query("CREATE SCHEMA \(unescaped: location.schema)")
            do {
                let store = try await PostgresStore.open(client: client, logger: logger)
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
