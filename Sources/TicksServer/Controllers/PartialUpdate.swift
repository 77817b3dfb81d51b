import TicksProtocol

/// Stream's partial update body: `{"set": {...}, "unset": [...]}`, for
/// channels, members, messages and users alike.
struct PartialUpdate: Decodable, Sendable {
    var set: [String: JSONValue]
    var unset: [String]

    enum CodingKeys: String, CodingKey { case set, unset }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        set = try container.decodeIfPresent([String: JSONValue].self, forKey: .set) ?? [:]
        unset = try container.decodeIfPresent([String].self, forKey: .unset) ?? []
    }

    init(set: [String: JSONValue], unset: [String]) {
        self.set = set
        self.unset = unset
    }

    /// Refuses an update that changes nothing, names a field in both lists,
    /// or touches a field that is not free data (`reserved`, less `allowed`).
    func validate(_ what: String, reserved: Set<String>, allowed: Set<String> = []) throws {
        guard !set.isEmpty || !unset.isEmpty else { throw APIError.input("set or unset is required") }
        if let both = unset.first(where: { set[$0] != nil }) {
            throw APIError.input("'\(both.prefix(64))' is both set and unset")
        }
        for field in Array(set.keys) + unset where reserved.contains(field) && !allowed.contains(field) {
            throw APIError.input("\(what) field '\(field)' cannot be changed by a partial update")
        }
    }

    /// `fields` with `set` written over them and `unset` removed.
    func applied(to fields: [String: JSONValue]) -> [String: JSONValue] {
        var result = fields.merging(set) { $1 }
        for field in unset { result[field] = nil }
        return result
    }
}

/// A partial update with the fields that say who acts (`user: {id}` or
/// `user_id`), as channel and message partial updates take them.
struct PartialUpdateRequest: Decodable {
    var update: PartialUpdate
    var acting: ActingUserFields

    init(from decoder: any Decoder) throws {
        update = try PartialUpdate(from: decoder)
        acting = try ActingUserFields(from: decoder)
    }
}

/// A boolean query parameter as Stream's SDKs send it: `true`/`false` in any
/// case (Python's `requests` sends `True`), or `1`/`0`; absent is false.
func booleanParameter(_ value: String?, _ name: String) throws -> Bool {
    guard let value else { return false }
    switch value.lowercased() {
    case "true", "1": return true
    case "false", "0", "": return false
    default: throw APIError.input("\(name) must be true or false, not '\(value.prefix(16))'")
    }
}
