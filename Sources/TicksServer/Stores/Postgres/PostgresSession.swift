import Logging
import PostgresNIO
import _ConnectionPoolModule
import TicksProtocol
import TicksReceipts

/// One connection inside one of the engine's transactions: runs a
/// `StoreProgram`, one statement (one round trip) after another. Values are
/// bind parameters, never SQL text.
struct PostgresSession {
    let connection: PostgresConnection
    let logger: Logger
    /// How far the schema goes (`SQLDialect.render`): the newest, but on a node held before a migration.
    var schema = SchemaLevel.newest

    /// Tests only: awaited with each statement's text before it is sent, in
    /// the tasks that carry it, so an interleaving test can hold a
    /// transaction between two of its statements (`InterleavingTests`).
    @TaskLocal static var beforeStatement: (@Sendable (String) async -> Void)?
    /// Tests only: the `beforeStatement` of the caller whose work this session runs in a task of
    /// its own (a group of sends, `PostgresEngine.runQueued`), in place of the running task's.
    /// A property, not the task-local bound again: binding a task-local inside postgres-nio's
    /// `withConnection` crashed the release build in `swift_task_localValuePush` (Swift 6.3.1).
    var callersBeforeStatement: (@Sendable (String) async -> Void)?

    func run<Result>(_ program: StoreProgram<Result>) async throws -> Result {
        var run = ProgramRun(program)
        while let query = try run.nextQuery() { try run.answer(try await rows(query)) }
        return run.result
    }

    func rows(_ query: StoreQuery) async throws -> [PostgresRandomAccessRow] {
        // A statement sent on a connection that has closed is never answered
        // (postgres-nio writes it to the closed channel and drops its promise):
        // fail it here. One that closes between this check and the write is
        // left at the call's deadline (`StoreDeadline`).
        guard !connection.isClosed else { throw PostgresConnectionClosed() }
        let (text, bindings) = SQLDialect.postgres.render(query, schema: schema)
        try bindings.requireStorable()
        if let pause = callersBeforeStatement ?? Self.beforeStatement { await pause(text) }
        var binds = PostgresBindings(capacity: bindings.count)
        for binding in bindings {
            switch binding {
            case .value(.int(let value)): binds.append(value)
            case .value(.text(let value)): binds.append(value)
            case .value(.null): binds.appendNull()
            case .array(.texts(let values)): binds.append(values)
            case .array(.ints(let values)): binds.append(values)
            }
        }
        do {
            // One case a statement, so that each call is specialised for its statement's type.
            switch query.prepared {
            case .moves?:
                return try await prepared(PreparedStoreStatement<Moves>(bindings: binds), text)
            case .channelWithMembership?:
                return try await prepared(PreparedStoreStatement<ChannelWithMembership>(bindings: binds), text)
            case .send?:
                return try await prepared(PreparedStoreStatement<Send>(bindings: binds), text)
            case .lockedChannel?:
                return try await prepared(PreparedStoreStatement<LockedChannel>(bindings: binds), text)
            case .channelType?:
                return try await prepared(PreparedStoreStatement<ChannelType>(bindings: binds), text)
            case .users?:
                return try await prepared(PreparedStoreStatement<Users>(bindings: binds), text)
            case nil:
                return try await connection.query(PostgresQuery(unsafeSQL: text, binds: binds), logger: logger)
                    .collect().map { $0.makeRandomAccess() }
            }
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == "23505" {
            throw StoreEngineError.uniqueViolation
        }
    }

    /// Runs a statement kept prepared on this connection (prepared on its first use here).
    private func prepared<Shape>(_ statement: PreparedStoreStatement<Shape>, _ text: String) async throws
        -> [PostgresRandomAccessRow]
    {
        assert(text == Shape.sql, "a prepared statement's text changed between calls")
        var rows: [PostgresRandomAccessRow] = []
        for try await row in try await connection.execute(statement, logger: logger) {
            rows.append(row.makeRandomAccess())
        }
        return rows
    }

    func execute(_ query: StoreQuery) async throws {
        _ = try await rows(query)
    }
}

extension PostgresRandomAccessRow: StoreRow {
    func int(_ index: Int) throws -> Int64 { try self[index].decode(Int64.self) }
    func optionalInt(_ index: Int) throws -> Int64? { try self[index].decode(Int64?.self) }
    func text(_ index: Int) throws -> String { try self[index].decode(String.self) }
    func optionalText(_ index: Int) throws -> String? { try self[index].decode(String?.self) }
    func bool(_ index: Int) throws -> Bool { try self[index].decode(Bool.self) }
}

/// Runs store work in transactions on a pooled connection.
struct PostgresTransactions: Sendable {
    let pool: PostgresPool
    let logger: Logger
    /// How far the schema goes: the newest, but on a node held before a migration.
    var schema = SchemaLevel.newest

