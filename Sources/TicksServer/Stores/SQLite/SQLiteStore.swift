import Foundation
import GRDB
import Logging
import TicksProtocol
import TicksReceipts

/// The embedded store: SQLite through GRDB, running `StoreSQL`'s statements
/// and `StoreRules`' decisions. Its operations are in the extensions by
/// concern (channels, messages, cursors, receipts).
///
/// Writes go through GRDB's single writer, grouped by `GroupCommitter`
/// (concurrent calls share a transaction, each in a savepoint of its own),
/// so each call sees and changes a consistent state; cursor UPDATEs are
/// guarded as well (`StoreSQL.moveCursor`), so they would stay monotonic (R2)
/// even without that serialisation.
public final class SQLiteStore: TicksStore, ReceiptLogReading {
    let writer: any DatabaseWriter
    /// Every write goes through here: concurrent writes share a commit.
    let committer: GroupCommitter
    /// On-disk databases only; stops with the store.
    let checkpointer: WALCheckpointer?

    /// When the write-ahead log is copied back into the database (`WALCheckpointer`).
    public struct CheckpointPolicy: Sendable {
        public var interval: Duration = .milliseconds(250)
        /// A log longer than this is caught up on the writer, so it starts afresh.
        public var restartFrames = 4096

        public init() {}
    }

    /// Opens (creating if needed) the database file at `path`, in WAL mode.
    public static func open(path: String, checkpoints: CheckpointPolicy = .init()) throws -> SQLiteStore {
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        configuration.prepareDatabase { db in
            // R12: a commit is on disk before the answer goes out.
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
        let checkpointer = try WALCheckpointer(
            path: path, configuration: configuration, interval: checkpoints.interval,
            restartFrames: checkpoints.restartFrames,
            logger: Logger(label: "ticks.sqlite")
        ) { [weak pool] in
            _ = try await pool?.writeWithoutTransaction { db in try db.checkpoint(.passive) }
        }
        return try SQLiteStore(writer: pool, checkpointer: checkpointer)
    }

    /// A private in-memory database (tests).
    public static func inMemory() throws -> SQLiteStore {
        try SQLiteStore(writer: DatabaseQueue())
    }

    init(writer: any DatabaseWriter, checkpointer: WALCheckpointer? = nil) throws {
        self.writer = writer
        self.checkpointer = checkpointer
        self.committer = GroupCommitter(writer: writer)
        try SQLiteSchema.migrator.migrate(writer)
        try writer.write { db in
            let session = SQLiteSession(db: db)
            for config in BuiltInChannelTypes.all(now: .now()) {
                _ = try session.rows(StoreSQL.insertChannelType(name: config.name, config: try JSONCoding.string(config)))
            }
        }
    }

    /// Runs `body` in a read transaction on the calling thread.
    ///
    /// Deliberately synchronous: in WAL mode a reader never waits for the
    /// writer, and every read here is a few indexed look-ups (tens of
    /// microseconds) — less than the two thread switches an asynchronous hop to
    /// GRDB's reader queue costs. At most one read runs per cooperative thread,
    /// fewer than the pool's readers, so none waits for a free connection.
    func read<T>(_ body: (SQLiteSession) throws -> T) throws -> T {
        try writer.read { db in try body(SQLiteSession(db: db)) }
    }

    /// Runs `body`, one SELECT, outside an explicit transaction: a single
    /// statement reads one consistent snapshot anyway, and this saves the
    /// BEGIN and COMMIT that cost as much as the look-up itself.
    func readOne<T>(_ body: (SQLiteSession) throws -> T) throws -> T {
        try writer.unsafeRead { db in try body(SQLiteSession(db: db)) }
    }

    /// Runs `body` in the next group commit's transaction (`GroupCommitter`).
    func write<T: Sendable>(_ body: @escaping @Sendable (SQLiteSession) throws -> T) async throws -> T {
        try await committer.write { db in try body(SQLiteSession(db: db)) }
    }

    // MARK: Operations

    /// The database's pages (WAL content included) times the page size.
    public func storageBytes() async throws -> Int64 {
        try read { session in
            let pages = try Int64.fetchOne(session.db, sql: "PRAGMA page_count") ?? 0
            let size = try Int64.fetchOne(session.db, sql: "PRAGMA page_size") ?? 0
            return pages * size
        }
    }

    func loggedMoves(channelPK: Int64, userID: String, kind: CursorKind) async throws -> [LoggedMove] {
        try read { session in
            try session.rows(StoreSQL.loggedMoves(kind: kind, of: userID, in: channelPK)).map { row in
                LoggedMove(id: try row.int(0), kind: kind, seq: try row.int(1), at: try row.int(2))
            }
        }
    }
}
