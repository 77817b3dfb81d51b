/// A channel's identity, `type:id` (Stream's `cid`), parsed once at the edge.
public struct ChannelID: Hashable, Sendable, Codable, CustomStringConvertible {
    public let type: String
    public let id: String

    public init(type: String, id: String) {
        self.type = type
        self.id = id
    }

    /// Parses `"messaging:trip"`; nil unless the type is a valid channel type
    /// name and the id a valid id (`Identifier`), whatever the text.
    public init?(cid: String) {
        guard let colon = cid.utf8.firstIndex(of: UInt8(ascii: ":")) else { return nil }
        let type = String(cid[..<colon])
        let id = String(cid[cid.utf8.index(after: colon)...])
        guard Identifier.isValidTypeName(type), Identifier.isValidChannelID(id) else { return nil }
        self.init(type: type, id: id)
    }

    public var rawValue: String { "\(type):\(id)" }
    public var description: String { rawValue }

    /// On the wire a cid is one string, `"type:id"` (Stream's `cid`); text that is not one is refused.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let cid = ChannelID(cid: text) else {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "'\(text)' is not a channel's type:id")
        }
        self = cid
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}
