import Logging
import ServiceLifecycle
import Testing
import TicksTestSupport

@testable import TicksServer

/// `runWithShutdownBound`, on a manual clock: a group whose graceful shutdown ends in time ends as
/// it would without the bound; one that does not is cancelled once the bound has passed, and the
/// error names what it still waited for.
@Suite("Shutdown bound", .timeLimit(.minutes(10)))
struct ShutdownBoundTests {
    /// Ends on graceful shutdown, as a service should.
    struct Obliging: Service {
        func run() async throws {
            try? await gracefulShutdown()
        }
    }

    /// Ignores graceful shutdown; ends only when cancelled.
    struct Stubborn: Service {
        func run() async throws {
            let (never, _) = AsyncStream.makeStream(of: Void.self)
            for await _ in never {}
        }
    }

    func run(_ services: [any Service], bound: Duration, clock: ManualClock, readiness: NodeReadiness)
        -> (ServiceGroup, Task<(any Error)?, Never>)
    {
        let logger = Logger(label: "test")
        let tracked = services.map { readiness.tracked($0, name: serviceName($0)) }
        let group = ServiceGroup(configuration: .init(services: tracked, gracefulShutdownSignals: [], logger: logger))
        let running = Task { () -> (any Error)? in
            do {
                try await runWithShutdownBound(
                    group, readiness: readiness, bound: bound, time: clock.timeSource, logger: logger)
                return nil as (any Error)?
            } catch {
                return error
            }
        }
        return (group, running)
    }

    @Test("a shutdown that ends in time ends as without the bound, and the bound's timer goes with it")
    func inTime() async throws {
        let clock = ManualClock()
        let readiness = NodeReadiness()
        let (group, running) = run([Obliging(), Obliging()], bound: .seconds(15), clock: clock, readiness: readiness)
        try await eventually { readiness.unfinished == ["Obliging", "Obliging"] }
        readiness.drain()
        await group.triggerGracefulShutdown()
        #expect(await running.value == nil)
        #expect(readiness.unfinished.isEmpty)
        #expect(clock.sleepers == 0)
    }

    @Test("past the bound, what is left is cancelled and named; not a moment before")
    func overrun() async throws {
        let clock = ManualClock()
        let readiness = NodeReadiness()
        let (group, running) = run([Stubborn(), Obliging()], bound: .seconds(15), clock: clock, readiness: readiness)
        try await eventually { readiness.unfinished.count == 2 }
        // The bound counts from the drain, not from the start. The group stops its services last
        // first: Obliging ends, then Stubborn holds it.
        clock.advance(by: .seconds(60))
        readiness.drain()
        await group.triggerGracefulShutdown()
        try await eventually { clock.sleepers == 1 && readiness.unfinished == ["Stubborn"] }
        clock.advance(by: .seconds(14))
        // `advance` wakes every sleep that is due at once: the bound's still sleeping is not due.
        #expect(clock.sleepers == 1, "the bound woke before its time")
        #expect(readiness.unfinished == ["Stubborn"], "cancelled before the bound")
        clock.advance(by: .seconds(1))
        let error = try #require(await running.value as? ShutdownOverran)
        #expect(error.unfinished == ["Stubborn"])
        #expect(error.bound == .seconds(15))
        #expect(readiness.unfinished.isEmpty)
    }

    @Test("requests in flight are named")
    func requests() {
        let readiness = NodeReadiness()
        readiness.requestStarted()
        readiness.requestStarted()
        readiness.requestEnded()
        #expect(readiness.unfinished == ["requests in flight: 1"])
        readiness.requestEnded()
        #expect(readiness.unfinished.isEmpty)
    }
}
