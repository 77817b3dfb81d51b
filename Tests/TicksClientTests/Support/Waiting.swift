import Foundation
import Synchronization
import Testing
import TicksTestSupport
import TicksClient

/// Polls `condition` until it holds, failing the test after `timeout`: a
/// deadline for what never happens, long enough for a loaded machine (no
/// test asserts how fast anything is).
func eventually<Value: Sendable>(
    _ what: String, timeout: Duration = Patience.wait, sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: @Sendable () async throws -> Value?
) async throws -> Value {
    let deadline = ContinuousClock.now + timeout
    while true {
        if let value = try await condition() { return value }
        if ContinuousClock.now >= deadline {
            Issue.record("timed out waiting for \(what)", sourceLocation: sourceLocation)
            throw CancellationError()
        }
        try await Task.sleep(for: .milliseconds(10))
    }
}

extension ChannelController {
    /// Waits until the channel state satisfies `condition`.
    @discardableResult
    func wait(
        _ what: String, timeout: Duration = Patience.wait, sourceLocation: SourceLocation = #_sourceLocation,
        until condition: @escaping @Sendable (ChatChannel) -> Bool
    ) async throws -> ChatChannel {
        try await eventually(what, timeout: timeout, sourceLocation: sourceLocation) {
            let state = try await self.state
            return condition(state) ? state : nil
        }
    }

    /// The status of one message now.
    func status(of id: String) async throws -> DeliveryStatus? {
        try await state.message(withID: id)?.deliveryStatus
    }
}

/// Keeps everything a stream yields, for a test to look at.
final class Recorder<Element: Sendable>: Sendable {
    private final class Box: Sendable {
        let values = Mutex<[Element]>([])
    }
    private let box = Box()
    private let task: Task<Void, Never>

    init(_ stream: AsyncStream<Element>) {
        let box = self.box
        task = Task {
            for await value in stream { box.values.withLock { $0.append(value) } }
        }
    }

    var all: [Element] { box.values.withLock { $0 } }

    deinit { task.cancel() }
}
