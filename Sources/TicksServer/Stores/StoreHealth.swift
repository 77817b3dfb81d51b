import Logging
import Synchronization
import TicksProtocol

/// Whether the store answers: unreachable from the first call that found the
/// database away (`StoreError.unavailable`) until the next call it answers.
/// `GET /admin/status` and `/metrics` show it, and its changes are logged
/// once each, not once a request.
public final class StoreHealth: Sendable {
    private struct State {
        var unreachableSince: Timestamp?
        var reason: String?
        /// Why the store is away, while it is.
        var why: StoreError.Unavailability?
        /// A probe watches the database while it is away and says when it is back (`probeAnswered`).
        var probed = false
        /// Calls that failed as unavailable since the start.
        var unavailableCalls = 0
        /// Those of them that waited out the store's deadline.
        var timedOutCalls = 0
        /// Failures recorded since the start (`failed`): a call's `Mark` is this count when it began.
        var failures = 0
        /// Transactions run again since the start, by why (`StoreRetry`).
        var retries: [StoreRetry: Int] = [:]
    }

    private let state = Mutex(State())
    private let time: TimeSource
    private let logger: Logger

    public init(time: TimeSource = .system, logger: Logger = Logger(label: "ticks.store")) {
        self.time = time
        self.logger = logger
    }

    /// Since when the store has been unreachable; nil while it answers.
    public var unreachableSince: Timestamp? { state.withLock { $0.unreachableSince } }

    /// Why the last call failed, while it is unreachable.
    public var reason: String? { state.withLock { $0.reason } }

    /// Why the last call failed, while it is unreachable, as the store said it.
    var reasonWhy: StoreError.Unavailability? { state.withLock { $0.why } }

    /// Calls that failed because the store was unavailable, since the start.
    public var unavailableCalls: Int { state.withLock { $0.unavailableCalls } }

    /// Calls that waited out the store's deadline, since the start: among the
    /// unavailable calls, those that held their caller for the whole timeout
    /// (the others failed at once: refused, dropped, or known to be away).
    public var timedOutCalls: Int { state.withLock { $0.timedOutCalls } }

    /// Transactions PostgreSQL aborted and the store ran again since the start, by why.
    public func retries(_ reason: StoreRetry) -> Int { state.withLock { $0.retries[reason] ?? 0 } }

    /// A probe (PostgreSQL's pool) will watch the database while it is away:
    /// from then on, calls made while the store is known to be away fail at
    /// once (`awayWhileProbed()`) rather than each waiting out its deadline,
    /// and the probe says when it is back.
    func probing() {
        state.withLock { $0.probed = true }
    }

    /// Why the store is away, while it is and a probe watches it: a call then
    /// fails at once with this (and is counted as unavailable), without
    /// reaching for the database. Nil while the store answers, or when nothing
    /// probes it (SQLite: each call finds out for itself).
    func awayWhileProbed() -> StoreError.Unavailability? {
        state.withLock { state in
            guard state.probed, state.unreachableSince != nil else { return nil }
            state.unavailableCalls += 1
            return state.why
        }
    }

    /// The probe found the database answering: calls reach for it again.
    func probeAnswered() {
        clear()
    }

    /// A transaction was aborted by a conflict with another writer and runs again.
    func retried(_ reason: StoreRetry) {
        state.withLock { $0.retries[reason, default: 0] += 1 }
    }

    /// When a call began, as far as the health can tell: how many failures
    /// it had heard of (`began()`, then `answered(since:)`).
    struct Mark: Sendable {
        fileprivate let failures: Int
    }

    /// A call begins: its answer will say the store is back only if nothing
    /// failed since (`answered(since:)`).
    func began() -> Mark {
        Mark(failures: state.withLock { $0.failures })
    }

    /// A call failed: the database is away (or too slow to count as there).
    func failed(_ why: StoreError.Unavailability) {
        let now = time.wallNow
        let began = state.withLock { state -> Bool in
            state.unavailableCalls += 1
            if case .timedOut = why { state.timedOutCalls += 1 }
            state.failures += 1
            state.reason = why.description
            state.why = why
            guard state.unreachableSince == nil else { return false }
            state.unreachableSince = now
            return true
        }
        if began {
            logger.warning(
                "the store is unreachable: requests that need it are answered 503 until it is back",
                metadata: ["reason": "\(why)"])
        }
    }

    /// A call that began at `mark` was answered. It says the store is back
    /// only if no call failed after it began: a call already under way when
    /// the database went away (a commit whose answer was read after another
    /// connection was dropped) says nothing of the store since, and must not
    /// send the calls that follow to wait out their deadline on a database
    /// that is gone (issue 55: two 503s at the deadline while PostgreSQL was
    /// stopped, after the node knew it was away).
    func answered(since mark: Mark) {
        // The common case reads two words under the lock and changes nothing.
        guard let since = state.withLock({ state -> Timestamp? in
            guard state.failures == mark.failures else { return nil }
            return clearing(&state)
        }) else { return }
        logBack(since)
    }

    private func clear() {
        guard let since = state.withLock({ clearing(&$0) }) else { return }
        logBack(since)
    }

    /// Clears the unreachable state; since when it had been, if it was.
    private func clearing(_ state: inout State) -> Timestamp? {
        defer {
            state.unreachableSince = nil
            state.reason = nil
            state.why = nil
        }
        return state.unreachableSince
    }

    private func logBack(_ since: Timestamp) {
        let seconds = Double(time.wallNow.microseconds - since.microseconds) / 1_000_000
        logger.notice("the store answers again", metadata: ["unreachable_seconds": "\(seconds)"])
    }
}

/// Why PostgreSQL aborted a transaction that the store runs again: concurrent
/// writers that waited for each other in a circle, or (in a REPEATABLE READ
/// or SERIALIZABLE transaction) a conflict with a commit it could not see.
public enum StoreRetry: String, Sendable, CaseIterable {
    case deadlock
    case serialization
}
