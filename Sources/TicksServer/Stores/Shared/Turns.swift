import Synchronization

/// Calls that name the same key run in turns on this node, in the order they
/// came; calls of other keys do not wait for them. The calls that queued
/// while a turn ran take the next turn together, as one group, as far as
/// each may (`groupable`, up to `limit`): PostgreSQL runs a group in one
/// transaction, with one commit (`PostgresEngine.runQueued`).
///
/// Why turns (PostgreSQL's sends, issue 57): a channel's messages are
/// numbered under its row lock, so sends into one channel run one at a time
/// whatever happens. Waiting for that lock inside PostgreSQL was the costly
/// way: each waiting statement holds its snapshot, so the versions the
/// running send leaves cannot be pruned (HOT updates fail, every index is
/// written, the tables grow), and a row lock's waiters are not served in
/// order, so some waited out the store's deadline (BENCHMARKS.md, "Sends
/// into one large channel"). Waiting here holds no connection and no
/// snapshot, and the first to come goes first. The row lock stays: it is
/// what keeps sends through several nodes in order.
///
/// Why groups: since the sends into a channel run one at a time, each paid
/// alone for what it could share: its BEGIN, the channel's row lock, and
/// the COMMIT's flush to disk, in round trips the channel's next send waited
/// for. A group pays for them once.
///
/// A call that finds its key free runs at once, alone, in its caller's task
/// (`runNow`). The calls queued behind it run in a task of the key's own,
/// started when the turn passes and kept while calls wait (`runQueued`,
/// which bounds its own work: no caller's deadline ends a group that holds
/// others). A call cancelled, or left at its deadline, while it waits leaves
/// the queue at once and never runs; one whose group has started is
/// answered at once with `CancellationError`, its outcome unknown.
final class Turns<Call: Sendable>: Sendable {
    typealias Outcome = Result<any Sendable, any Error>

    /// How the queued calls were grouped so far.
    struct Statistics: Sendable, Equatable {
        /// Turns that ran more than one call, and the calls they ran.
        var groups = 0
        var groupedCalls = 0
    }

    /// A call waiting, and its caller's continuation, resumed once.
    private final class Waiter: Sendable {
        let call: Call
        private let continuation: Mutex<CheckedContinuation<Reply, any Error>?>

        init(_ call: Call, _ continuation: CheckedContinuation<Reply, any Error>) {
            self.call = call
            self.continuation = Mutex(continuation)
        }

        func resume(_ result: Result<Reply, any Error>) {
            continuation.withLock { $0.take() }?.resume(with: result)
        }
    }

    /// What a caller is told: its turn has come (the key was free), or its call ran.
    private enum Reply: Sendable {
        case runNow
        case ran(any Sendable)
    }

    private struct State {
        /// Per key with a turn running: the calls waiting, oldest first. No entry: the key is free.
        var queues: [Int64: [Waiter]] = [:]
        var statistics = Statistics()

        /// The next turn's calls of `key`: the oldest waiting, and those after it while each may
        /// share its turn (all of them groupable), up to `limit`; nil, and the key freed, when none waits.
        mutating func next(of key: Int64, limit: Int, groupable: (Call) -> Bool) -> [Waiter]? {
            guard var waiting = queues[key], let first = waiting.first else {
                queues[key] = nil
                return nil
            }
            var count = 1
            if groupable(first.call) {
                while count < min(limit, waiting.count), groupable(waiting[count].call) { count += 1 }
            }
            let group = Array(waiting.prefix(count))
            waiting.removeFirst(count)
            queues[key] = waiting
            if count > 1 {
                statistics.groups += 1
                statistics.groupedCalls += count
            }
            return group
        }

        /// Takes `waiter` out of `key`'s queue; whether it was there.
        mutating func withdraw(_ waiter: Waiter, of key: Int64) -> Bool {
            guard let index = queues[key]?.firstIndex(where: { $0 === waiter }) else { return false }
            queues[key]!.remove(at: index)
            return true
        }
    }

    private let state = Mutex(State())
    private let limit: Int
    private let groupable: @Sendable (Call) -> Bool
    private let runNow: @Sendable (Call) async throws -> any Sendable
    private let runQueued: @Sendable (Int64, [Call]) async -> [Outcome]

    /// - Parameters:
    ///   - limit: calls in one group at most.
    ///   - groupable: whether a call may share a turn with the calls queued beside it.
    ///   - runNow: runs a call that found its key free, in its caller's task.
    ///   - runQueued: runs the calls of a key that take one turn (one or several), in the key's
    ///     own task, bounding its work itself; one outcome per call, in order.
    init(
        limit: Int = 16, groupable: @escaping @Sendable (Call) -> Bool,
        runNow: @escaping @Sendable (Call) async throws -> any Sendable,
        runQueued: @escaping @Sendable (Int64, [Call]) async -> [Outcome]
    ) {
        precondition(limit > 0)
        self.limit = limit
        self.groupable = groupable
        self.runNow = runNow
        self.runQueued = runQueued
    }

    /// Keys with a turn running (for tests: none once every call has ended).
    var busyKeys: Int { state.withLock { $0.queues.count } }

    /// The calls of `key` waiting for their turn (for tests).
    func waitingCount(_ key: Int64) -> Int { state.withLock { $0.queues[key]?.count ?? 0 } }

    var statistics: Statistics { state.withLock { $0.statistics } }

    /// `call`'s result, once the calls of `key` that came before it have ended.
    func inTurn(_ key: Int64, _ call: Call) async throws -> any Sendable {
        let holder = Mutex<Waiter?>(nil)
        let reply = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Reply, any Error>) in
                let waiter = Waiter(call, continuation)
                holder.withLock { $0 = waiter }
                let free = state.withLock { state -> Bool in
                    guard state.queues[key] != nil else {
                        state.queues[key] = []
                        return true
                    }
                    state.queues[key]!.append(waiter)
                    return false
                }
                if free {
                    waiter.resume(.success(.runNow))
                } else if Task.isCancelled {
                    // Cancelled before the handler could see the waiter.
                    leave(waiter, of: key)
                }
            }
        } onCancel: {
            if let waiter = holder.withLock({ $0 }) { leave(waiter, of: key) }
        }
        switch reply {
        case .ran(let value):
            return value
        case .runNow:
            defer { pass(key) }
            return try await runNow(call)
        }
    }

    /// Its caller stops waiting: out of the queue if it is there (it never runs), answered either way.
    private func leave(_ waiter: Waiter, of key: Int64) {
        _ = state.withLock { $0.withdraw(waiter, of: key) }
        waiter.resume(.failure(CancellationError()))
    }

    /// The call that ran at once has ended: the calls queued meanwhile run in the key's own
    /// task, turn after turn, until none waits; or the key is free.
    private func pass(_ key: Int64) {
        guard let first = state.withLock({ $0.next(of: key, limit: limit, groupable: groupable) }) else { return }
        // Detached: the turns serve many callers, and carry none's task-local values (a trace's context).
        Task.detached { [self] in
            var group = first
            while true {
                let outcomes = await runQueued(key, group.map(\.call))
                for (index, waiter) in group.enumerated() {
                    // One outcome per call, or a caller would wait for ever.
                    let outcome =
                        outcomes.count == group.count
                        ? outcomes[index]
                        : .failure(StoreError.inconsistent("\(outcomes.count) outcomes for a turn of \(group.count) calls"))
                    waiter.resume(outcome.map { .ran($0) })
                }
                guard let next = state.withLock({ $0.next(of: key, limit: limit, groupable: groupable) }) else { return }
                group = next
            }
        }
    }
}
