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

/// A `$in` (or other) list of filter values within `ServerLimits.maxFilterValues`.
func requireFilterValues(_ values: [String], of field: String, limits: ServerLimits) throws {
    guard values.count <= limits.maxFilterValues else {
        throw APIError.input("the filter on '\(field)' has \(values.count) values; at most \(limits.maxFilterValues)")
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
