import Foundation
import TicksProtocol

/// Read-only navigation over a JSON answer: `json["read"][0]["user"]["id"].string`.
/// A missing key or index gives `.missing` rather than a crash.
struct JSON: Sendable, Equatable, CustomStringConvertible {
    let value: JSONValue?

    init(_ value: JSONValue?) { self.value = value }

    init(parsing text: String) throws {
        value = try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
    }

    subscript(key: String) -> JSON {
        if case .object(let object) = value { return JSON(object[key]) }
        return JSON(nil)
    }

    subscript(index: Int) -> JSON {
        if case .array(let array) = value, array.indices.contains(index) { return JSON(array[index]) }
        return JSON(nil)
    }

    var exists: Bool { value != nil && value != .null }
    var string: String? { value?.stringValue }
    var bool: Bool? { value?.boolValue }
    var int: Int? {
        switch value {
        case .int(let number): Int(number)
        case .double(let number): Int(exactly: number)
        default: nil
        }
    }
    var double: Double? {
        switch value {
        case .int(let number): Double(number)
        case .double(let number): number
        default: nil
        }
    }
    var array: [JSON] {
        if case .array(let array) = value { return array.map(JSON.init) }
        return []
    }
    var keys: Set<String> {
        if case .object(let object) = value { return Set(object.keys) }
        return []
    }
    var time: Timestamp? { string.flatMap(Timestamp.init(rfc3339:)) }

    var description: String {
        guard let value, let data = try? JSONEncoder().encode(value) else { return "<missing>" }
        return String(decoding: data, as: UTF8.self)
    }
}
