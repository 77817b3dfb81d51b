import TicksProtocol

/// What both stores keep as JSON text in a column (a user, custom fields, a
/// channel type's config), decoded once per distinct text (`DecodedCache`).
enum StoredJSON {
    static let users = DecodedCache<User>(maxEntries: 100_000, maxBytes: 32 << 20)
    static let configs = DecodedCache<ChannelConfig>(maxEntries: 1_000, maxBytes: 1 << 20)

    /// Gives the user cache `bytes` (process-wide: the caches are keyed by content, so stores share them).
    static func budget(bytes: Int) {
        users.entries.resize(maxEntries: 100_000, maxBytes: bytes)
    }

    static func user(_ text: String) throws -> User {
        try users.value(for: text) { try JSONCoding.decode(User.self, from: $0) }
    }

    static func config(_ text: String) throws -> ChannelConfig {
        try configs.value(for: text) { try JSONCoding.decode(ChannelConfig.self, from: $0) }
    }

    /// Custom fields: nearly always none, which needs no decoder.
    static func customFields(_ text: String) throws -> [String: JSONValue] {
        text == "{}" ? [:] : try JSONCoding.decode([String: JSONValue].self, from: text)
    }

    /// A message's `custom` column: its custom fields and, under `attachments` (a
    /// key no custom field may take, `Message.reserved`), its attachments. Kept
    /// in the one column so that every query reading a message reads them, on
    /// every schema (a node held before `v13-played` too, docs/storage.md).
    static func messageFields(_ text: String) throws -> (custom: [String: JSONValue], attachments: [JSONValue]) {
        var custom = try customFields(text)
        guard case .array(let attachments)? = custom.removeValue(forKey: attachmentsKey) else { return (custom, []) }
        return (custom, attachments)
    }

    /// The `custom` column of a message with `custom` and `attachments` (`messageFields`).
    static func messageColumn(custom: [String: JSONValue], attachments: [JSONValue]) throws -> String {
        var stored = custom
        if !attachments.isEmpty { stored[attachmentsKey] = .array(attachments) }
        return try JSONCoding.string(stored)
    }

    static let attachmentsKey = "attachments"
}
