import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle
import Synchronization
import TicksProtocol
import TicksReceipts
import Tracing

/// A database that runs `StoreProgram`s: the I/O around the operations
/// `SQLStore` writes once. SQLite (`SQLiteEngine`) and PostgreSQL
/// (`PostgresEngine`) are the two.
protocol StoreEngine: Sendable {
    var dialect: SQLDialect { get }
    /// A change: one transaction, committed before this returns (R12). The
    /// program is made where it runs, and may run again (a retried transaction).
    func write<T: Sendable>(_ program: @escaping @Sendable () -> StoreProgram<T>) async throws -> T
    /// Reads that must agree with each other: one snapshot.
    func read<T: Sendable>(_ program: @escaping @Sendable () -> StoreProgram<T>) async throws -> T
    /// One statement, outside an explicit transaction (a statement reads one snapshot anyway).
    func readOne<T: Sendable>(_ program: @escaping @Sendable () -> StoreProgram<T>) async throws -> T
    /// One statement that changes, committed on its own: PostgreSQL's
    /// batched receipts (`StoreSQL.moves`), one round trip.
    func writeOne<T: Sendable>(_ program: @escaping @Sendable () -> StoreProgram<T>) async throws -> T
    /// A change that first waits, on this node, for the changes of the same
    /// turn that came before it, and may share a transaction with those
    /// queued beside it (`Turns`: PostgreSQL's sends into one channel); a
    /// store with one writer runs it as any change.
    func write<T: Sendable>(in turn: Turn, _ program: @escaping @Sendable () -> StoreProgram<T>) async throws -> T
    /// How many bytes the stored data takes.
    func storageBytes() async throws -> Int64
    /// Migrations and seed data, before the first request.
    func prepare() async throws
    /// Why `error` means the database is away (or cannot take the write) rather
    /// than a refusal of this call: nil for any other error.
    func unavailability(of error: any Error) -> StoreError.Unavailability?
}

extension StoreEngine {
    func prepare() async throws {}

    func unavailability(of error: any Error) -> StoreError.Unavailability? { nil }

    func writeOne<T: Sendable>(_ program: @escaping @Sendable () -> StoreProgram<T>) async throws -> T {
        try await write(program)
    }

    func write<T: Sendable>(in turn: Turn, _ program: @escaping @Sendable () -> StoreProgram<T>) async throws -> T {
        try await write(program)
    }
}

/// Whose turn a change waits for (`StoreEngine.write(in:_:)`): a channel's
/// sends take turns, and those queued together share a transaction where
/// each may.
struct Turn: Sendable {
    /// The channel whose sends take turns.
    var channelPK: Int64
    /// The one member row the change locks besides the channel's row (a send
    /// in one call: its author's), when it may share a transaction with the
    /// changes queued beside it; nil: it runs alone.
    var author: String?
}

/// An engine's reason to refuse a statement that the operations turn into a `StoreError`.
enum StoreEngineError: Error {
    /// A row with the same unique key exists (a message id taken in the same instant by another node).
    case uniqueViolation
}

/// Ticks' store: every operation of `TicksStore` written once, as programs of
/// `StoreSQL` statements and `StoreRules` decisions, run by the engine of
/// the database in use. The operations are in the extensions by concern
/// (channels, messages, cursors, receipts).
public final class SQLStore: TicksStore, ReceiptLogReading {
    let engine: any StoreEngine
    /// The engine under the deadline (tests reach into it).
    let unbounded: any StoreEngine
    /// PostgreSQL: marks read and delivered grouped into one statement and one commit.
    let moveBatcher: MoveBatcher?
    /// What each change owes beyond the store, once `recordChanges(with:)` set it (the webhook outbox).
    private let recorder: RecorderSlot

    final class RecorderSlot: Sendable {
        let value = Mutex<(any ChangeRecorder)?>(nil)
    }

    /// Whether its operations are spans (`TracedEngine`; `TicksServerConfiguration.tracing`).
    let traced: Bool
    /// How far the schema goes: the newest, but for a node held at an older release's schema
    /// (`--migrations-up-to`), which then reads and writes only what that schema has: no "read
    /// by all" before `v11-all-members`, the default app settings before `v12-app-settings`,
    /// plays refused before `v13-played`, no one named in `POST /sync` before `v14-actors`.
    let schema: SchemaLevel

    /// Whether the store answers (`BoundedEngine`).
    public let health: StoreHealth
    /// How long a caller waits on a call, a receipt in the group commit included.
    let deadline: StoreDeadline

