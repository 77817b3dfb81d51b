import Synchronization
import Testing
import TicksProtocol
import TicksTestSupport

@testable import TicksServer

/// Calls of one key run one at a time, first come first served; other keys do
/// not wait; a call left at its deadline or cancelled while it waits leaves
/// the queue and never runs; the calls queued behind a turn take the next one
/// together where each may (`Turns`: PostgreSQL's sends into one channel).
@Suite("Turns")
struct TurnsTests {
    /// A call: its name, whether it may share a turn, and what it does.
    struct Call: Sendable {
        var name: String
        var groupable = false
        var body: @Sendable () async throws -> Void = {}
    }

    /// Turns that run a call alone or a turn's calls one after the other, logging each turn's names.
    static func turns(log: Log, limit: Int = 16) -> Turns<Call> {
        Turns(
            limit: limit, groupable: { $0.groupable },
            runNow: { call in
                try await call.body()
                return call.name
            },
            runQueued: { _, calls in
                log.turn(calls.map(\.name))
                var outcomes: [Turns<Call>.Outcome] = []
                for call in calls {
                    do {
                        try await call.body()
                        outcomes.append(.success(call.name))
                    } catch {
                        outcomes.append(.failure(error))
                    }
                }
                return outcomes
            })
    }

    /// A call of `key` that says when it runs and then holds its turn until `release` finishes.
    private static func holding(
        _ turns: Turns<Call>, _ key: Int64, name: String, log: Log, release: AsyncStream<Void>
    ) -> Task<Void, any Error> {
        Task {
            _ = try await turns.inTurn(
                key,
                Call(name: name) {
                    log.add(name)
                    for await _ in release {}
                })
        }
    }

    final class Log: Sendable {
        let names = Mutex<[String]>([])
        let turns = Mutex<[[String]]>([])
        func add(_ name: String) { names.withLock { $0.append(name) } }
        func turn(_ names: [String]) { turns.withLock { $0.append(names) } }
        var all: [String] { names.withLock { $0 } }
        var allTurns: [[String]] { turns.withLock { $0 } }
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
    private static func waiting(_ turns: Turns<Call>, _ key: Int64, _ count: Int) async throws {
        try await until { turns.waitingCount(key) == count }
    }

    @Test("one key: one at a time, in the order they came; another key does not wait")
    func inOrder() async throws {
        let log = Log()
        let turns = Self.turns(log: log)
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
        let log = Log()
        let turns = Self.turns(log: log)
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
        let log = Log()
        let turns = Self.turns(log: log)
        let (first, releaseFirst) = AsyncStream.makeStream(of: Void.self)
        let running = Self.holding(turns, 3, name: "first", log: log, release: first)
        try await Self.until { log.all == ["first"] }
        let late = Task {
            try await deadline.run { _ = try await turns.inTurn(3, Call(name: "late") { log.add("late") }) }
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

    /// Queues `calls` behind a call of `key` held until the returned release, each after the one
    /// before is queued; the tasks answer each call's value.
    private static func queued(
        _ turns: Turns<Call>, _ key: Int64, log: Log, _ calls: [Call]
    ) async throws -> (release: AsyncStream<Void>.Continuation, first: Task<Void, any Error>, tasks: [Task<String, any Error>]) {
        let (stream, release) = AsyncStream.makeStream(of: Void.self)
        let first = Self.holding(turns, key, name: "first", log: log, release: stream)
        try await Self.until { log.all == ["first"] }
        var tasks: [Task<String, any Error>] = []
        for (n, call) in calls.enumerated() {
            tasks.append(Task { try #require(try await turns.inTurn(key, call) as? String) })
            try await Self.waiting(turns, key, n + 1)
        }
        return (release, first, tasks)
    }

    @Test("the calls queued behind a turn take the next together, in order, up to the limit; one that may not share runs alone")
    func groups() async throws {
        let log = Log()
        let turns = Self.turns(log: log, limit: 3)
        let names = ["g1", "g2", "a3", "g4", "g5", "g6", "g7"]
        let (release, first, tasks) = try await Self.queued(
            turns, 5, log: log, names.map { Call(name: $0, groupable: $0.hasPrefix("g")) })
        #expect(log.allTurns.isEmpty, "nothing queued runs while the first holds its turn")
        release.finish()
        try await first.value
        for (task, name) in zip(tasks, names) {
            #expect(try await task.value == name, "each caller gets its own call's value")
        }
        #expect(log.allTurns == [["g1", "g2"], ["a3"], ["g4", "g5", "g6"], ["g7"]])
        #expect(turns.statistics == .init(groups: 2, groupedCalls: 5))
        #expect(turns.busyKeys == 0)
    }

    @Test("a call of a group that fails fails its own caller alone")
    func failureIsItsOwn() async throws {
        struct Refused: Error {}
        let log = Log()
        let turns = Self.turns(log: log)
        let (release, first, tasks) = try await Self.queued(
            turns, 6, log: log,
            [Call(name: "g1", groupable: true), Call(name: "g2", groupable: true) { throw Refused() },
             Call(name: "g3", groupable: true)])
        release.finish()
        try await first.value
        #expect(try await tasks[0].value == "g1")
        await #expect(throws: Refused.self) { try await tasks[1].value }
        #expect(try await tasks[2].value == "g3")
        #expect(log.allTurns == [["g1", "g2", "g3"]])
    }

    @Test("a caller cancelled while its group runs is answered at once; the group runs on and the others get theirs")
    func cancelledInAGroup() async throws {
        let log = Log()
        let turns = Self.turns(log: log)
        let (inside, leaveGroup) = AsyncStream.makeStream(of: Void.self)
        let (release, first, tasks) = try await Self.queued(
            turns, 8, log: log,
            [Call(name: "g1", groupable: true) {
                log.add("g1 runs")
                for await _ in inside {}
             }, Call(name: "g2", groupable: true) { log.add("g2 runs") }])
        release.finish()
        try await first.value
        try await Self.until { log.all.contains("g1 runs") }
        tasks[0].cancel()
        await #expect(throws: CancellationError.self) { try await tasks[0].value }
        #expect(!log.all.contains("g2 runs"), "the group still runs g1")
        leaveGroup.finish()
        #expect(try await tasks[1].value == "g2")
        try await Self.until { turns.busyKeys == 0 }
    }
}
