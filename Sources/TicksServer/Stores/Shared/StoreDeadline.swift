import NIOCore
import Synchronization
import TicksProtocol

/// How long a caller waits on the store: past `timeout`, or at once when the
/// database cannot be reached, the call fails with `StoreError.unavailable`
/// and the request is answered 503 with `Retry-After` (docs/operations.md,
/// "When the database goes away").
///
/// The caller stops waiting at the deadline even if the work under it never
/// ends. That is not hypothetical: postgres-nio 1.33 writes a statement sent
/// on a connection that has just closed to the closed channel and leaves its
/// promise pending for ever, and a statement on a connection behind a silent
/// network partition waits as long as TCP does (minutes). So the work runs
/// in a task of its own, which the deadline cancels and leaves, after it has
/// run the expiry actions registered for the call (`StoreDeadline.expiry`):
/// PostgreSQL's closes the call's connection, so the work fails and the pool
/// drops the connection. Its outcome is unknown to the caller; every call
/// that may end so is safe to repeat (docs/operations.md).
///
/// One watch serves every call of a deadline (`DeadlineWatch`), not a timer
/// per call: a timer set and cancelled on every store call cost a tenth of
/// the server's CPU at 1,000 receipts/s (issue 39, BENCHMARKS.md).
public struct StoreDeadline: Sendable {
    /// What one store call may take. Five seconds by default: two orders of
    /// magnitude above a receipt's p99 at saturation (BENCHMARKS.md), below
    /// the HTTP timeouts of Stream's SDKs (6 s in stream-chat-python), so a
    /// client gets the 503 before it gives up on its own.
    public let timeout: Duration
    /// The clock the deadline runs on (a test's clock in tests).
    public let time: TimeSource
    /// The calls waiting, shared by the copies of this deadline.
    private let watcher: DeadlineWatch

    public static let defaultTimeout: Duration = .seconds(5)

    public init(timeout: Duration = StoreDeadline.defaultTimeout, time: TimeSource = .system) {
        self.timeout = timeout
        self.time = time
        self.watcher = DeadlineWatch(time: time)
    }

    /// The calls waiting for their work or their deadline (for tests).
    var waitingCalls: Int { watcher.waiting }

    /// Leaves `call` at this deadline from now unless it is settled first: for a
    /// caller that waits on something other than `run`'s work (`MoveBatcher`'s queue).
    func watch(_ call: some DeadlineCall) {
        watcher.add(call, until: time.now + timeout)
    }

    /// A lease on this deadline for work that its caller runs in its own task, with no task of
    /// its own (`DeadlineLease`), from now. At the deadline the lease's expiry actions run (the
    /// connection closes) and then `expired`, which must not wait for the work: it may never end.
    func lease(expired: @escaping @Sendable () -> Void) -> DeadlineLease {
        let lease = DeadlineLease(timeout: timeout, expired: expired)
        watch(lease)
        return lease
    }

    /// What a call that reached its deadline does before it is left: registered by the
    /// engine that runs it (the connection to close), in the call's task.
    @TaskLocal static var expiry: Expiry?

    /// Actions to run if the current call is left at its deadline.
    final class Expiry: Sendable {
        private struct State {
            var expired = false
            var next = 0
            var actions: [Int: @Sendable () -> Void] = [:]
        }

        private let state = Mutex(State())

        /// Runs `action` if the call is left at its deadline before `forget` is
        /// called with what this returns (at once if it already was): for a
        /// resource the call holds only so long.
        func register(_ action: @escaping @Sendable () -> Void) -> Int? {
            let id = state.withLock { state -> Int? in
                guard !state.expired else { return nil }
                state.next += 1
                state.actions[state.next] = action
                return state.next
            }
            if id == nil { action() }
            return id
        }

        func forget(_ id: Int?) {
            guard let id else { return }
            _ = state.withLock { $0.actions.removeValue(forKey: id) }
        }

