import Logging
import PostgresNIO

/// PostgreSQL through postgres-nio, for `SQLStore`: the shared database of
/// several nodes.
///
/// Every change runs in one READ COMMITTED transaction that locks the rows it
/// moves, always a channel before its members (`StoreSQL` adds `FOR UPDATE`
/// in this dialect): a member's cursor moves are serialised by their member
/// row's lock, so a cursor computed by `ReceiptRules` from what was read is
/// still current when it is written (R2), whichever node the requests reach;
/// a channel's messages are numbered under its row lock, so sequence numbers
/// stay dense. Reads that must agree run in one REPEATABLE READ snapshot.
/// Channel types are joined into the queries that need them, so a change
/// made through one node is seen by every other at once.
final class PostgresEngine: StoreEngine {
    let transactions: PostgresTransactions
    let dialect = SQLDialect.postgres
    /// The last migration to apply; all when nil.
    let migrationsUpTo: String?

    /// Changes that take turns on this node before they reach the database (sends into one channel).
    let turns = Turns()

    /// Each question of the wait for a server in recovery (`PostgresSchema.waitForPromotion`) has
    /// this deadline, and the wait between two runs on its clock.
    let deadline: StoreDeadline

    /// Waits while the server is in recovery, then applies the migrations and seeds the built-in
    /// channel types; the client must be running.
    func prepare() async throws {
        try await PostgresSchema.waitForPromotion(transactions, deadline: deadline)
        try await PostgresSchema.migrate(transactions, upTo: migrationsUpTo)
        try await write { StoreSetUp.builtInChannelTypes() }
    }

    init(transactions: PostgresTransactions, migrationsUpTo: String? = nil, deadline: StoreDeadline = StoreDeadline()) {
        self.transactions = transactions
        self.migrationsUpTo = migrationsUpTo
        self.deadline = deadline
    }

    func write<T: Sendable>(_ program: @escaping @Sendable () -> StoreProgram<T>) async throws -> T {
        try await transactions.run(.write) { session in try await session.run(program()) }
    }

    /// Waits here, holding no connection and no snapshot, for the changes of
    /// `turn` that came before it (`Turns`), rather than in the database on
    /// the channel's row lock.
    func write<T: Sendable>(inTurnOf turn: Int64, _ program: @escaping @Sendable () -> StoreProgram<T>) async throws
        -> T
    {
        try await turns.inTurn(turn) { try await write(program) }
    }

    func read<T: Sendable>(_ program: @escaping @Sendable () -> StoreProgram<T>) async throws -> T {
        try await transactions.run(.read) { session in try await session.run(program()) }
    }

    /// On any pooled connection, outside an explicit transaction.
    func readOne<T: Sendable>(_ program: @escaping @Sendable () -> StoreProgram<T>) async throws -> T {
        try await transactions.withConnection { connection in
            try await transactions.session(connection).run(program())
        }
    }

    /// In autocommit: a single statement is its own transaction.
    func writeOne<T: Sendable>(_ program: @escaping @Sendable () -> StoreProgram<T>) async throws -> T {
        try await transactions.run(.single) { session in try await session.run(program()) }
    }

    func unavailability(of error: any Error) -> StoreError.Unavailability? {
        PostgresTransactions.unavailability(of: error)
    }

    func storageBytes() async throws -> Int64 {
        try await readOne { Step.row("SELECT pg_database_size(current_database())").map { try $0?.int(0) ?? 0 } }
    }
}
