/// Any JSON value: used for the custom fields Stream lets users, messages and
/// channels carry at the top level of their objects.
public enum JSONValue: Codable, Sendable, Equatable, Hashable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .int(value)
        } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .int(let value): try container.encode(value)
        case .double(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }
}

/// A coding key made from any string: lets a type keep unknown fields.
public struct AnyCodingKey: CodingKey, Hashable, Sendable {
    public var stringValue: String
    public var intValue: Int? { nil }
    public init(_ string: String) { self.stringValue = string }
    public init?(stringValue: String) { self.stringValue = stringValue }
    public init?(intValue: Int) { return nil }
}

extension KeyedDecodingContainer where Key == AnyCodingKey {
    /// The object's custom data: in v1 its fields whose names are not in
    /// `known`; in v2 its `custom` object, where a name in `known` is refused
    /// (v1 answers write custom data at the top level, beside those fields).
    public func customFields(excluding known: Set<String>, in version: APIVersion) throws -> [String: JSONValue] {
        switch version {
        case .v1:
            var custom: [String: JSONValue] = [:]
            for key in allKeys where !known.contains(key.stringValue) {
                custom[key.stringValue] = try decode(JSONValue.self, forKey: key)
            }
            return custom
        case .v2:
            let key = AnyCodingKey("custom")
            let custom = try decodeIfPresent([String: JSONValue].self, forKey: key) ?? [:]
            if let name = custom.keys.sorted().first(where: known.contains) {
                throw DecodingError.dataCorruptedError(
                    forKey: key, in: self,
                    debugDescription: "'\(name.prefix(64))' is a field of its own, not custom data")
            }
            return custom
        }
    }
}

extension KeyedEncodingContainer where Key == AnyCodingKey {
    /// Custom data as `version` writes it: v1 at the top level, v2 as the `custom` object (always there).
    public mutating func encodeCustom(
        _ custom: [String: JSONValue], excluding known: Set<String>, in version: APIVersion
    ) throws {
        switch version {
        case .v1:
            for (name, value) in custom where !known.contains(name) {
                try encode(value, forKey: AnyCodingKey(name))
            }
        case .v2:
            try encode(custom.filter { !known.contains($0.key) }, forKey: AnyCodingKey("custom"))
        }
    }
}
