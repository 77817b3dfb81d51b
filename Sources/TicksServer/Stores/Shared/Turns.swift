import Synchronization

/// Calls that name the same key run one at a time on this node, in the order
/// they came; calls of other keys do not wait for them.
///
/// Why (PostgreSQL's sends, issue 57): a channel's messages are numbered
/// under its row lock, so sends into one channel run one at a time whatever
/// happens. Waiting for that lock inside PostgreSQL was the costly way: each
/// waiting statement holds its snapshot, so the versions the running send
/// leaves cannot be pruned (HOT updates fail, every index is written, the
/// tables grow), and a row lock's waiters are not served in order, so some
/// waited out the store's deadline (BENCHMARKS.md, "Sends into one large
/// channel"). Waiting here holds no connection and no snapshot, and the
/// first to come goes first. The row lock stays: it is what keeps sends
/// through several nodes in order.
///
/// A call cancelled while it waits its turn leaves the queue at once and
/// never runs; so does one left at its deadline, since `StoreDeadline`
/// cancels the work it leaves.
final class Turns: Sendable {
    private final class Waiter: Sendable {
        let continuation: Mutex<CheckedContinuation<Void, any Error>?>

        init(_ continuation: CheckedContinuation<Void, any Error>) {
            self.continuation = Mutex(continuation)
        }

        /// Resumes it, once.
        func resume(_ result: Result<Void, any Error>) {
            continuation.withLock { $0.take() }?.resume(with: result)
        }
    }

    /// Per key with a call running: the calls waiting, oldest first. No entry: no call runs.
    private let queues = Mutex<[Int64: [Waiter]]>([:])

    init() {}

    /// Keys with a call running (for tests: none once every call has ended).
    var busyKeys: Int { queues.withLock { $0.count } }

    /// The calls of `key` waiting for their turn (for tests).
    func waitingCount(_ key: Int64) -> Int { queues.withLock { $0[key]?.count ?? 0 } }

    /// `body`, once the calls of `key` that came before it have ended.
    func inTurn<T: Sendable>(_ key: Int64, _ body: () async throws -> T) async throws -> T {
        try await take(key)
        defer { pass(key) }
        return try await body()
    }

    private func take(_ key: Int64) async throws {
        // Free: the call runs at once, and its entry says so.
        let free = queues.withLock { queues -> Bool in
            guard queues[key] == nil else { return false }
            queues[key] = []
            return true
        }
        if free { return }
        let holder = Mutex<Waiter?>(nil)
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let waiter = Waiter(continuation)
                holder.withLock { $0 = waiter }
                let queued = queues.withLock { queues -> Bool in
                    // The running call may have ended meanwhile: then the turn is this one's.
                    guard queues[key] != nil else {
                        queues[key] = []
                        return false
                    }
                    queues[key]!.append(waiter)
                    return true
                }
                guard queued else {
                    waiter.resume(.success(()))
                    return
                }
                // Cancelled before the handler could see the waiter.
                if Task.isCancelled { leave(waiter, of: key, with: CancellationError()) }
            }
        } onCancel: {
            if let waiter = holder.withLock({ $0 }) { leave(waiter, of: key, with: CancellationError()) }
        }
    }

    /// Takes `waiter` out of `key`'s queue and ends its wait with `error`, if it still waits.
    private func leave(_ waiter: Waiter, of key: Int64, with error: any Error) {
        let removed = queues.withLock { queues -> Bool in
            guard let index = queues[key]?.firstIndex(where: { $0 === waiter }) else { return false }
            queues[key]!.remove(at: index)
            return true
        }
        if removed { waiter.resume(.failure(error)) }
    }

    /// The running call of `key` has ended: the oldest waiter goes next, or the key is free.
    private func pass(_ key: Int64) {
        let next = queues.withLock { queues -> Waiter? in
            guard var waiting = queues[key], !waiting.isEmpty else {
                queues[key] = nil
                return nil
            }
            let next = waiting.removeFirst()
            queues[key] = waiting
            return next
        }
        next?.resume(.success(()))
    }
}