    /// A session on `connection` that writes statements for this schema.
    func session(_ connection: PostgresConnection) -> PostgresSession {
        PostgresSession(connection: connection, logger: logger, schema: schema)
    }

    enum Kind {
        /// Changes: READ COMMITTED, with the row locks each change takes.
        case write
        /// Several reads that must agree: one snapshot.
        case read
        /// One statement, its own transaction (autocommit): no BEGIN, no COMMIT.
        case single
    }

    /// Runs `body` on a pooled connection. If the call is left at its deadline
    /// (`StoreDeadline`), the connection is closed: what runs on it fails, and
    /// the pool drops it instead of lending it again in an unknown state.
    func withConnection<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        try await pool.withConnection { connection in
            let expiry = StoreDeadline.expiry
            let registration = expiry?.closes(connection)
            defer { expiry?.forget(registration) }
            return try await body(connection)
        }
    }

    /// Runs `body` in a transaction and commits it. A transaction PostgreSQL
    /// aborted as a deadlock or serialization failure runs again, a few times.
    func run<T: Sendable>(_ kind: Kind, _ body: (PostgresSession) async throws -> T) async throws -> T {
        var attempt = 1
        while true {
            do {
                return try await withConnection { connection in
                    let session = session(connection)
                    guard kind != .single else { return try await body(session) }
                    try await session.execute(
                        kind == .read ? "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" : "BEGIN")
                    do {
                        let value = try await body(session)
                        try await session.execute("COMMIT")
                        return value
                    } catch {
                        // On a connection that closed, the server has ended the transaction already.
                        if !connection.isClosed {
                            do {
                                try await session.execute("ROLLBACK")
                            } catch let rollback {
                                logger.warning(
                                    "rollback failed", metadata: ["error": "\(String(reflecting: rollback))"])
                            }
                        }
                        throw error
                    }
                }
            } catch let error as PSQLError where attempt < 5 && Self.isRetryable(error) {
                logger.debug("transaction retried", metadata: ["sqlstate": "\(error.serverInfo?[.sqlState] ?? "")"])
                pool.health.retried(error.serverInfo?[.sqlState] == "40P01" ? .deadlock : .serialization)
                attempt += 1
            }
        }
    }

    /// Deadlock detected, serialization failure.
    static func isRetryable(_ error: PSQLError) -> Bool {
        ["40P01", "40001"].contains(error.serverInfo?[.sqlState] ?? "")
    }

    /// Why `error` means PostgreSQL is away, or cannot take this call now
    /// (starting, shutting down, in recovery, a standby, out of connections),
    /// rather than a refusal of the call itself: nil for any other error.
    static func unavailability(of error: any Error) -> StoreError.Unavailability? {
        switch error {
        case is PostgresConnectionClosed:
            return .unreachable("the connection closed")
        case is ConnectionPoolError:
            return .unreachable("no connection to the database: \(error)")
        case let error as PSQLError:
            switch error.code {
            case .connectionError, .serverClosedConnection, .clientClosedConnection, .uncleanShutdown, .poolClosed,
                .queryCancelled, .sslUnsupported, .failedToAddSSLHandler:
                return .unreachable("\(error.code)")
            case .server:
                let state = error.serverInfo?[.sqlState] ?? ""
                // 08: connection exception; 57P01-03: shutting down, crashed, starting; 57014: cancelled;
                // 53300: too many connections; 25006: read-only (a standby); 25P03: a transaction left idle
                // past idle_in_transaction_session_timeout; 28: authentication;
                // 40001, 40P01: still conflicting after the retries.
                guard state.hasPrefix("08") || state.hasPrefix("28") || state.hasPrefix("57P")
                    || ["57014", "53300", "25006", "25P03", "40001", "40P01"].contains(state)
                else { return nil }
                return .unreachable("SQLSTATE \(state): \(error.serverInfo?[.message] ?? "")")
            default:
                return nil
            }
        default:
            return nil
        }
    }
}

/// A statement was about to go out on a connection that has closed.
struct PostgresConnectionClosed: Error {}

extension StoreDeadline.Expiry {
    /// Closes `connection` if the call is left at its deadline (without waiting for the close);
    /// `forget` what this returns once the call gives the connection back.
    func closes(_ connection: PostgresConnection) -> Int? {
        register {
            let closed: EventLoopFuture<Void> = connection.close()
            _ = closed
        }
    }
}
