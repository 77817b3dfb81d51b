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
        // Answered calls wait no more; at the deadline nothing is left to leave, and the watch ends.
        #expect(deadline.waitingCalls == 0)
        clock.advance(by: .seconds(5))
        while clock.sleepers > 0 { await Task.yield() }
    }

    @Test("one watch for every call: each is left at its own deadline, none answered is left, and the watch ends")
    func oneWatch() async throws {
        let clock = ManualClock()
        let deadline = StoreDeadline(timeout: .seconds(5), time: clock.timeSource)
        let left = Left()
        let call = { @Sendable (number: Int, endsAtOnce: Bool) -> Task<Int, any Error> in
            Task {
                try await deadline.run { () async throws -> Int in
                    _ = StoreDeadline.expiry?.register { left.numbers.withLock { $0.append(number) } }
                    // Never ends by itself: a stream of its own that nothing finishes; the deadline's
                    // cancellation ends the wait.
                    if !endsAtOnce {
                        let (never, open) = AsyncStream.makeStream(of: Void.self)
                        for await _ in never {}
                        withExtendedLifetime(open) {}
                    }
                    return number
                }
            }
        }
        // At 0 s: call 1 is answered, calls 2 and 3 never end; at 3 s: call 4 never ends.
        #expect(try await call(1, true).value == 1)
        let early = [call(2, false), call(3, false)]
        while deadline.waitingCalls < 2 || clock.sleepers < 1 { await Task.yield() }
        clock.advance(by: .seconds(3))
        let late = call(4, false)
        while deadline.waitingCalls < 3 { await Task.yield() }
        #expect(clock.sleepers == 1, "one watch, not a timer per call")
        clock.advance(by: .seconds(2))
        for waiting in early {
            await #expect(throws: StoreError.unavailable(.timedOut(.seconds(5)))) { try await waiting.value }
        }
        #expect(left.numbers.withLock { $0.sorted() } == [2, 3], "call 1 was answered; call 4's deadline is at 8 s")
        #expect(deadline.waitingCalls == 1)
        clock.advance(by: .seconds(3))
        await #expect(throws: StoreError.unavailable(.timedOut(.seconds(5)))) { try await late.value }
        #expect(left.numbers.withLock { $0.sorted() } == [2, 3, 4])
        while clock.sleepers > 0 { await Task.yield() }
        #expect(deadline.waitingCalls == 0)
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

    @Test("a value the work makes after its caller stopped waiting goes to leftover: cancelled, or left at the deadline")
    func leftover() async throws {
        let clock = ManualClock()
        let deadline = StoreDeadline(timeout: .seconds(5), time: clock.timeSource)
        let left = Left()
        // Work that ends when its gate opens, cancelled or not (as a connect that completes anyway).
        let call = { @Sendable (number: Int, gate: AsyncStream<Void>) -> Task<Int, any Error> in
            Task {
                try await deadline.run({ () async throws -> Int in
                    await Task.detached { for await _ in gate { break } }.value
                    return number
                }, leftover: { value in left.numbers.withLock { $0.append(value) } })
            }
        }
        let (answeredGate, answer) = AsyncStream.makeStream(of: Void.self)
        answer.yield()
        #expect(try await call(1, answeredGate).value == 1)
        let (cancelledGate, openCancelled) = AsyncStream.makeStream(of: Void.self)
        let cancelled = call(2, cancelledGate)
        while deadline.waitingCalls < 1 { await Task.yield() }
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        openCancelled.yield()
        while left.numbers.withLock({ $0 }) != [2] { await Task.yield() }
        let (lateGate, openLate) = AsyncStream.makeStream(of: Void.self)
        let late = call(3, lateGate)
        while deadline.waitingCalls < 1 || clock.sleepers < 1 { await Task.yield() }
        clock.advance(by: .seconds(5))
        await #expect(throws: StoreError.unavailable(.timedOut(.seconds(5)))) { try await late.value }
        openLate.yield()
        while left.numbers.withLock({ $0 }) != [2, 3] { await Task.yield() }
        #expect(left.numbers.withLock { $0 } == [2, 3], "the value its caller took is not left over")
    }

    @Test("a lease runs work in its caller's task; at the deadline its expiry actions, then `expired`; late: 503")
    func lease() async throws {
        let clock = ManualClock()
        let deadline = StoreDeadline(timeout: .seconds(5), time: clock.timeSource)
        // Within the deadline: the work's answer, in the caller's task, and the lease ends first.
        let quick = deadline.lease { Issue.record("a lease whose work ended was left") }
        let caller = withUnsafeCurrentTask { $0?.hashValue }
        #expect(try await quick.run { withUnsafeCurrentTask { $0?.hashValue } } == caller, "no task of its own")
        #expect(quick.end())

        let steps = Mutex<[String]>([])
        let (stuck, release) = AsyncStream.makeStream(of: Void.self)
        let slow = deadline.lease { steps.withLock { $0.append("expired") } }
        let call = Task {
            try await slow.run { () async throws -> Int in
                _ = StoreDeadline.expiry?.register { steps.withLock { $0.append("closed") } }
                steps.withLock { $0.append("registered") }
                for await _ in stuck {}
                return 1
            }
        }
        while steps.withLock({ $0 }) != ["registered"] || clock.sleepers < 1 { await Task.yield() }
        clock.advance(by: .seconds(4))
        #expect(!slow.isSettled)
        clock.advance(by: .seconds(1))
        while steps.withLock({ $0.count }) < 3 { await Task.yield() }
        #expect(steps.withLock { $0 } == ["registered", "closed", "expired"])
        // The lease does not resume its caller: the work ends when it ends, and what it made is 503.
        release.finish()
        await #expect(throws: StoreError.unavailable(.timedOut(.seconds(5)))) { try await call.value }
        #expect(!slow.end(), "left at the deadline")
        #expect(deadline.waitingCalls == 0)
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
        #expect(health.timedOutCalls == 1, "of the two, one waited out the deadline")
        health.failed(.diskFull)
        #expect(health.unavailableCalls == 3 && health.timedOutCalls == 1)
        health.answered(since: health.began())
        #expect(health.unreachableSince == nil && health.reason == nil && health.unavailableCalls == 3)
        #expect(health.timedOutCalls == 1)
    }

    @Test("StoreHealth: a call under way when another failed says nothing of the store when it is answered")
    func answerOfACallFromBefore() {
        let health = StoreHealth(time: ManualClock().timeSource)
        let before = health.began()
        health.failed(.unreachable("the connection was closed"))
        health.answered(since: before)
        #expect(health.unreachableSince != nil, "a commit read after the failure does not say the database is back")
        // Nor does one that began before a later failure of the same outage.
        let during = health.began()
        health.failed(.unreachable("connection refused"))
        health.answered(since: during)
        #expect(health.unreachableSince != nil)
        // A call that began after the last failure and was answered does.
        health.answered(since: health.began())
        #expect(health.unreachableSince == nil)
        // As does the probe, whenever it answers.
        health.failed(.timedOut(.seconds(5)))
        health.probeAnswered()
        #expect(health.unreachableSince == nil)
    }
}

/// The calls whose expiry actions ran.
private final class Left: Sendable {
    let numbers = Mutex<[Int]>([])
}
