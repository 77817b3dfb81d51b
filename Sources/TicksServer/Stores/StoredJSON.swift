import TicksProtocol

/// What both stores keep as JSON text in a column (a user, custom fields, a
/// channel type's config), decoded once per distinct text (`DecodedCache`).
enum StoredJSON {
    static let users = DecodedCache<User>(capacity: 100_000)
    static let configs = DecodedCache<ChannelConfig>(capacity: 1_000)

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
}
