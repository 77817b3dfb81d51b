import Foundation
import TicksProtocol

/// Read-only navigation over a JSON answer, for tests to assert on:
/// `json["read"][0]["user"]["id"].string`. A missing key or index gives a
/// missing value (`exists` false) rather than a crash.
public struct JSON: Sendable, Equatable, CustomStringConvertible {
    public let value: JSONValue?

    public init(_ value: JSONValue?) { self.value = value }

    public init(parsing text: String) throws {
        value = try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
    }

    public subscript(key: String) -> JSON {
        if case .object(let object) = value { return JSON(object[key]) }
        return JSON(nil)
    }

    public subscript(index: Int) -> JSON {
        if case .array(let array) = value, array.indices.contains(index) { return JSON(array[index]) }
        return JSON(nil)
    }

    public var exists: Bool { value != nil && value != .null }
    public var string: String? { value?.stringValue }
    public var bool: Bool? { value?.boolValue }
    public var int: Int? {
        switch value {
        case .int(let number): Int(number)
        case .double(let number): Int(exactly: number)
        default: nil
        }
    }
    public var double: Double? {
        switch value {
        case .int(let number): Double(number)
        case .double(let number): number
        default: nil
        }
    }
    public var array: [JSON] {
        if case .array(let array) = value { return array.map(JSON.init) }
        return []
    }
    public var keys: Set<String> {
        if case .object(let object) = value { return Set(object.keys) }
        return []
    }
    public var time: Timestamp? { string.flatMap(Timestamp.init(rfc3339:)) }

    public var description: String {
        guard let value, let data = try? JSONEncoder().encode(value) else { return "<missing>" }
        return String(decoding: data, as: UTF8.self)
    }
}
