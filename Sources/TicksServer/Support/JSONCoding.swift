import Foundation
import TicksProtocol

/// One place for the JSON settings of stored values and wire payloads.
enum JSONCoding {
    static func string(_ value: some Encodable) throws -> String {
        String(decoding: try encoder().encode(value), as: UTF8.self)
    }

    static func data(_ value: some Encodable, version: APIVersion = .v1) throws -> Data {
        try encoder(version).encode(value)
    }

    static func decode<T: Decodable>(_ type: T.Type, from text: String) throws -> T {
        try JSONDecoder().decode(type, from: Data(text.utf8))
    }

    /// A value's JSON object, as fields (for partial updates).
    static func object(_ value: some Encodable, version: APIVersion = .v1) throws -> [String: JSONValue] {
        try JSONDecoder().decode([String: JSONValue].self, from: data(value, version: version))
    }

    /// A value from JSON fields.
    static func decode<T: Decodable>(_ type: T.Type, from fields: [String: JSONValue]) throws -> T {
        try JSONDecoder().decode(type, from: data(fields))
    }

    static func encoder(_ version: APIVersion = .v1) -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        if version != .v1 { encoder.userInfo[.apiVersion] = version }
        return encoder
    }

    static func decoder(_ version: APIVersion = .v1) -> JSONDecoder {
        let decoder = JSONDecoder()
        if version != .v1 { decoder.userInfo[.apiVersion] = version }
        return decoder
    }
}
