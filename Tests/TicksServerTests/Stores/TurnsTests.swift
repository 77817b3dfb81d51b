import Synchronization
import Testing
import TicksProtocol
import TicksTestSupport

@testable import TicksServer

/// Calls of one key run one at a time, first come first served; other keys do
/// not wait; a call left at its deadline or cancelled while it waits leaves
/// the queue and never runs (`Turns`: PostgreSQL's sends into one channel).
@Suite("Turns")
struct TurnsTests {
    /// A call of `key` that says when it runs and then holds its turn until `release` finishes.
    private static func holding(
        _ turns: Turns, _ key: Int64, name: String, log: Log, release: AsyncStream<Void>
    ) -> Task<Void, any Error> {
        Task {
            try await turns.inTurn(key) {
                log.add(name)
                for await _ in release {}
            }
        }
    }

    final class Log: Sendable {
        let names = Mutex<[String]>([])
        func add(_ name: String) { names.withLock { $0.append(name) } }
        var all: [String] { names.withLock { $0 } }
    }

    /// Waits until `condition` holds (a positive wait: it ends as soon as it does), failing past the suite's patience.
    private static func until(sourceLocation: SourceLocation = #_sourceLocation, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + Patience.wait
        while !condition() {
            try #require(ContinuousClock.now < deadline, "the condition never held", sourceLocation: sourceLocation)
            await Task.yield()
        }
    }

    /// Until `count` calls of `key` wait.
    private static func waiting(_ turns: Turns, _ key: Int64, _ count: Int) async throws {
        try await until { turns.waitingCount(key) == count }
    }

    @Test("one key: one at a time, in the order they came; another key does not wait")
    func inOrder() async throws {
        let turns = Turns()
        let log = Log()
        var releases: [AsyncStream<Void>.Continuation] = []
        var tasks: [Task<Void, any Error>] = []
        for n in 0..<5 {
            let (stream, release) = AsyncStream.makeStream(of: Void.self)
            releases.append(release)
            tasks.append(Self.holding(turns, 1, name: "c\(n)", log: log, release: stream))
            // Each comes after the one before is running or queued.
            try await Self.until { log.all.count + turns.waitingCount(1) == n + 1 }
        }
        #expect(log.all == ["c0"], "the others wait for the first")
        // Another key runs at once, beside them.
        let (other, releaseOther) = AsyncStream.makeStream(of: Void.self)
        let otherTask = Self.holding(turns, 2, name: "other", log: log, release: other)
        try await Self.until { log.all.contains("other") }
        releaseOther.finish()
        try await otherTask.value
        for n in 0..<5 {
            releases[n].finish()
            try await tasks[n].value
            if n < 4 { try await Self.until { log.all.count == n + 3 } }
        }
        #expect(log.all == ["c0", "other", "c1", "c2", "c3", "c4"])
        #expect(turns.busyKeys == 0, "no key is left busy")
    }

    @Test("a waiter cancelled leaves the queue and never runs; the next still gets its turn")
    func cancelledWaiter() async throws {
        let turns = Turns()
        let log = Log()
        let (first, releaseFirst) = AsyncStream.makeStream(of: Void.self)
        let running = Self.holding(turns, 7, name: "first", log: log, release: first)
        try await Self.until { log.all == ["first"] }
        let (never, _) = AsyncStream.makeStream(of: Void.self)
        let cancelled = Self.holding(turns, 7, name: "cancelled", log: log, release: never)
        try await Self.waiting(turns, 7, 1)
        let (last, releaseLast) = AsyncStream.makeStream(of: Void.self)
        let next = Self.holding(turns, 7, name: "next", log: log, release: last)
        try await Self.waiting(turns, 7, 2)
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        #expect(turns.waitingCount(7) == 1)
        releaseFirst.finish()
        try await running.value
        try await Self.until { log.all == ["first", "next"] }
        releaseLast.finish()
        try await next.value
        #expect(log.all == ["first", "next"] && turns.busyKeys == 0)
    }

    @Test("a waiter left at its deadline leaves the queue at once and never runs")
    func leftAtItsDeadline() async throws {
        let clock = ManualClock()
        let deadline = StoreDeadline(timeout: .seconds(5), time: clock.timeSource)
        let turns = Turns()
        let log = Log()
        let (first, releaseFirst) = AsyncStream.makeStream(of: Void.self)
        let running = Self.holding(turns, 3, name: "first", log: log, release: first)
        try await Self.until { log.all == ["first"] }
        let late = Task {
            try await deadline.run { try await turns.inTurn(3) { log.add("late") } }
        }
        try await Self.waiting(turns, 3, 1)
        while clock.sleepers < 1 { await Task.yield() }
        clock.advance(by: .seconds(5))
        await #expect(throws: StoreError.unavailable(.timedOut(.seconds(5)))) { try await late.value }
        try await Self.waiting(turns, 3, 0)
        releaseFirst.finish()
        try await running.value
        #expect(log.all == ["first"], "the call left at its deadline never ran")
        #expect(turns.busyKeys == 0)
    }
}
