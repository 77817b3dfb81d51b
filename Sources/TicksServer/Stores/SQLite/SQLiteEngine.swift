import Foundation
import GRDB
#if canImport(Glibc)
import Glibc
#endif
import Logging
import ServiceLifecycle
import TicksProtocol

/// SQLite through GRDB, for `SQLStore`: one node, no set-up.
///
/// Writes go through GRDB's single writer, grouped by `GroupCommitter`
/// (concurrent calls share a transaction, each in a savepoint of its own), so
/// each call sees and changes a consistent state; cursor UPDATEs are guarded
/// as well (`StoreSQL.moveCursor`), so they would stay monotonic (R2) even
/// without that serialisation. Reads run on the calling thread.
public final class SQLiteEngine: StoreEngine {
    let writer: any DatabaseWriter
    /// Every write goes through here: concurrent writes share a commit.
    let committer: GroupCommitter
    /// On-disk databases only: a service to run beside the server (`services`).
    let checkpointer: WALCheckpointer?
    let dialect = SQLDialect.sqlite

    /// What must run beside the server: the WAL checkpointer of an on-disk database.
    var services: [any Service] { checkpointer.map { [$0] } ?? [] }

    /// When the write-ahead log is copied back into the database (`WALCheckpointer`).
    public struct CheckpointPolicy: Sendable {
        public var interval: Duration = .milliseconds(250)
        /// A log longer than this is caught up on the writer, so it starts afresh.
        public var restartFrames = 4096
        /// The clock the interval runs on.
        public var time: TimeSource = .system

        public init() {}
    }

    /// Opens (creating if needed) the database file at `path`, in WAL mode. A database a newer
    /// Ticks migrated is refused (`NewerSchemaError`) unless `allowingNewerSchema`.
    static func open(
        path: String, checkpoints: CheckpointPolicy = .init(), allowingNewerSchema: Bool = false
    ) throws -> SQLiteEngine {
        // The file is made here, 0600, before SQLite would make it 0644 less the
        // umask: its log and shared memory then take its mode (SQLite gives them
        // the database's), so the messages are the owner's alone.
        // (Made by another process meanwhile, or not at all: then opening says why.)
        if FileStatus(path, following: false) == nil, let descriptor = try? PrivateFiles.createNew(path) {
            Glibc.close(descriptor)
        }
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        configuration.prepareDatabase { db in
            // R12: a commit is on disk before the answer goes out. Every
            // connection, the checkpointer's too; the pool's writer loses it
            // when the pool turns WAL on and gets it back below.
            try db.execute(sql: "PRAGMA synchronous = FULL")
            // Readers map the file instead of copying each page with a read()
            // call: every write invalidates their page caches, so hot reads
            // would otherwise go back to the kernel all the time.
            try db.execute(sql: "PRAGMA mmap_size = 268435456")
            // Checkpoints run beside the writer, never in its commits (WALCheckpointer),
            // and a log that grew in a burst is cut back once it is reset.
            try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
            try db.execute(sql: "PRAGMA journal_size_limit = 67108864")
        }
        let pool = try DatabasePool(path: path, configuration: configuration)
        // GRDB's pool turns WAL on after `prepareDatabase` ran and sets its
        // writer to `synchronous = NORMAL` as it does (Database.setUpWALMode),
        // under which a commit is not fsync'd: FULL again, on the connection
        // that commits (R12).
        try pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        let checkpointer = try WALCheckpointer(
            path: path, configuration: configuration, interval: checkpoints.interval,
            restartFrames: checkpoints.restartFrames, time: checkpoints.time,
            logger: Logger(label: "ticks.sqlite")
        ) { [weak pool] in
            _ = try await pool?.writeWithoutTransaction { db in try db.checkpoint(.passive) }
        }
        let unknown = try pool.read { db in try SQLiteSchema.unknownMigrations(in: db) }
        if !unknown.isEmpty {
            guard allowingNewerSchema else { throw NewerSchemaError(path: path, migrations: unknown) }
            Logger(label: "ticks.sqlite").warning(
                "serving a database a newer Ticks migrated (--allow-newer-schema)",
                metadata: ["migrations": "\(unknown.joined(separator: ", "))"])
        }
        return try SQLiteEngine(writer: pool, checkpointer: checkpointer)
    }

    /// A private in-memory database (tests).
    static func inMemory() throws -> SQLiteEngine {
        try SQLiteEngine(writer: DatabaseQueue())
    }

    init(writer: any DatabaseWriter, checkpointer: WALCheckpointer? = nil) throws {
        self.writer = writer
        self.checkpointer = checkpointer
        self.committer = GroupCommitter(writer: writer)
        try SQLiteSchema.migrator.migrate(writer)
        try writer.write { db in try SQLiteSession(db: db).run(StoreSetUp.builtInChannelTypes()) }
    }

    func write<T: Sendable>(_ program: @escaping @Sendable () -> StoreProgram<T>) async throws -> T {
        try await committer.write { db in try SQLiteSession(db: db).run(program()) }
    }

    /// Runs on the calling thread, deliberately: in WAL mode a reader never
    /// waits for the writer, and every read here is a few indexed look-ups
    /// (tens of microseconds) — less than the two thread switches an
    /// asynchronous hop to GRDB's reader queue costs. At most one read runs
    /// per cooperative thread, fewer than the pool's readers, so none waits
    /// for a free connection.
    func read<T: Sendable>(_ program: @escaping @Sendable () -> StoreProgram<T>) async throws -> T {
        try readHere(program)
    }

    /// Without BEGIN and COMMIT, which cost as much as the look-up itself.
    func readOne<T: Sendable>(_ program: @escaping @Sendable () -> StoreProgram<T>) async throws -> T {
        try readOneHere(program)
    }

    // GRDB's synchronous reads: from an `async` function its `async` overloads would be chosen.

    private func readHere<T>(_ program: () -> StoreProgram<T>) throws -> T {
        try writer.read { db in try SQLiteSession(db: db).run(program()) }
    }

    private func readOneHere<T>(_ program: () -> StoreProgram<T>) throws -> T {
        try writer.unsafeRead { db in try SQLiteSession(db: db).run(program()) }
    }

    /// The database's pages (WAL content included) times the page size.
    /// A full disk, an I/O error, or a database locked past the busy timeout:
    /// the write cannot be made now, though nothing is wrong with the request.
    /// (SQLite rolls the transaction back; reads go on; writes work again once
    /// the disk has room.)
    func unavailability(of error: any Error) -> StoreError.Unavailability? {
        guard let error = error as? DatabaseError else { return nil }
        switch error.resultCode {
        case .SQLITE_FULL: return .diskFull
        case .SQLITE_IOERR, .SQLITE_BUSY, .SQLITE_LOCKED, .SQLITE_CANTOPEN, .SQLITE_READONLY, .SQLITE_PROTOCOL:
            return .unreachable("SQLite: \(error.resultCode)")
        default: return nil
        }
    }

    func storageBytes() async throws -> Int64 {
        try readHere {
            Step.row("PRAGMA page_count").then { pages in
                Step.row("PRAGMA page_size").map { size in try (pages?.int(0) ?? 0) * (size?.int(0) ?? 0) }
            }
        }
    }
}
