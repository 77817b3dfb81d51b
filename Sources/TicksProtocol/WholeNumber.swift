/// An integer a client sent, read so that a number that is not a whole
/// 64-bit one (a fraction, `1e309`, one past Int64's ends) or not a number at
/// all is an error that names its field. Foundation's decoder says only "the
/// given data was not valid JSON" for the first kind, with no field, and a
/// client is owed the field and the rule (docs/limits.md, "Numbers").
public struct WholeNumber: Decodable, Sendable, Hashable {
    public var value: Int

    public init(_ value: Int) { self.value = value }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        guard let value = try? container.decode(Int.self) else {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "expected a whole number from \(Int.min) to \(Int.max)")
        }
        self.value = value
    }
}

extension KeyedDecodingContainer {
    /// The integer at `key`, if present, read as `WholeNumber` reads it.
    public func decodeWholeNumber(forKey key: Key) throws -> Int? {
        try decodeIfPresent(WholeNumber.self, forKey: key)?.value
    }
}
