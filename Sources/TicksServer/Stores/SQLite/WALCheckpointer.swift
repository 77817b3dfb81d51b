import GRDB
import Logging
import ServiceLifecycle
import TicksProtocol

/// Copies the write-ahead log back into the database file from a connection
/// of its own, off the writer's path.
///
/// SQLite's automatic checkpoint runs inside the commit that takes the log
/// past 1,000 pages: that commit, and every write grouped behind it, waits for
/// the copy and its fsyncs — with receipts at 500/s that was a 10 ms stall a
/// few times a second, the whole of the p99 (BENCHMARKS.md). The store turns
/// the automatic checkpoint off, and this runs a PASSIVE checkpoint every
/// `interval`, which waits for neither the writer nor the readers.
///
/// Under steady writes such a checkpoint never quite catches up with the
/// writer, and the log is only started afresh once one has. So when the log
/// holds more than `restartFrames`, `catchUp` runs one more checkpoint on the
/// writer's own connection: it copies just the frames written since, and the
/// next write then starts the log from the beginning.
///
/// A service of the application's group (`buildApplication`): it stops when
/// the group shuts down.
struct WALCheckpointer: Service {
    let connection: DatabaseQueue
    let interval: Duration
    let restartFrames: Int
    let time: TimeSource
    let logger: Logger
    let catchUp: @Sendable () async throws -> Void

    init(
        path: String, configuration: Configuration, interval: Duration, restartFrames: Int, time: TimeSource,
        logger: Logger, catchUp: @escaping @Sendable () async throws -> Void
    ) throws {
        connection = try DatabaseQueue(path: path, configuration: configuration)
        self.interval = interval
        self.restartFrames = restartFrames
        self.time = time
        self.logger = logger
        self.catchUp = catchUp
    }

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    try await time.sleep(for: interval)
                    let log = try await connection.writeWithoutTransaction { db in try db.checkpoint(.passive) }
                    if log.walFrameCount > restartFrames { try await catchUp() }
                } catch is CancellationError {
                    return
                } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY {
                    // Another checkpoint was running (SQLite allows one at a time).
                    logger.debug("WAL checkpoint skipped: busy")
                } catch {
                    logger.warning("WAL checkpoint failed; the next one retries", metadata: ["error": "\(error)"])
                }
            }
        }
    }
}
