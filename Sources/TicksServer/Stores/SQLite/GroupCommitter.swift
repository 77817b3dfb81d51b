import GRDB
import Synchronization

/// Group commit: writes that arrive while a commit is on its way to disk wait
/// and then go together in one transaction, with one fsync.
///
/// With `synchronous = FULL` each commit costs an fsync (about 1.2 ms on the
/// machine BENCHMARKS.md describes), which alone would cap the server at about
/// 800 writes a second. Each write runs in a savepoint of its own, so one that
/// throws rolls back only its own changes; every caller is answered only after
/// the shared commit (R12).
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
                try await writer.write { db in
                    for job in batch { job.run(in: db) }
                }
                for job in batch { job.finish(committed: nil) }
            } catch {
                for job in batch { job.finish(committed: error) }
            }
        }
        draining = false
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

        func run(in db: Database) {
            let outcome: Result<T, any Error>
            do {
                var value: T?
                try db.inSavepoint {
                    value = try body(db)
                    return .commit
                }
                guard let value else { throw CancellationError() }
                outcome = .success(value)
            } catch {
                outcome = .failure(error)
            }
            result.withLock { $0 = outcome }
        }

        func finish(committed error: (any Error)?) {
            if let error {
                continuation.resume(throwing: error)
            } else {
                continuation.resume(with: result.withLock { $0 } ?? .failure(CancellationError()))
            }
        }
    }
}

protocol GroupedWrite: Sendable {
    func run(in db: Database)
    func finish(committed error: (any Error)?)
}
