import Foundation
import Logging
import Metrics
import Synchronization

/// The live WebSocket connections, by user (a user may hold many: one per
/// device). Sending never waits on a client: each connection has its own
/// bounded buffer, and a connection whose buffer is full is closed.
public final class ConnectionHub: Sendable {
    /// One connection's outbound side.
    final class Outbox: Sendable {
        let id: String
        let userID: String
        let continuation: AsyncStream<String>.Continuation
        /// Set when the buffer overflowed.
        let overflowed = Atomic<Bool>(false)
        /// Ends when the buffer overflowed (or the connection is gone): the
        /// connection's handler then drops the socket at once, even while its
        /// writer is stuck on a client that does not read.
        let overflow: AsyncStream<Void>
        private let overflowContinuation: AsyncStream<Void>.Continuation

        var isOverflowed: Bool { overflowed.load(ordering: .relaxed) }

        init(id: String, userID: String, continuation: AsyncStream<String>.Continuation) {
            self.id = id
            self.userID = userID
            self.continuation = continuation
            (overflow, overflowContinuation) = AsyncStream.makeStream(of: Void.self)
        }

        /// Marks the connection as fallen behind; true the first time.
        func markOverflowed() -> Bool {
            let first = !overflowed.exchange(true, ordering: .relaxed)
            continuation.finish()
            overflowContinuation.finish()
            return first
        }

        func finish() {
            continuation.finish()
            overflowContinuation.finish()
        }
    }

    private let connections = Mutex<[String: [String: Outbox]]>([:])
    /// How many frames may wait for one slow connection before it is closed.
    public let bufferCapacity: Int
    private let metrics: ServerMetrics
    private let logger: Logger

    init(bufferCapacity: Int, metrics: ServerMetrics, logger: Logger) {
        self.bufferCapacity = bufferCapacity
        self.metrics = metrics
        self.logger = logger
    }

    /// Registers a connection; its frames arrive on the returned stream.
    func register(userID: String) -> (outbox: Outbox, frames: AsyncStream<String>) {
        let (frames, continuation) = AsyncStream.makeStream(
            of: String.self, bufferingPolicy: .bufferingOldest(bufferCapacity))
        let outbox = Outbox(id: UUID().uuidString.lowercased(), userID: userID, continuation: continuation)
        connections.withLock { $0[userID, default: [:]][outbox.id] = outbox }
        metrics.connections.increment()
        return (outbox, frames)
    }

    func unregister(_ outbox: Outbox) {
        let removed = connections.withLock { all -> Bool in
            let removed = all[outbox.userID]?.removeValue(forKey: outbox.id) != nil
            if all[outbox.userID]?.isEmpty == true { all[outbox.userID] = nil }
            return removed
        }
        outbox.finish()
        if removed { metrics.connections.decrement() }
    }

    /// Queues `frame` for every connection of `userIDs`; returns how many connections got it.
    @discardableResult
    public func send(_ frame: String, to userIDs: some Sequence<String>) -> Int {
        let targets = connections.withLock { all in userIDs.flatMap { all[$0].map { Array($0.values) } ?? [] } }
        var delivered = 0
        for outbox in targets {
            if enqueue(frame, on: outbox) { delivered += 1 }
        }
        metrics.framesSent.increment(by: delivered)
        metrics.bytesSent.increment(by: delivered * frame.utf8.count)
        return delivered
    }

    /// Queues a frame for one connection. A full buffer closes the connection.
    @discardableResult
    func enqueue(_ frame: String, on outbox: Outbox) -> Bool {
        switch outbox.continuation.yield(frame) {
        case .enqueued: return true
        case .terminated: return false
        case .dropped:
            if outbox.markOverflowed() {
                logger.warning(
                    "closing a connection that fell behind",
                    metadata: ["user_id": "\(outbox.userID)", "connection_id": "\(outbox.id)"])
                metrics.slowConnectionsClosed.increment()
            }
            return false
        @unknown default: return false
        }
    }

    /// How many of `userIDs` have at least one connection (Stream's `watcher_count`).
    public func connectedCount(among userIDs: some Sequence<String>) -> Int {
        connections.withLock { all in userIDs.reduce(0) { $0 + (all[$1] == nil ? 0 : 1) } }
    }

    /// The number of open connections.
    public var connectionCount: Int { connections.withLock { $0.values.reduce(0) { $0 + $1.count } } }

    /// Ends every connection's frame stream (graceful shutdown).
    func closeAll() {
        let all = connections.withLock { $0.values.flatMap(\.values) }
        for outbox in all { outbox.finish() }
    }
}