        fileprivate func expire() {
            let actions = state.withLock { state -> [@Sendable () -> Void] in
                state.expired = true
                defer { state.actions = [:] }
                return Array(state.actions.values)
            }
            for action in actions { action() }
        }
    }

    /// `operation`'s result, or `StoreError.unavailable` once `timeout` has
    /// passed; a caller that is cancelled stops waiting too. `leftover` gets
    /// a value the work made after its caller stopped waiting (at the deadline,
    /// or cancelled), which no one else holds: a connection to close, which
    /// postgres-nio may not drop open.
    func run<T: Sendable>(
        _ operation: @escaping @Sendable () async throws -> T,
        leftover: (@Sendable (T) async -> Void)? = nil
    ) async throws -> T {
        let race = Race<T>(timeout: timeout)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                race.start(continuation)
                let work = Task {
                    do {
                        let value = try await StoreDeadline.$expiry.withValue(race.expiry) { try await operation() }
                        if !race.settle(.success(value)), let leftover { await leftover(value) }
                    } catch {
                        race.settle(.failure(error))
                    }
                }
                race.hold(work)
                watch(race)
            }
        } onCancel: {
            race.settle(.failure(CancellationError()))
        }
    }
}

/// Work run in its caller's own task under a deadline (`StoreDeadline.lease(expired:)`): no
/// task of its own, so no wait for one to start on a busy core. `MoveBatcher`'s lane runs each
/// batch so: a task a batch waited 212–305 µs to start on the node's one busy core at 1,000
/// receipts/s on PostgreSQL (benchmarks-history.md, 2026-12-05). The deadline cannot resume a
/// caller whose work never ends (the statement postgres-nio leaves unanswered, `StoreDeadline`),
/// so the caller is one that can be left in place: at the deadline, `expired` gives the lane's
/// place to a new lane, and the old one, if its work ever ends, sees the lease ended and stops.
final class DeadlineLease: DeadlineCall {
    private enum Phase {
        case running, ended, expired
    }

    private let phase = Mutex(Phase.running)
    private let timeout: Duration
    private let expired: @Sendable () -> Void
    /// What the work registered to run if it is left at its deadline (its connection's close).
    let expiry = StoreDeadline.Expiry()

    fileprivate init(timeout: Duration, expired: @escaping @Sendable () -> Void) {
        self.timeout = timeout
        self.expired = expired
    }

    var isSettled: Bool { phase.withLock { $0 != .running } }

    /// Whether the deadline left the work.
    var isExpired: Bool { phase.withLock { $0 == .expired } }

    func expire() {
        let expiring = phase.withLock { phase -> Bool in
            guard phase == .running else { return false }
            phase = .expired
            return true
        }
        guard expiring else { return }
        expiry.expire()
        expired()
    }

    /// Ends the lease: true if the work ended first, false if the deadline had left it
    /// (`expired` was called, or is being called).
    func end() -> Bool {
        phase.withLock { phase in
            if phase == .running { phase = .ended }
            return phase == .ended
        }
    }

    /// `body`'s value, run here with the lease's expiry actions; if the deadline left it
    /// meanwhile, `StoreError.unavailable` whatever the body made of it (its connection closed
    /// under it, or a value no caller waits for).
    func run<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        let timedOut = StoreError.unavailable(.timedOut(timeout))
        do {
            let value = try await StoreDeadline.$expiry.withValue(expiry) { try await body() }
            if isExpired { throw timedOut }
            return value
        } catch {
            if isExpired { throw timedOut }
            throw error
        }
    }
}

/// A call that a deadline may leave (`StoreDeadline.watch`).
protocol DeadlineCall: AnyObject, Sendable {
    /// Whether its work or its caller's cancellation has answered it.
    var isSettled: Bool { get }
    /// Leaves it: its caller is answered 503, its expiry actions run, its work is cancelled.
    func expire()
}

