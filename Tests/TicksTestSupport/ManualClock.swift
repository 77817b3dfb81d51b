import Synchronization
import TicksProtocol

/// A clock that moves only when a test advances it: code given it as its
/// `TimeSource` sleeps until the test says the time has come, so a test of a
/// throttle, a backoff or a timeout counts what happens per advanced period
/// exactly, however slow the machine is.
public final class ManualClock: Clock, Sendable {
    public struct Instant: InstantProtocol {
        /// Time since the clock was made.
        public var offset: Swift.Duration

        public func advanced(by duration: Swift.Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Swift.Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private struct Sleeper {
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now = Instant(offset: .zero)
        var nextID = 0
        var sleepers: [Int: Sleeper] = [:]
        /// Sleeps cancelled before they were registered.
        var cancelled: Set<Int> = []
    }

    private let state = Mutex(State())
    public init() {}

    public var now: Instant { state.withLock { $0.now } }
    public var minimumResolution: Swift.Duration { .zero }

    /// The wall-clock time on this clock: the system's plus how far the clock was advanced.
    ///
    /// The real time runs on beneath it, so what the code under test stamps
    /// with the system's time (a change's webhook calls) is never in this
    /// clock's future; waits of minutes or hours (a backoff) come only when
    /// the test advances the clock past them.
    public var wallNow: Timestamp {
        let offset = now.offset
        return Timestamp(microseconds: Timestamp.now().microseconds + offset.wholeMicroseconds)
    }

    /// The clock as a `TimeSource`, its wall time moving with it.
    public var timeSource: TimeSource { TimeSource(clock: self, wallNow: { [self] in wallNow }) }

    /// How many sleeps wait for the clock now.
    public var sleepers: Int { state.withLock { $0.sleepers.count } }

    /// The deadlines of the sleeps waiting now, as offsets from the clock's start, earliest first.
    public var deadlines: [Swift.Duration] { state.withLock { $0.sleepers.values.map(\.deadline.offset).sorted() } }

    public func sleep(until deadline: Instant, tolerance: Swift.Duration? = nil) async throws {
        try Task.checkCancellation()
        let id = state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let outcome = state.withLock { state -> Bool? in
                    if state.cancelled.remove(id) != nil { return false }
                    if deadline <= state.now { return true }
                    state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return nil
                }
                switch outcome {
                case true: continuation.resume()
                case false: continuation.resume(throwing: CancellationError())
                case nil: break
                }
            }
        } onCancel: {
            let sleeper = state.withLock { state -> Sleeper? in
                guard let sleeper = state.sleepers.removeValue(forKey: id) else {
                    state.cancelled.insert(id)
                    return nil
                }
                return sleeper
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves the clock forward, waking every sleep whose deadline has come.
    public func advance(by duration: Swift.Duration) {
        let woken = state.withLock { state -> [Sleeper] in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            let due = state.sleepers.filter { $0.value.deadline <= now }
            for id in due.keys { state.sleepers[id] = nil }
            return due.values.sorted { $0.deadline < $1.deadline }
        }
        for sleeper in woken { sleeper.continuation.resume() }
    }
}

extension Swift.Duration {
    /// The duration in whole microseconds (rounded toward zero).
    fileprivate var wholeMicroseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000 + attoseconds / 1_000_000_000_000
    }
}
