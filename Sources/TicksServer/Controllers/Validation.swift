import Foundation
import TicksProtocol

// Checks of what clients send, shared by the controllers: each failure is a
// 400 in Stream's format naming the field and the limit. The checks of ids,
// which the request pipeline and the demo make too, are in Support
// (`RequiredID.swift`).

/// Custom data must fit `ServerLimits.maxCustomDataBytes` as JSON.
func requireCustomData(_ custom: [String: JSONValue], of what: String, limits: ServerLimits) throws {
    guard !custom.isEmpty else { return }
    let bytes = try JSONCoding.data(custom).count
    guard bytes <= limits.maxCustomDataBytes else {
        throw APIError.input("\(what) has \(bytes) bytes of custom data; at most \(limits.maxCustomDataBytes)")
    }
}

/// At most this many attachments on one message (Stream's limit).
let maxAttachmentsPerMessage = 30
/// At most this many bytes of attachments on one message, as JSON: they are
/// kept with the message and sent with every read of it.
let maxAttachmentBytes = 16 * 1024

/// A message's attachments: objects, each with a string `type`, within the caps (400 otherwise).
func requireAttachments(_ attachments: [JSONValue], of what: String) throws {
    guard !attachments.isEmpty else { return }
    guard attachments.count <= maxAttachmentsPerMessage else {
        throw APIError.input("\(what) has \(attachments.count) attachments; at most \(maxAttachmentsPerMessage)")
    }
    for (index, attachment) in attachments.enumerated() {
        guard case .object(let fields) = attachment, case .string(let type)? = fields["type"], !type.isEmpty else {
            throw APIError.input("\(what): attachments[\(index)] must be an object with a string type")
        }
    }
    let bytes = try JSONCoding.data(attachments).count
    guard bytes <= maxAttachmentBytes else {
        throw APIError.input("\(what) has \(bytes) bytes of attachments; at most \(maxAttachmentBytes)")
    }
}

/// The values of a filter on ids (a value, `$eq` or `$in`), within
/// `ServerLimits.maxFilterValues`, each valid by `rule` (400 otherwise, as
/// the same id anywhere else in a request).
func filterValues(_ values: [String], of field: String, rule: IDRule, limits: ServerLimits) throws -> [String] {
    guard values.count <= limits.maxFilterValues else {
        throw APIError.input("the filter on '\(field)' has \(values.count) values; at most \(limits.maxFilterValues)")
    }
    try values.forEach { try requireID($0, rule, "the filter on '\(field)': value") }
    return values
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
        if let role = user.role { try requireID(role, Identifier.id, "role of user '\(user.id)'") }
    }
}

/// An optional integer query parameter within `range` (400 otherwise).
func integerParameter(_ text: String?, _ name: String, range: ClosedRange<Int64>) throws -> Int64? {
    guard let text else { return nil }
    guard let value = Int64(text), range.contains(value) else { throw outOfBounds(name, range) }
    return value
}

/// An integer a client sent, checked against its bounds before any
/// arithmetic sees it (an overflow traps and stops the whole server): nil
/// stays nil for the caller's default; a value outside `range` is a 400
/// (code 4) naming the field and the range. Every integer of a request goes
/// through here (read as a `WholeNumber`, so that a number past 64 bits or a
/// fraction is refused naming its field) or `integerParameter`, and the OpenAPI document gives each
/// the same `minimum` and `maximum` (docs/limits.md, "Numbers").
func withinBounds(_ number: WholeNumber?, _ name: String, _ range: ClosedRange<Int>) throws -> Int? {
    guard let value = number?.value else { return nil }
    guard range.contains(value) else { throw outOfBounds(name, range) }
    return value
}

private func outOfBounds<Bound: BinaryInteger>(_ name: String, _ range: ClosedRange<Bound>) -> APIError {
    APIError.input("\(name) must be an integer from \(range.lowerBound) to \(range.upperBound)")
}
