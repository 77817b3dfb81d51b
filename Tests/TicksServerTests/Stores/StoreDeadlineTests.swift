import Synchronization
import Testing
import TicksProtocol
import TicksTestSupport

@testable import TicksServer

/// `StoreDeadline` on a test's clock: the caller gets the work's answer, or
/// `StoreError.unavailable` once the deadline passes, even when the work never
/// ends (a statement on a connection that closed under postgres-nio).
@Suite("Store deadlines")
struct StoreDeadlineTests {
    @Test("an answer within the deadline is the answer; an error is the error")
    func answers() async throws {
        let clock = ManualClock()
        let deadline = StoreDeadline(timeout: .seconds(5), time: clock.timeSource)
        #expect(try await deadline.run { 42 } == 42)
        await #expect(throws: StoreError.messageNotFound("m1")) {
            try await deadline.run { () async throws -> Int in throw StoreError.messageNotFound("m1") }
        }
        // The deadlines stopped waiting once answered.
        while clock.sleepers > 0 { await Task.yield() }
    }

    @Test("work that never ends is left at the deadline: 503, its expiry actions run, the work is cancelled")
    func neverEnds() async throws {
        let clock = ManualClock()
        let deadline = StoreDeadline(timeout: .seconds(5), time: clock.timeSource)
        let closed = Mutex(0)
        let forgotten = Mutex(0)
        let cancelled = Mutex(false)
        let (stuck, release) = AsyncStream.makeStream(of: Void.self)
        let call = Task {
            try await deadline.run { () async throws -> Int in
                // A resource held to the end (closed at the deadline), and one given back before it.
                _ = StoreDeadline.expiry?.register { closed.withLock { $0 += 1 } }
                let given = StoreDeadline.expiry?.register { forgotten.withLock { $0 += 1 } }
                StoreDeadline.expiry?.forget(given)
                await withTaskCancellationHandler {
                    for await _ in stuck {}
                } onCancel: {
                    cancelled.withLock { $0 = true }
                }
                return 1
            }
        }
        while clock.sleepers < 1 { await Task.yield() }
        clock.advance(by: .seconds(4))
        #expect(closed.withLock { $0 } == 0)
        clock.advance(by: .seconds(1))
        await #expect(throws: StoreError.unavailable(.timedOut(.seconds(5)))) { try await call.value }
        #expect(closed.withLock { $0 } == 1)
        #expect(forgotten.withLock { $0 } == 0)
        while !cancelled.withLock({ $0 }) { await Task.yield() }
        release.finish()
    }

    @Test("a caller that is cancelled stops waiting")
    func cancelledCaller() async throws {
        let clock = ManualClock()
        let deadline = StoreDeadline(timeout: .seconds(5), time: clock.timeSource)
        let (stuck, release) = AsyncStream.makeStream(of: Void.self)
        let call = Task {
            try await deadline.run { () async throws -> Int in
                for await _ in stuck {}
                return 1
            }
        }
        while clock.sleepers < 1 { await Task.yield() }
        call.cancel()
        await #expect(throws: CancellationError.self) { try await call.value }
        release.finish()
    }

    @Test("StoreHealth: unreachable from the first failure until the next answer, counted")
    func health() {
        let clock = ManualClock()
        let health = StoreHealth(time: clock.timeSource)
        #expect(health.unreachableSince == nil)
        health.failed(.unreachable("refused"))
        let since = health.unreachableSince
        #expect(since != nil)
        clock.advance(by: .seconds(3))
        health.failed(.timedOut(.seconds(5)))
        #expect(health.unreachableSince == since, "the first failure says since when")
        #expect(health.unavailableCalls == 2)
        health.answered()
        #expect(health.unreachableSince == nil && health.reason == nil && health.unavailableCalls == 2)
    }
}
