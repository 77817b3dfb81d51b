import TicksProtocol

/// The app's settings that change while it runs (`PATCH /app`), kept in the
/// store so that every node applies the same ones.
public struct AppOptions: Sendable, Equatable {
    /// Reciprocal read receipts (R15): a user who hides their reads (R10)
    /// sees the others' reads only as deliveries. Off by default.
    public var reciprocalReadReceipts = false

    public init(reciprocalReadReceipts: Bool = false) {
        self.reciprocalReadReceipts = reciprocalReadReceipts
    }

    /// The stored rows, name → JSON value; a name this node does not know (a newer node's) is skipped.
    init(settings: [String: String]) throws {
        if let value = settings[Change.CodingKeys.reciprocalReadReceipts.rawValue] {
            reciprocalReadReceipts = try JSONCoding.decode(Bool.self, from: value)
        }
    }

    /// The settings a `PATCH /app` body names; the others stay as they are.
    public struct Change: Decodable, Sendable, Equatable {
        public var reciprocalReadReceipts: Bool?

        public init(reciprocalReadReceipts: Bool? = nil) { self.reciprocalReadReceipts = reciprocalReadReceipts }

        enum CodingKeys: String, CodingKey, CaseIterable {
            case reciprocalReadReceipts = "reciprocal_read_receipts"
        }

        /// The rows to write: each named setting and its JSON value.
        func rows() throws -> [(String, String)] {
            [reciprocalReadReceipts.map { (CodingKeys.reciprocalReadReceipts.rawValue, $0 ? "true" : "false") }]
                .compactMap { $0 }
        }
    }
}
