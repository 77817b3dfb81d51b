import Foundation
import TicksProtocol

/// Checks of what clients send, shared by the controllers: each failure is a
/// 400 in Stream's format naming the field and the limit.
func requireValidID(_ id: String, _ what: String) throws {
    guard Identifier.isValid(id) else {
        throw APIError.input("\(what) '\(id.prefix(64))' is not valid: use 1–255 characters of a-z, A-Z, 0-9, @, _ and -")
    }
}

/// Custom data must fit `ServerLimits.maxCustomDataBytes` as JSON.
func requireCustomData(_ custom: [String: JSONValue], of what: String, limits: ServerLimits) throws {
    guard !custom.isEmpty else { return }
    let bytes = try JSONCoding.data(custom).count
    guard bytes <= limits.maxCustomDataBytes else {
        throw APIError.input("\(what) has \(bytes) bytes of custom data; at most \(limits.maxCustomDataBytes)")
    }
}

/// The values of a `$in` (or other) list that can match, within
/// `ServerLimits.maxFilterValues`. A value holding U+0000 is dropped: no id,
/// cid or type name can contain it, and PostgreSQL's text cannot carry it,
/// so it matches nothing on every store alike.
func filterValues(_ values: [String], of field: String, limits: ServerLimits) throws -> [String] {
    guard values.count <= limits.maxFilterValues else {
        throw APIError.input("the filter on '\(field)' has \(values.count) values; at most \(limits.maxFilterValues)")
    }
    return values.filter { !$0.unicodeScalars.contains("\0") }
}

/// Text a store keeps as it is (a message's text) must not hold U+0000,
/// which PostgreSQL's text cannot store.
func requireStorableText(_ text: String, _ what: String) throws {
    guard !text.unicodeScalars.contains("\0") else {
        throw APIError.input("\(what) must not contain the character U+0000")
    }
}

enum UserInput {
    /// The free-form part of a user (name, image, custom fields) within the
    /// custom data limit, and a role that is a valid name.
    static func validate(_ user: User, limits: ServerLimits) throws {
        try requireValidID(user.id, "user id")
        var freeForm = user.custom
        if let name = user.name { freeForm["name"] = .string(name) }
        if let image = user.image { freeForm["image"] = .string(image) }
        try requireCustomData(freeForm, of: "user '\(user.id)'", limits: limits)
        if let role = user.role, !Identifier.isValid(role) {
            throw APIError.input("role '\(role.prefix(64))' of user '\(user.id)' is not valid")
        }
    }
}

/// An optional integer query parameter within `range` (400 otherwise).
func integerParameter(_ text: String?, _ name: String, range: ClosedRange<Int64>) throws -> Int64? {
    guard let text else { return nil }
    guard let value = Int64(text), range.contains(value) else {
        throw APIError.input("\(name) must be an integer from \(range.lowerBound) to \(range.upperBound)")
    }
    return value
}
