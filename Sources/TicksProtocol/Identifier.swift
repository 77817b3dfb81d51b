/// One kind of identifier and its rule: which characters, how many.
///
/// Every id a request carries (in its path, its query or its body) is
/// checked against its kind's rule before any store sees it, so an id that
/// could not have been made (U+0000, other control characters, letters
/// outside ASCII, too long) gets the same 400 on every store. The OpenAPI
/// document states the same rules: `pattern` and `maxLength` of its shared id
/// schemas, which a test compares with these.
public struct IDRule: Sendable, CustomStringConvertible {
    /// The name of the OpenAPI schema that states this rule.
    public let schema: String
    /// The longest valid id, in bytes of UTF-8 (every valid id is ASCII, so characters too).
    public let maxLength: Int
    /// The rule as a regular expression, anchored (the OpenAPI `pattern`).
    public let pattern: String
    /// The rule in words, for error messages: "1–255 characters of a-z, A-Z, 0-9, @, _ and -".
    public let description: String
    private let accepts: @Sendable (String) -> Bool

    public init(
        schema: String, maxLength: Int, pattern: String, description: String,
        accepts: @escaping @Sendable (String) -> Bool
    ) {
        self.schema = schema
        self.maxLength = maxLength
        self.pattern = pattern
        self.description = description
        self.accepts = accepts
    }

    /// 1 to `maxLength` characters, each one of `characters`: a regular
    /// expression character class of ASCII ranges (`a-z`) and single
    /// characters, a literal `-` last.
    public init(schema: String, characters: String, maxLength: Int, description: String) {
        var allowed = [Bool](repeating: false, count: 128)
        let bytes = Array(characters.utf8)
        var index = 0
        while index < bytes.count {
            if index + 2 < bytes.count, bytes[index + 1] == UInt8(ascii: "-") {
                for byte in bytes[index]...bytes[index + 2] { allowed[Int(byte)] = true }
                index += 3
            } else {
                allowed[Int(bytes[index])] = true
                index += 1
            }
        }
        let table = allowed
        self.init(
            schema: schema, maxLength: maxLength, pattern: "^[\(characters)]{1,\(maxLength)}$",
            description: "1–\(maxLength) characters of \(description)",
            accepts: { text in
                let utf8 = text.utf8
                return !utf8.isEmpty && utf8.count <= maxLength && utf8.allSatisfy { $0 < 128 && table[Int($0)] }
            })
    }

    public func isValid(_ text: String) -> Bool { accepts(text) }
}

/// The rules for ids of users, channels, channel types, messages and webhook deliveries.
public enum Identifier {
    public static let maxLength = 255

    /// Users, messages and tasks: Stream's rule for user ids. Message ids
    /// are the client's to choose (a UUID when it leaves them out) within it.
    public static let id = IDRule(
        schema: "Id", characters: "a-zA-Z0-9@_-", maxLength: maxLength, description: "a-z, A-Z, 0-9, @, _ and -")

    /// Channel ids: a user id's characters and `!` (Stream's distinct
    /// channels are `!members-…`).
    public static let channelID = IDRule(
        schema: "ChannelId", characters: "a-zA-Z0-9@_!-", maxLength: maxLength,
        description: "a-z, A-Z, 0-9, @, _, ! and -")

    /// Channel type names: a user id's characters but `@`, at most 64.
    public static let channelTypeName = IDRule(
        schema: "ChannelTypeName", characters: "a-zA-Z0-9_-", maxLength: 64, description: "a-z, A-Z, 0-9, _ and -")

    /// The ids of webhook and push calls (`X-Webhook-Id`): the server makes
    /// them (lowercase UUIDs); a client only names them back.
    public static let deliveryID = IDRule(
        schema: "DeliveryId", characters: "a-zA-Z0-9_-", maxLength: 64, description: "a-z, A-Z, 0-9, _ and -")

    /// A channel's `type:id` (`ChannelID(cid:)`).
    public static let cid = IDRule(
        schema: "Cid", maxLength: channelTypeName.maxLength + 1 + channelID.maxLength,
        pattern: "^[a-zA-Z0-9_-]{1,64}:[a-zA-Z0-9@_!-]{1,255}$",
        description: "type:id, a channel type name (\(channelTypeName.description)), a colon and a channel id",
        accepts: { ChannelID(cid: $0) != nil })

    /// Every rule, for the test that compares them with the OpenAPI document.
    public static let rules = [id, channelID, channelTypeName, deliveryID, cid]

    /// 1–255 characters of `[a-zA-Z0-9@_-]` (Stream's rule for user ids).
    public static func isValid(_ id: String) -> Bool { Self.id.isValid(id) }

    public static func isValidChannelID(_ id: String) -> Bool { channelID.isValid(id) }

    public static func isValidTypeName(_ name: String) -> Bool { channelTypeName.isValid(name) }

    /// `text` as an error message may show it: at most 64 characters, anything
    /// but printable ASCII escaped (`\u{0}`, `\u{430}`), so that a look-alike
    /// or an invisible character shows for what it is.
    public static func quoted(_ text: String) -> String {
        var shown = ""
        for scalar in text.unicodeScalars.prefix(64) {
            if scalar.value >= 0x20, scalar.value < 0x7F, scalar != "'", scalar != "\\" {
                shown.unicodeScalars.append(scalar)
            } else {
                shown += "\\u{\(String(scalar.value, radix: 16))}"
            }
        }
        return "'" + shown + (text.unicodeScalars.count > 64 ? "…" : "") + "'"
    }
}
