import GRDB
import Synchronization

/// Group commit: writes that arrive while a commit is on its way to disk wait
/// and then go together in one transaction, with one fsync.
///
/// With `synchronous = FULL` each commit costs an fsync (about 1.2 ms on the
/// machine BENCHMARKS.md describes), which alone would cap the server at about
/// 800 writes a second. Each write that shares a transaction runs in a
/// savepoint of its own, so one that throws rolls back only its own changes
/// (a write alone needs none: the transaction's rollback is its own); every
/// caller is answered only after the shared commit (R12). A write that ends
/// the whole transaction (SQLite rolls it back itself on a full disk or an
/// I/O error) fails with the writes before it, whose changes went too; the
/// writes after it wait for the next transaction.
actor GroupCommitter {
    private let writer: any DatabaseWriter
    private var queue: [any GroupedWrite] = []
    private var draining = false
    /// At most this many writes share a transaction.
    let maximumBatch: Int
    private let arrived: @Sendable () -> Void

    /// - Parameter arrived: told of each write once it is queued; tests wait for it to know a
    ///   write came before they let the transaction in progress end.
    init(writer: any DatabaseWriter, maximumBatch: Int = 256, arrived: @escaping @Sendable () -> Void = {}) {
        precondition(maximumBatch > 0, "a group holds at least one write")
        self.writer = writer
        self.maximumBatch = maximumBatch
        self.arrived = arrived
    }

    /// Runs `body` in the next group's transaction and returns once that transaction is committed.
    func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.append(Job(body: body, continuation: continuation))
            arrived()
            if !draining {
                draining = true
                Task { await drain() }
            }
        }
    }

    private func drain() async {
        while !queue.isEmpty {
            let batch = Array(queue.prefix(maximumBatch))
            queue.removeFirst(batch.count)
            do {
                try await writer.writeWithoutTransaction { db in try Self.inTransaction(db) { try Self.run(batch, in: db) } }
                for job in batch { job.finish(committed: nil) }
            } catch {
                // The writes that never ran wait for the next transaction, unless none ran at all (the
                // transaction could not begin): then all fail, or a failing BEGIN would loop for ever.
                let ran = batch.filter(\.hasRun)
                let waiting = ran.isEmpty ? [] : batch.filter { !$0.hasRun }
                for job in ran.isEmpty ? batch : ran { job.finish(committed: error) }
                queue.insert(contentsOf: waiting, at: 0)
            }
        }
        draining = false
    }

    /// The writes of one transaction, each in a savepoint of its own when they are several.
    private static func run(_ batch: [any GroupedWrite], in db: Database) throws {
        if batch.count == 1, let job = batch.first {
            // Alone in its transaction, a write needs no savepoint (two statements SQLite would
            // compile afresh): when it throws, the whole transaction rolls back, its changes only.
            job.run(in: db, savepoint: false)
            if let error = job.ownError { throw error }
            return
        }
        for job in batch {
            job.run(in: db, savepoint: true)
            // A write that ended the whole transaction (SQLite rolls it back on a full disk or an
            // I/O error) took the changes of the writes before it along: they fail with its error.
            guard db.isInsideTransaction else { throw job.ownError ?? TransactionEnded() }
        }
    }

    /// `body` in an immediate transaction, committed, or rolled back when it
    /// throws (or the commit fails). As GRDB's `write`, but its three
    /// statements are compiled once and kept (GRDB compiles its own afresh
    /// each time: two of a lone receipt's statements).
    private static func inTransaction(_ db: Database, _ body: () throws -> Void) throws {
        try db.cachedStatement(sql: "BEGIN IMMEDIATE TRANSACTION").execute()
        do {
            try body()
            try db.cachedStatement(sql: "COMMIT TRANSACTION").execute()
        } catch {
            // SQLite may have rolled it back already (a full disk, an I/O error).
            if db.isInsideTransaction { try? db.cachedStatement(sql: "ROLLBACK TRANSACTION").execute() }
            throw error
        }
    }

    /// One caller's write and where its answer goes.
    final class Job<T: Sendable>: GroupedWrite {
        let body: @Sendable (Database) throws -> T
        let continuation: CheckedContinuation<T, any Error>
        private let result = Mutex<Result<T, any Error>?>(nil)

        init(body: @escaping @Sendable (Database) throws -> T, continuation: CheckedContinuation<T, any Error>) {
            self.body = body
            self.continuation = continuation
        }

        func run(in db: Database, savepoint: Bool) {
            let outcome: Result<T, any Error>
            do {
                outcome = .success(try savepoint ? inSavepoint(db) : body(db))
            } catch {
                outcome = .failure(error)
            }
            result.withLock { $0 = outcome }
        }

        private func inSavepoint(_ db: Database) throws -> T {
            var value: T?
            try db.inSavepoint {
                value = try body(db)
                return .commit
            }
            guard let value else { throw CancellationError() }
            return value
        }

        var hasRun: Bool { result.withLock { $0 != nil } }

        var ownError: (any Error)? {
            result.withLock { if case .failure(let error)? = $0 { error } else { nil } }
        }

        /// Answers the caller: its own error when its write threw (its changes were rolled back
        /// whatever became of the transaction), else the transaction's error, else its value.
        func finish(committed error: (any Error)?) {
            if let own = ownError {
                continuation.resume(throwing: own)
            } else if let error {
                continuation.resume(throwing: error)
            } else {
                continuation.resume(with: result.withLock { $0 } ?? .failure(CancellationError()))
            }
        }
    }
}

protocol GroupedWrite: Sendable {
    /// Runs the write in `db`'s transaction: in a savepoint of its own when it shares the transaction.
    func run(in db: Database, savepoint: Bool)
    /// Whether `run` ran it (in this transaction).
    var hasRun: Bool { get }
    /// The error its own write threw, when it did.
    var ownError: (any Error)? { get }
    func finish(committed error: (any Error)?)
}

/// A write ended its group's transaction without an error of its own.
struct TransactionEnded: Error, CustomStringConvertible {
    var description: String { "the transaction was rolled back by one of its writes" }
}
