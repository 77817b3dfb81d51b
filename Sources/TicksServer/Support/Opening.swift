import Synchronization

/// A door that opens once: `wait()` returns when it is open (at once if it already is), or
/// throws `CancellationError` when the waiting task is cancelled first. Any number may wait.
final class Opening: Sendable {
    private enum State {
        case closed(waiters: [Int: CheckedContinuation<Void, any Error>], nextID: Int)
        case open
    }

    private let state = Mutex(State.closed(waiters: [:], nextID: 0))

    /// Opens the door and lets every waiter through; later calls do nothing.
    func open() {
        let waiters = state.withLock { state in
            guard case .closed(let waiters, _) = state else { return [CheckedContinuation<Void, any Error>]() }
            state = .open
            return Array(waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    func wait() async throws {
        let id = state.withLock { state -> Int? in
            guard case .closed(let waiters, let nextID) = state else { return nil }
            state = .closed(waiters: waiters, nextID: nextID + 1)
            return nextID
        }
        guard let id else { return }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                // Open meanwhile, or cancelled before this ran: resume at once; else wait to be.
                let resumeNow: Result<Void, any Error>? = state.withLock { state in
                    guard case .closed(var waiters, let nextID) = state else { return .success(()) }
                    if Task.isCancelled { return .failure(CancellationError()) }
                    waiters[id] = continuation
                    state = .closed(waiters: waiters, nextID: nextID)
                    return nil
                }
                if let resumeNow { continuation.resume(with: resumeNow) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                guard case .closed(var waiters, let nextID) = state else { return nil }
                let waiter = waiters.removeValue(forKey: id)
                state = .closed(waiters: waiters, nextID: nextID)
                return waiter
            }
            waiter?.resume(throwing: CancellationError())
        }
    }
}
