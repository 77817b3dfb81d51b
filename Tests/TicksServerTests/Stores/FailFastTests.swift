import Foundation
import Logging
import PostgresNIO
import Testing
import TicksProtocol
import TicksTestSupport

@testable import TicksServer

/// While the store is known to be away and a probe watches it, a call fails
/// at once instead of waiting out its deadline; the probe says when it is
/// back; a call waiting on a pool that is replaced runs on the new one
/// (docs/operations.md, "When the database goes away").
@Suite("Failing fast while the store is away")
struct FailFastTests {
    @Test("probed and known away: a call fails at once, without reaching the database, and is counted")
    func probedFailsAtOnce() async throws {
        // A deadline that would only pass if the test advanced its clock: a call that waited for it would hang.
        let store = try SQLStore.memory(deadline: StoreDeadline(timeout: .seconds(5), time: ManualClock().timeSource))
        try await store.prepare()
        store.health.probing()
        store.health.failed(.unreachable("connection refused"))
        let before = store.health.unavailableCalls
        await #expect(throws: StoreError.unavailable(.unreachable("connection refused"))) {
            _ = try await store.channelType(named: "messaging")
        }
        #expect(store.health.unavailableCalls == before + 1)
        #expect(store.health.unreachableSince != nil, "only the probe says the store is back")
        store.health.probeAnswered()
        #expect(try await store.channelType(named: "messaging") != nil)
    }

    @Test("with nothing probing (SQLite), each call still tries the database and its answer clears the state")
    func unprobedStillTries() async throws {
        let store = try SQLStore.memory(deadline: StoreDeadline(timeout: .seconds(5), time: ManualClock().timeSource))
        try await store.prepare()
        store.health.failed(.diskFull)
        #expect(try await store.channelType(named: "messaging") != nil)
        #expect(store.health.unreachableSince == nil)
    }

    @Test("a call under way when the store went away does not say it is back when it ends")
    func callFromBeforeTheOutage() async throws {
        let health = StoreHealth(time: ManualClock().timeSource)
        health.probing()
        let (gate, open) = AsyncStream.makeStream(of: Void.self)
        let (reached, reach) = AsyncStream.makeStream(of: Void.self)
        let engine = BoundedEngine(
            base: HeldEngine(gate: gate, reached: reach),
            deadline: StoreDeadline(timeout: .seconds(5), time: ManualClock().timeSource), health: health)
        let call = Task { try await engine.read { StoreProgram<Int>.done(0) } }
        for await _ in reached { break }
        // Another connection is dropped: the store is known away.
        health.failed(.unreachable("the connection was closed"))
        open.finish()
        await #expect(throws: StoreError.messageNotFound("m")) { try await call.value }
        #expect(health.unreachableSince != nil, "only the probe, or a call begun since, says it is back")
        #expect(health.awayWhileProbed() != nil, "the calls that follow fail at once")
    }

    @Test("a call left at its lease's deadline: the store is known away then, while the work hangs; counted once")
    func leaseLeftAtItsDeadline() async throws {
        let clock = ManualClock()
        let health = StoreHealth(time: clock.timeSource)
        health.probing()
        let (gate, open) = AsyncStream.makeStream(of: Void.self)
        let (reached, reach) = AsyncStream.makeStream(of: Void.self)
        let (left, leave) = AsyncStream.makeStream(of: Void.self)
        let deadline = StoreDeadline(timeout: .seconds(5), time: clock.timeSource)
        let lease = deadline.lease { leave.yield() }
        let engine = BoundedEngine(base: HeldEngine(gate: gate, reached: reach), deadline: deadline, health: health)
            .within(lease)
        let call = Task { try await engine.read { StoreProgram<Int>.done(0) } }
        for await _ in reached { break }
        while clock.sleepers < 1 { await Task.yield() }
        clock.advance(by: .seconds(5))
        for await _ in left { break }
        // Known at the deadline: the lane that takes this one's place fails at once.
        #expect(health.unreachableSince != nil && health.timedOutCalls == 1)
        open.finish()
        await #expect(throws: StoreError.unavailable(.timedOut(.seconds(5)))) { try await call.value }
        #expect(health.timedOutCalls == 1 && health.unavailableCalls == 1, "counted once")
    }

    /// A running pool of one connection to the test database, with its health; nothing without one.
    static func withPool(
        probeInterval: Duration = .milliseconds(250), _ body: (PostgresPool, StoreHealth) async throws -> Void
    ) async throws {
        guard let url = PostgresTestDatabase.url else { return }
        let location = try PostgresLocation(url: url)
        var configuration = location.clientConfiguration()
        configuration.options.maximumConnections = 1
        let health = StoreHealth(logger: PostgresTestDatabase.logger)
        let pool = PostgresPool(
            configuration: configuration, probe: try location.connectionConfiguration(), health: health,
            probeInterval: probeInterval, logger: PostgresTestDatabase.logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await pool.run() }
            defer { group.cancelAll() }
            try await body(pool, health)
        }
    }

    @Test("PostgreSQL: the probe finds the database answering, renews the pool and clears the state")
    func probeRecovers() async throws {
        try await Self.withPool(probeInterval: .milliseconds(50)) { pool, health in
            health.failed(.unreachable("connection refused"))
            #expect(health.awayWhileProbed() != nil)
            // A positive wait: it ends as soon as the probe has answered.
            let deadline = ContinuousClock.now + Patience.wait
            while health.unreachableSince != nil, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(health.unreachableSince == nil)
            #expect(pool.renewals == 1, "refused connections: the client is replaced")
            // A slow database (a timeout) keeps its client.
            health.failed(.timedOut(.seconds(5)))
            while health.unreachableSince != nil, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(health.unreachableSince == nil && pool.renewals == 1)
        }
    }

    @Test("PostgreSQL: a call waiting for a connection when the pool is renewed runs on the new pool")
    func queuedCallMovesToTheNewPool() async throws {
        try await Self.withPool { pool, _ in
            let (held, hold) = AsyncStream.makeStream(of: Void.self)
            let (taken, take) = AsyncStream.makeStream(of: Void.self)
            // The pool's one connection, held until the test lets go.
            let holder = Task {
                try await pool.withConnection { _ in
                    take.yield()
                    for await _ in held {}
                }
            }
            for await _ in taken { break }
            let waiter = Task {
                try await pool.withConnection { connection in
                    try await connection.query("SELECT 1", logger: PostgresTestDatabase.logger).collect().count
                }
            }
            // The waiter asks the old client for a connection before the renewal (if the machine is so slow
            // that it has not yet, it asks the new one, and the test shows nothing but cannot fail).
            try await Task.sleep(for: .milliseconds(300))
            pool.renew()
            hold.finish()
            try? await holder.value
            #expect(try await waiter.value == 1)
        }
    }
}

/// An engine whose calls say they have begun (`reached`), wait until `gate`
/// finishes, then refuse as a store does (the database answered, with a refusal).
private struct HeldEngine: StoreEngine {
    let gate: AsyncStream<Void>
    let reached: AsyncStream<Void>.Continuation

    var dialect: SQLDialect { .sqlite }

    private func held<T>() async throws -> T {
        reached.yield()
        for await _ in gate {}
        throw StoreError.messageNotFound("m")
    }

    func write<T: Sendable>(_ program: @escaping @Sendable () -> StoreProgram<T>) async throws -> T { try await held() }
    func read<T: Sendable>(_ program: @escaping @Sendable () -> StoreProgram<T>) async throws -> T { try await held() }
    func readOne<T: Sendable>(_ program: @escaping @Sendable () -> StoreProgram<T>) async throws -> T {
        try await held()
    }
    func storageBytes() async throws -> Int64 { try await held() }
}
