/// Values decoded from JSON text, keyed by the text itself.
///
/// Rows keep users and custom fields as JSON; decoding the same text again is
/// most of what a hot query costs. Keyed by content, an entry can never be
/// stale: changed data is different text. Bounded in entries and in bytes
/// (`BoundedCache`); an entry is charged twice its text, for the key and the
/// decoded value.
final class DecodedCache<Value: Sendable>: Sendable {
    let entries: BoundedCache<String, Value>

    init(maxEntries: Int, maxBytes: Int) {
        entries = BoundedCache(maxEntries: maxEntries, maxBytes: maxBytes)
    }

    func value(for text: String, decode: (String) throws -> Value) rethrows -> Value {
        if let cached = entries.value(for: text) { return cached }
        let value = try decode(text)
        entries.insert(value, for: text, cost: 2 * text.utf8.count + 64)
        return value
    }
}
