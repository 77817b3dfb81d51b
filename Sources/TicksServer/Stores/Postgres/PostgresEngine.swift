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

    /// Changes that take turns on this node before they reach the database (sends into one
    /// channel), those queued together in one transaction where each may (`runQueued`).
    let turns: Turns<TurnCall>

    /// A change in its turn: its program, whom it may share a transaction with, and its caller's
    /// `PostgresSession.beforeStatement` (tests), which the turns' own task does not inherit.
    struct TurnCall: Sendable {
        let program: @Sendable () -> StoreProgram<any Sendable>
        let turn: Turn
        let beforeStatement: (@Sendable (String) async -> Void)?

        /// Runs it in `session`, as its caller's task would.
        func run(in session: PostgresSession) async throws -> any Sendable {
            var session = session
            session.callersBeforeStatement = beforeStatement
            return try await session.run(program())
        }
    }

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
        turns = Turns(
            groupable: { $0.turn.author != nil },
            runNow: { call in try await transactions.run(.write) { try await call.run(in: $0) } },
            runQueued: { channelPK, calls in
                await Self.runQueued(calls, of: channelPK, on: transactions, deadline: deadline)
            })
    }

    func write<T: Sendable>(_ program: @escaping @Sendable () -> StoreProgram<T>) async throws -> T {
        try await transactions.run(.write) { session in try await session.run(program()) }
    }

    /// Waits here, holding no connection and no snapshot, for the changes of
    /// `turn` that came before it (`Turns`), rather than in the database on
    /// the channel's row lock; then runs alone, or in one transaction with
    /// those that queued beside it (`runQueued`).
    func write<T: Sendable>(in turn: Turn, _ program: @escaping @Sendable () -> StoreProgram<T>) async throws -> T {
        let call = TurnCall(
            program: { program().map { $0 as any Sendable } }, turn: turn,
            beforeStatement: PostgresSession.beforeStatement)
        guard let value = try await turns.inTurn(turn.channelPK, call) as? T else {
            throw StoreError.inconsistent("a change in its turn answered with a value of another type")
        }
        return value
    }

    /// The calls of channel `channelPK`'s turn, queued behind another, in the turns' own task: each call
    /// bounded by the store's deadline from the moment the turn starts (no caller's deadline ends
    /// work that holds others'; a caller still waits no longer than its own). One call runs as it
    /// would have at once. Several share one transaction, and so one BEGIN, one round trip for the
    /// channel's row lock and one COMMIT (one flush to disk):
    ///
    /// 1. the channel's row, locked as each send locks it first;
    /// 2. the authors' member rows in key order (`StoreSQL.lockMembers`), as a batch of marks
    ///    locks its members, before any takes R13's advisory lock: each send's read of its own
    ///    message (R4) takes its author's row and then that lock, so without this step the
    ///    second author's row would be taken after the first send's advisory lock, the order a
    ///    batch of marks takes the other way round (a deadlock);
    /// 3. each call's program, in order: each locks the channel's row again and its author's
    ///    (both held) and numbers its message after the one before.
    ///
    /// Where a call fails for a reason of its own (a refusal, an id taken meanwhile), the group is
    /// rolled back and each call runs alone, in order, so the others are not refused with it: a
    /// client cannot fail its neighbours' sends, only make their turn run twice. Where the
    /// database is away, or the deadline passed, every call of the group is told so.
    static func runQueued(
        _ calls: [TurnCall], of channelPK: Int64, on transactions: PostgresTransactions, deadline: StoreDeadline
    ) async -> [Turns<TurnCall>.Outcome]
    {
        func alone(_ call: TurnCall) async -> Turns<TurnCall>.Outcome {
            await outcome { try await deadline.run { try await transactions.run(.write) { try await call.run(in: $0) } } }
        }
        func eachAlone() async -> [Turns<TurnCall>.Outcome] {
            var outcomes: [Turns<TurnCall>.Outcome] = []
            for call in calls { outcomes.append(await alone(call)) }
            return outcomes
        }
        guard let first = calls.first, calls.count > 1 else { return await eachAlone() }
        let authors = Array(Set(calls.compactMap(\.turn.author)))
        let together = await outcome {
            try await deadline.run {
                try await transactions.run(.write) { session in
                    var session = session
                    session.callersBeforeStatement = first.beforeStatement
                    try await session.execute(StoreSQL.channel(pk: channelPK, lock: true))
                    try await session.execute(StoreSQL.lockMembers(authors, of: channelPK))
                    var values: [any Sendable] = []
                    for call in calls { values.append(try await call.run(in: session)) }
                    return values
                }
            }
        }
        switch together {
        case .success(let values):
            return values.map { .success($0) }
        case .failure(let error) where error is CancellationError || Self.sharedFailure(error):
            return calls.map { _ in .failure(error) }
        case .failure:
            return await eachAlone()
        }
    }

    /// Whether `error` fails a group as a whole (the database away, the deadline passed) rather
    /// than one call of it.
    private static func sharedFailure(_ error: any Error) -> Bool {
        if case StoreError.unavailable = error { return true }
        return PostgresTransactions.unavailability(of: error) != nil
    }

    /// `body`'s value or its error.
    private static func outcome<T>(_ body: () async throws -> T) async -> Result<T, any Error> {
        do {
            return .success(try await body())
        } catch {
            return .failure(error)
        }
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