/// The calls of one `StoreDeadline` waiting, oldest first, and one task that
/// sleeps until the oldest one's deadline, leaves the calls whose deadline
/// has passed, and ends when no call waits. Calls answered are dropped from
/// the front as new ones arrive, so the queue holds at most the calls of one
/// timeout. All calls of a deadline have the same timeout and the clock only
/// goes forward, so the oldest call's deadline is the first.
private final class DeadlineWatch: Sendable {
    private struct Waiting {
        var deadline: Duration
        var call: any DeadlineCall
    }

    private struct State {
        var queue = CircularBuffer<Waiting>()
        /// Whether the watching task runs (it ends when the queue is empty).
        var watching = false
    }

    private let time: TimeSource
    private let state = Mutex(State())

    init(time: TimeSource) {
        self.time = time
    }

    var waiting: Int { state.withLock { $0.queue.count { !$0.call.isSettled } } }

    func add(_ call: some DeadlineCall, until deadline: Duration) {
        let start = state.withLock { state -> Bool in
            while let first = state.queue.first, first.call.isSettled { state.queue.removeFirst() }
            state.queue.append(Waiting(deadline: deadline, call: call))
            defer { state.watching = true }
            return !state.watching
        }
        // Detached: it serves every caller, and carries none's task-locals (a trace's context).
        if start { Task.detached { await self.watchUntilEmpty() } }
    }

    private func watchUntilEmpty() async {
        while true {
            let now = time.now
            let (due, next) = state.withLock { state -> ([any DeadlineCall], Duration?) in
                var due: [any DeadlineCall] = []
                while let first = state.queue.first, first.call.isSettled || first.deadline <= now {
                    let call = state.queue.removeFirst().call
                    if !call.isSettled { due.append(call) }
                }
                guard let first = state.queue.first else {
                    state.watching = false
                    return (due, nil)
                }
                return (due, first.deadline)
            }
            for call in due { call.expire() }
            guard let next else { return }
            // Not cancellable: this task is nobody's child and ends by itself.
            try? await time.sleep(until: next)
        }
    }
}

/// One caller waiting for the first of its work and its deadline: the first
/// to settle resumes it and cancels the work.
private final class Race<T: Sendable>: DeadlineCall {
    private struct State {
        var continuation: CheckedContinuation<T, any Error>?
        /// Settled before the continuation was there (cancelled at once).
        var early: Result<T, any Error>?
        var work: Task<Void, Never>?
        var settled = false
    }

    private let state = Mutex(State())
    private let timeout: Duration
    /// What the work registered to run if it is left at its deadline.
    let expiry = StoreDeadline.Expiry()

    init(timeout: Duration) {
        self.timeout = timeout
    }

    var isSettled: Bool { state.withLock { $0.settled } }

    func start(_ continuation: CheckedContinuation<T, any Error>) {
        let early = state.withLock { state -> Result<T, any Error>? in
            guard let early = state.early else {
                state.continuation = continuation
                return nil
            }
            return early
        }
        if let early { continuation.resume(with: early) }
    }

    /// Keeps the work to cancel once settled (cancels it now if it is).
    func hold(_ work: Task<Void, Never>) {
        let settled = state.withLock { state -> Bool in
            if !state.settled { state.work = work }
            return state.settled
        }
        if settled { work.cancel() }
    }

    func expire() {
        if settle(.failure(StoreError.unavailable(.timedOut(timeout)))) { expiry.expire() }
    }

    /// Resumes the caller with `result` unless it was already; whether this call did.
    @discardableResult
    func settle(_ result: Result<T, any Error>) -> Bool {
        let taken = state.withLock { state -> (CheckedContinuation<T, any Error>?, Task<Void, Never>?)? in
            guard !state.settled else { return nil }
            state.settled = true
            let taken = (state.continuation, state.work)
            state.continuation = nil
            state.work = nil
            if taken.0 == nil { state.early = result }
            return taken
        }
        guard let (continuation, work) = taken else { return false }
        work?.cancel()
        continuation?.resume(with: result)
        return true
    }
}
