import Logging
import ServiceLifecycle
import Synchronization
import Testing

@testable import TicksServer

@Suite("A door that opens once, and the services that wait for the store behind it")
struct OpeningTests {
    @Test("every waiter before the opening goes through when it opens, and one after it at once")
    func waitersGoThrough() async throws {
        let door = Opening()
        let through = Count()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<20 {
                group.addTask {
                    try await door.wait()
                    through.value.withLock { $0 += 1 }
                }
            }
            // None goes through before the opening, however long it waits.
            for _ in 0..<100 { await Task.yield() }
            #expect(through.value.withLock { $0 } == 0)
            door.open()
            try await group.waitForAll()
        }
        #expect(through.value.withLock { $0 } == 20)
        try await door.wait()
        door.open()  // a second opening does nothing
    }

    @Test("a cancelled waiter throws CancellationError and the others still go through")
    func cancelledWaiter() async throws {
        let door = Opening()
        let cancelled = Task { try await door.wait() }
        let waiting = Task { try await door.wait() }
        for _ in 0..<100 { await Task.yield() }
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        door.open()
        try await waiting.value
        // Cancelled before it waits: it throws rather than hangs.
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await Opening().wait()
        }
        await #expect(throws: CancellationError.self) { try await early.value }
    }

    final class Count: Sendable {
        let value = Mutex(0)
    }

    /// Records that it ran, then runs until graceful shutdown.
    final class Recorder: Service {
        let ran = Mutex(false)
        func run() async throws {
            ran.withLock { $0 = true }
            try? await gracefulShutdown()
        }
    }

    @Test("a service behind the store starts once the store is prepared, and not at all if the node stops first")
    func afterStorePrepared() async throws {
        for opens in [true, false] {
            let door = Opening()
            let recorder = Recorder()
            let group = ServiceGroup(
                configuration: .init(
                    services: [AfterStorePrepared(prepared: door, base: recorder)], gracefulShutdownSignals: [],
                    logger: Logger(label: "test")))
            let running = Task { try await group.run() }
            for _ in 0..<100 { await Task.yield() }
            #expect(recorder.ran.withLock { $0 } == false)
            if opens {
                door.open()
                while !recorder.ran.withLock({ $0 }) { await Task.yield() }
            }
            await group.triggerGracefulShutdown()
            try await running.value
            #expect(recorder.ran.withLock { $0 } == opens)
        }
    }

    @Test(
        "a node asked to stop while it prepares its store stops, never listening: StoppedBeforeServing",
        .timeLimit(.minutes(10)))
    func stopWhilePreparing() async throws {
        var configuration = TicksServerConfiguration(
            host: "127.0.0.1", port: 0,
            credentials: try Credentials(apiKey: TestKeys.apiKey, apiSecret: TestKeys.apiSecret))
        let listened = Count()
        configuration.onServerRunning = { _ in listened.value.withLock { $0 += 1 } }
        let preparing = Opening()
        let (application, _) = await buildApplication(
            configuration: configuration, store: try SQLStore.memory(), logger: Logger(label: "test"),
            beforeServerStarts: {
                preparing.open()
                // As a wait for a standby's promotion that never comes: it ends only when cancelled.
                try await Opening().wait()
            })
        let group = ServiceGroup(
            configuration: .init(services: [application], gracefulShutdownSignals: [], logger: Logger(label: "test")))
        let running = Task { try await group.run() }
        try await preparing.wait()
        await group.triggerGracefulShutdown()
        // Past the time limit (a node that does not stop) the group is cancelled: CancellationError, not this.
        await #expect(throws: StoppedBeforeServing.self) {
            try await withTaskCancellationHandler { try await running.value } onCancel: { running.cancel() }
        }
        #expect(listened.value.withLock { $0 } == 0)
    }
}
