import Logging
import PostgresNIO

/// One connection inside one of the store's transactions, with the few query
/// shapes the store needs. Interpolated values in a `PostgresQuery` are bind
/// parameters, never SQL text.
struct PostgresSession {
    let connection: PostgresConnection
    let logger: Logger

    func rows(_ query: PostgresQuery) async throws -> [NamedRow] {
        try await connection.query(query, logger: logger).collect().map { NamedRow(row: $0.makeRandomAccess()) }
    }

    func row(_ query: PostgresQuery) async throws -> NamedRow? {
        try await rows(query).first
    }

    /// The first column of the first row, nil when there is no row.
    func value<T: PostgresDecodable>(_ query: PostgresQuery, as type: T.Type = T.self) async throws -> T? {
        guard let row = try await connection.query(query, logger: logger).collect().first else { return nil }
        return try row.makeRandomAccess()[0].decode(T.self)
    }

    /// The first column of every row.
    func values<T: PostgresDecodable>(_ query: PostgresQuery, as type: T.Type = T.self) async throws -> [T] {
        try await connection.query(query, logger: logger).collect().map { try $0.makeRandomAccess()[0].decode(T.self) }
    }

    func execute(_ query: PostgresQuery) async throws {
        _ = try await connection.query(query, logger: logger).collect()
    }
}

/// A result row read by column name.
struct NamedRow {
    let row: PostgresRandomAccessRow

    subscript<T: PostgresDecodable>(_ column: String) -> T {
        get throws { try row[column].decode(T.self) }
    }
}

/// Runs store work in transactions on a pooled connection.
struct PostgresTransactions: Sendable {
    let client: PostgresClient
    let logger: Logger

    enum Kind {
        /// Changes: READ COMMITTED, with the row locks each change takes.
        case write
        /// Several reads that must agree: one snapshot.
        case read
    }

    /// Runs `body` in a transaction and commits it. A transaction PostgreSQL
    /// aborted as a deadlock or serialization failure runs again, a few times.
    func run<T: Sendable>(_ kind: Kind, _ body: (PostgresSession) async throws -> T) async throws -> T {
        var attempt = 1
        while true {
            do {
                return try await client.withConnection { connection in
                    let session = PostgresSession(connection: connection, logger: logger)
                    try await session.execute(
                        kind == .read ? "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" : "BEGIN")
                    do {
                        let value = try await body(session)
                        try await session.execute("COMMIT")
                        return value
                    } catch {
                        do {
                            try await session.execute("ROLLBACK")
                        } catch let rollback {
                            logger.warning("rollback failed", metadata: ["error": "\(String(reflecting: rollback))"])
                        }
                        throw error
                    }
                }
            } catch let error as PSQLError where attempt < 5 && Self.isRetryable(error) {
                logger.debug("transaction retried", metadata: ["sqlstate": "\(error.serverInfo?[.sqlState] ?? "")"])
                attempt += 1
            }
        }
    }

    /// Deadlock detected, serialization failure.
    static func isRetryable(_ error: PSQLError) -> Bool {
        ["40P01", "40001"].contains(error.serverInfo?[.sqlState] ?? "")
    }

    static func isUniqueViolation(_ error: any Error) -> Bool {
        (error as? PSQLError)?.serverInfo?[.sqlState] == "23505"
    }
}
