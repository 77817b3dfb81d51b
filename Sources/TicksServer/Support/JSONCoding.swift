import Foundation
import TicksProtocol

/// One place for the JSON settings of stored values and wire payloads.
enum JSONCoding {
    static func string(_ value: some Encodable) throws -> String {
        String(decoding: try encoder().encode(value), as: UTF8.self)
    }

    static func data(_ value: some Encodable) throws -> Data {
        try encoder().encode(value)
    }

    static func decode<T: Decodable>(_ type: T.Type, from text: String) throws -> T {
        try JSONDecoder().decode(type, from: Data(text.utf8))
    }

    /// A value's JSON object, as fields (for partial updates).
    static func object(_ value: some Encodable) throws -> [String: JSONValue] {
        try JSONDecoder().decode([String: JSONValue].self, from: data(value))
    }

    /// A value from JSON fields.
    static func decode<T: Decodable>(_ type: T.Type, from fields: [String: JSONValue]) throws -> T {
        try JSONDecoder().decode(type, from: data(fields))
    }

    static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return encoder
    }
}