    /// - Parameters:
    ///   - traced: spans for the transactions and statements that are part of a trace.
    ///   - deadline: how long one call may take before it is answered `StoreError.unavailable`.
    init(
        engine: any StoreEngine, traced: Bool = false, deadline: StoreDeadline = StoreDeadline(),
        health: StoreHealth = StoreHealth(), schema: SchemaLevel = .newest
    ) {
        services = (engine as? SQLiteEngine)?.services ?? []
        unbounded = engine
        let engine = BoundedEngine(base: traced ? TracedEngine(engine) : engine, deadline: deadline, health: health)
        self.engine = engine
        self.deadline = deadline
        self.health = health
        self.traced = traced
        self.schema = schema
        let recorder = RecorderSlot()
        self.recorder = recorder
        // A batch holds the receipts of several requests and runs in a task of its own: it is not
        // any one request's child, so it runs untraced; each request's wait for it is its span
        // (`submit(_:)`).
        moveBatcher =
            engine.dialect == .postgres
            ? MoveBatcher(deadline: deadline) { moves, lease in
                try await Self.runBatch(
                    moves, on: lease.map(engine.within) ?? engine, recorder: recorder.value.withLock { $0 },
                    schema: schema)
            } : nil
    }

    /// A receipt through the group commit: a `store.write` span in a trace, covering the wait
    /// for the batch and the batch's statement.
    func submit(_ move: BatchedMove, to batcher: MoveBatcher) async throws -> CursorOutcome? {
        guard traced, ServiceContext.current != nil else { return try await batcher.submit(move) }
        return try await withSpan("store.write", ofKind: .client) { span in
            span.attributes["db.system"] = "postgresql"
            span.attributes["ticks.store.unit"] = "batch"
            return try await batcher.submit(move)
        }
    }

    /// From now on every change has `recorder` write what it owes in the change's own transaction.
    func recordChanges(with recorder: any ChangeRecorder) {
        self.recorder.value.withLock { $0 = recorder }
    }

    var changeRecorder: (any ChangeRecorder)? { recorder.value.withLock { $0 } }

    /// A batch of moves and what they made read by all (R13) in one
    /// statement (`StoreSQL.moves`), committed on its own; with a recorder,
    /// the statement and what the moves owe in one transaction.
    static func runBatch(
        _ moves: [BatchedMove], on engine: any StoreEngine, recorder: (any ChangeRecorder)?,
        schema: SchemaLevel = .newest
    )
        async throws
        -> [Result<CursorOutcome?, any Error>]
    {
        let moved = { @Sendable in OneStatementMove.program(moves, schema: schema) }
        guard let recorder else { return try await engine.writeOne(moved) }
        let (outcomes, recorded) = try await engine.write {
            moved().then { outcomes in
                let committed = outcomes.compactMap { try? $0.get() }.compactMap { $0 }
                return Self.record(.cursorsMoved(committed), by: recorder, now: .now())
                    .map { (outcomes, $0) }
            }
        }
        // After the commit, so the reader finds the rows (as `write(_:change:)`).
        if recorded > 0 { recorder.committed() }
        return outcomes
    }

    /// A change and what it owes (`change` of its result, nil for nothing),
    /// in one transaction; without a recorder just the change.
    func write<T: Sendable>(
        in turn: Turn? = nil, _ program: @escaping @Sendable () -> StoreProgram<T>,
        change: @escaping @Sendable (T) -> StoreChange?
    ) async throws -> T {
        let engine = self.engine
        func write<R: Sendable>(_ program: @escaping @Sendable () -> StoreProgram<R>) async throws -> R {
            guard let turn else { return try await engine.write(program) }
            return try await engine.write(in: turn, program)
        }
        guard let recorder = changeRecorder else { return try await write(program) }
        let (result, recorded) = try await write {
            program().then { result in
                guard let change = change(result) else { return .done((result, 0)) }
                return Self.record(change, by: recorder, now: .now()).map { (result, $0) }
            }
        }
        // The reader looks now: after the commit, so it finds the rows.
        if recorded > 0 { recorder.committed() }
        return result
    }

    /// Writes the outbox rows `change` owes `recorder`, in the transaction the program runs in,
    /// after reading what it asks for; how many.
    static func record(_ change: StoreChange, by recorder: any ChangeRecorder, now: Timestamp)
        -> StoreProgram<Int>
    {
        guard let reads = recorder.reads(for: change) else { return .done(0) }
        return context(for: reads).then { context in
            let entries = try recorder.entries(for: change, context: context)
            return Step.each(entries) { entry in
                Step.execute(
                    StoreSQL.insertOutbox(entry, deliveryID: UUID().uuidString.lowercased(), at: now.microseconds))
            }.map { $0.count }
        }
    }

