import TicksProtocol

// The checks of the ids a request names, for every layer that reads one (the
// controllers, the request context's user ids, the demo's token route): each
// failure is a 400 in Stream's format naming the field and the rule.

/// The one check of an id a request carries, whatever its kind (`Identifier`'s
/// rules): 400 naming the field and the rule unless it is valid. Every id a
/// request names passes here (or through `ChannelID(cid:)`, which applies the
/// same rules) before a store sees it, so an id no one could have made gets
/// the same answer on every store.
@discardableResult
func requireID(_ id: String, _ rule: IDRule, _ what: String) throws -> String {
    guard rule.isValid(id) else {
        throw APIError.input("\(what) \(Identifier.quoted(id)) is not valid: use \(rule)")
    }
    return id
}

/// A user, message or task id (`Identifier.id`).
func requireValidID(_ id: String, _ what: String) throws {
    try requireID(id, Identifier.id, what)
}

/// A channel's `type:id`, parsed (400 unless both parts are valid).
func requireCID(_ text: String, _ what: String) throws -> ChannelID {
    guard let cid = ChannelID(cid: text) else {
        throw APIError.input("\(what) \(Identifier.quoted(text)) is not valid: use \(Identifier.cid)")
    }
    return cid
}
