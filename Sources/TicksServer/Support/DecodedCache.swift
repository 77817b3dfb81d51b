import Synchronization

/// Values decoded from JSON text, keyed by the text itself.
///
/// Rows keep users and custom fields as JSON; decoding the same text again is
/// most of what a hot query costs. Keyed by content, an entry can never be
/// stale: changed data is different text. Holds at most `capacity` entries and
/// starts afresh when full, which is cheaper than tracking recency and costs
/// only a round of decodes.
final class DecodedCache<Value: Sendable>: Sendable {
    private let entries = Mutex<[String: Value]>([:])
    let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    func value(for text: String, decode: (String) throws -> Value) rethrows -> Value {
        if let cached = entries.withLock({ $0[text] }) { return cached }
        let value = try decode(text)
        entries.withLock { entries in
            if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            entries[text] = value
        }
        return value
    }
}
