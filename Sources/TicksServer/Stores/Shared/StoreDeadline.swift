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
public struct StoreDeadline: Sendable {
    /// What one store call may take. Five seconds by default: two orders of
    /// magnitude above a receipt's p99 at saturation (BENCHMARKS.md), below
    /// the HTTP timeouts of Stream's SDKs (6 s in stream-chat-python), so a
    /// client gets the 503 before it gives up on its own.
    public var timeout: Duration
    /// The clock the deadline runs on (a test's clock in tests).
    public var time: TimeSource

    public static let defaultTimeout: Duration = .seconds(5)

    public init(timeout: Duration = StoreDeadline.defaultTimeout, time: TimeSource = .system) {
        self.timeout = timeout
        self.time = time
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
    /// passed; a caller that is cancelled stops waiting too.
    func run<T: Sendable>(_ operation: @escaping @Sendable () async throws -> T) async throws -> T {
        let race = Race<T>()
        let expiry = Expiry()
        let timeout = timeout
        let time = time
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                race.start(continuation)
                let timer = Task {
                    do { try await time.sleep(for: timeout) } catch { return }
                    if race.settle(.failure(StoreError.unavailable(.timedOut(timeout)))) { expiry.expire() }
                }
                let work = Task {
                    do {
                        let value = try await StoreDeadline.$expiry.withValue(expiry) { try await operation() }
                        race.settle(.success(value))
                    } catch {
                        race.settle(.failure(error))
                    }
                }
                race.hold(work, timer)
            }
        } onCancel: {
            race.settle(.failure(CancellationError()))
        }
    }
}

/// One caller waiting for the first of its work and its deadline: the first
/// to settle resumes it and cancels the other.
private final class Race<T: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<T, any Error>?
        /// Settled before the continuation was there (cancelled at once).
        var early: Result<T, any Error>?
        var tasks: [Task<Void, Never>] = []
        var settled = false
    }

    private let state = Mutex(State())

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

    /// Keeps the tasks to cancel once settled (cancels them now if it is).
    func hold(_ tasks: Task<Void, Never>...) {
        let settled = state.withLock { state -> Bool in
            if !state.settled { state.tasks = tasks }
            return state.settled
        }
        if settled { tasks.forEach { $0.cancel() } }
    }

    /// Resumes the caller with `result` unless it was already; whether this call did.
    @discardableResult
    func settle(_ result: Result<T, any Error>) -> Bool {
        let taken = state.withLock { state -> (CheckedContinuation<T, any Error>?, [Task<Void, Never>])? in
            guard !state.settled else { return nil }
            state.settled = true
            let taken = (state.continuation, state.tasks)
            state.continuation = nil
            state.tasks = []
            if taken.0 == nil { state.early = result }
            return taken
        }
        guard let (continuation, tasks) = taken else { return false }
        tasks.forEach { $0.cancel() }
        continuation?.resume(with: result)
        return true
    }
}
