import Foundation
import Synchronization

/// Fans values out to any number of `AsyncStream` subscribers. Each
/// subscriber has its own buffer of `bufferSize` newest values, so a slow one
/// loses its oldest values rather than holding up the others.
final class Broadcast<Element: Sendable>: Sendable {
    private let subscribers = Mutex<[UUID: AsyncStream<Element>.Continuation]>([:])
    private let bufferSize: Int

    init(bufferSize: Int = 256) {
        self.bufferSize = bufferSize
    }

    /// A new stream of the values yielded from now on, starting with `initial` if given.
    func subscribe(startingWith initial: Element? = nil) -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: Element.self, bufferingPolicy: .bufferingNewest(bufferSize))
        let id = UUID()
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.removeValue(forKey: id) }
        }
        if let initial { continuation.yield(initial) }
        subscribers.withLock { $0[id] = continuation }
        return stream
    }

    func yield(_ value: Element) {
        for continuation in subscribers.withLock({ Array($0.values) }) {
            continuation.yield(value)
        }
    }

    /// Ends every stream.
    func finish() {
        let all = subscribers.withLock { all -> [AsyncStream<Element>.Continuation] in
            defer { all.removeAll() }
            return Array(all.values)
        }
        for continuation in all { continuation.finish() }
    }

    var subscriberCount: Int { subscribers.withLock { $0.count } }
}
