import Synchronization

/// A cache bounded in entries and in bytes.
///
/// Entries live in two generations: new ones go into the current one; when
/// it holds half the budget (of entries or bytes), it becomes the previous
/// generation and the old previous one is dropped. A hit in the previous
/// generation moves the entry back into the current one. So the cache never
/// holds more than its budget, recently used entries survive, and the
/// bookkeeping is two dictionaries, with no list to keep in order.
final class BoundedCache<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    struct Limits: Sendable, Equatable {
        var maxEntries: Int
        var maxBytes: Int
    }

    private struct Generation {
        var entries: [Key: (value: Value, cost: Int)] = [:]
        var bytes = 0

        mutating func insert(_ value: Value, for key: Key, cost: Int) {
            if let old = entries.updateValue((value, cost), forKey: key) { bytes -= old.cost }
            bytes += cost
        }
    }

    private struct State {
        var limits: Limits
        var current = Generation()
        var previous = Generation()

        /// Whether `cost` more bytes and one more entry would take the current
        /// generation past half the budget.
        func currentOverflows(adding cost: Int) -> Bool {
            current.entries.count + 1 > max(limits.maxEntries / 2, 1) || current.bytes + cost > limits.maxBytes / 2
        }
    }

    private let state: Mutex<State>

    init(maxEntries: Int, maxBytes: Int) {
        state = Mutex(State(limits: Limits(maxEntries: maxEntries, maxBytes: maxBytes)))
    }

    var limits: Limits { state.withLock { $0.limits } }

    /// Entries and bytes held now (tests).
    var usage: (entries: Int, bytes: Int) {
        state.withLock { ($0.current.entries.count + $0.previous.entries.count, $0.current.bytes + $0.previous.bytes) }
    }

    /// Changes the budget; forgets everything.
    func resize(maxEntries: Int, maxBytes: Int) {
        state.withLock { $0 = State(limits: Limits(maxEntries: maxEntries, maxBytes: maxBytes)) }
    }

    func value(for key: Key) -> Value? {
        state.withLock { state in
            if let hit = state.current.entries[key] { return hit.value }
            guard let old = state.previous.entries.removeValue(forKey: key) else { return nil }
            state.previous.bytes -= old.cost
            Self.insert(old.value, for: key, cost: old.cost, into: &state)
            return old.value
        }
    }

    /// Keeps `value` unless it alone would take more than half the budget.
    /// Each generation holds at most half the entries and half the bytes, so
    /// the cache never holds more than `maxEntries` entries or `maxBytes` bytes.
    /// - Parameter cost: the bytes the entry holds, key included.
    func insert(_ value: Value, for key: Key, cost: Int) {
        state.withLock { state in
            guard cost <= state.limits.maxBytes / 2 else { return }
            Self.insert(value, for: key, cost: cost, into: &state)
        }
    }

    func removeValue(for key: Key) {
        state.withLock { state in
            if let old = state.current.entries.removeValue(forKey: key) { state.current.bytes -= old.cost }
            if let old = state.previous.entries.removeValue(forKey: key) { state.previous.bytes -= old.cost }
        }
    }

    private static func insert(_ value: Value, for key: Key, cost: Int, into state: inout State) {
        if let old = state.current.entries.removeValue(forKey: key) { state.current.bytes -= old.cost }
        if let old = state.previous.entries.removeValue(forKey: key) { state.previous.bytes -= old.cost }
        if state.currentOverflows(adding: cost) {
            state.previous = state.current
            state.current = Generation()
        }
        state.current.insert(value, for: key, cost: cost)
    }
}