    /// What `reads` asks for, as the transaction sees it.
    static func context(for reads: ChangeReads) -> StoreProgram<ChangeContext> {
        let config: StoreProgram<ChannelConfig?> =
            reads.channelType.map { name in
                Fetch.texts(StoreSQL.channelType(name)).map { try $0.first.map(StoredJSON.config) }
            } ?? .done(nil)
        let users: StoreProgram<[String: User]> = reads.users.isEmpty ? .done([:]) : Fetch.users(Set(reads.users))
        let recipients: StoreProgram<[RecipientUnread]> =
            reads.recipientCounts.map { channelPK in
                Step.rows(StoreSQL.recipientCounts(in: channelPK)).map { try $0.map { try StoreRows.recipient($0) } }
            } ?? .done([])
        return config.then { config in users.map { (config, $0) } }.then { config, users in
            recipients.map { ChangeContext(users: users, config: config, recipients: $0) }
        }
    }

    /// `userID` as who made a change, in the columns the schema has for it.
    func actor(_ userID: String?) -> ChangeActor { ChangeActor(userID: userID, kept: schema.has(.actors)) }

    /// SQLite in the file at `path` (created if needed), in WAL mode.
    public static func sqlite(
        path: String, checkpoints: SQLiteEngine.CheckpointPolicy = .init(), deadline: StoreDeadline = StoreDeadline(),
        allowingNewerSchema: Bool = false
    ) throws -> SQLStore {
        SQLStore(
            engine: try SQLiteEngine.open(
                path: path, checkpoints: checkpoints, allowingNewerSchema: allowingNewerSchema),
            deadline: deadline)
    }

    /// A private in-memory SQLite database (tests).
    public static func memory(traced: Bool = false, deadline: StoreDeadline = StoreDeadline()) throws -> SQLStore {
        SQLStore(engine: try SQLiteEngine.inMemory(), traced: traced, deadline: deadline)
    }

    /// PostgreSQL through `pool` (which must run, and share `health`); `prepare()` once it runs,
    /// before the first request. `migrationsUpTo`: the last migration `prepare` applies (all when nil).
    static func postgres(
        pool: PostgresPool, logger: Logger, migrationsUpTo: String? = nil, traced: Bool = false,
        deadline: StoreDeadline = StoreDeadline(), health: StoreHealth
    ) -> SQLStore {
        let schema = SchemaLevel(upTo: migrationsUpTo)
        return SQLStore(
            engine: PostgresEngine(
                transactions: PostgresTransactions(pool: pool, logger: logger, schema: schema),
                migrationsUpTo: migrationsUpTo, deadline: deadline),
            traced: traced, deadline: deadline, health: health, schema: schema)
    }

    /// Brings the schema up to date and adds the built-in channel types (PostgreSQL;
    /// SQLite did both when it opened).
    public func prepare() async throws {
        try await engine.prepare()
    }

    /// What must run beside a server on this store: SQLite's WAL checkpointer
    /// for a database on disk (`buildApplication(configuration:logger:)` runs them;
    /// give them to `buildApplication(configuration:store:logger:services:)`).
    public let services: [any Service]

    public var kind: StoreKind {
        switch engine.dialect {
        case .sqlite: .sqlite
        case .postgres: .postgres
        }
    }

    public func storageBytes() async throws -> Int64 {
        try await engine.storageBytes()
    }

    func loggedMoves(channelPK: Int64, userID: String, kind: CursorKind) async throws -> [LoggedMove] {
        try await engine.read {
            Step.rows(StoreSQL.loggedMoves(kind: kind, of: userID, in: channelPK)).map { rows in
                try rows.map { LoggedMove(id: try $0.int(0), kind: kind, seq: try $0.int(1), at: try $0.int(2)) }
            }
        }
    }
}

/// What a new database holds before its first request.
enum StoreSetUp {
    /// `messaging`, `team` and `livestream`, unless they exist.
    static func builtInChannelTypes() -> StoreProgram<Void> {
        Step.each(BuiltInChannelTypes.all(now: .now())) { config in
            Step.rows(StoreSQL.insertChannelType(name: config.name, config: try JSONCoding.string(config)))
        }.map { _ in () }
    }
}
