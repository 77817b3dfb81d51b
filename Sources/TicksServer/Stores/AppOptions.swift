import TicksProtocol

/// The app's settings that change while it runs (`PATCH /app`), kept in the
/// store so that every node applies the same ones.
public struct AppOptions: Sendable, Equatable {
    /// Reciprocal read receipts (R15): a user who hides their reads (R10)
    /// sees the others' reads only as deliveries. Off by default.
    public var reciprocalReadReceipts = false
    /// How sends count unread (R7, `v15-unread-positions`): `kept` where no
    /// row says otherwise (an upgraded PostgreSQL database, until its
    /// operator turns positions on once no node of the release before runs).
    public var unreadCounting = UnreadCounting.kept

    public init(reciprocalReadReceipts: Bool = false, unreadCounting: UnreadCounting = .kept) {
        self.reciprocalReadReceipts = reciprocalReadReceipts
        self.unreadCounting = unreadCounting
    }

    /// How sends count unread (R7): by moving their channel's `counted`, so
    /// that a send writes no member's row (`positions`), or by adding one to
    /// every other member's kept count (`kept`: what the release before did,
    /// so an upgraded PostgreSQL database counts so while nodes of that
    /// release may share it). Counts read the same either way
    /// (`StoreSQL.memberUnread`); only what a send writes differs.
    public enum UnreadCounting: String, Codable, CaseIterable, Sendable {
        case positions
        case kept

        /// The value as the store keeps it (JSON).
        var stored: String { "\"\(rawValue)\"" }
    }

    /// The stored rows, name → JSON value; a name this node does not know (a newer node's) is skipped.
    init(settings: [String: String]) throws {
        if let value = settings[Change.CodingKeys.reciprocalReadReceipts.rawValue] {
            reciprocalReadReceipts = try JSONCoding.decode(Bool.self, from: value)
        }
        if let value = settings[Change.CodingKeys.unreadCounting.rawValue] {
            unreadCounting = try JSONCoding.decode(UnreadCounting.self, from: value)
        }
    }

    /// The settings a `PATCH /app` body names; the others stay as they are.
    public struct Change: Decodable, Sendable, Equatable {
        public var reciprocalReadReceipts: Bool?
        public var unreadCounting: UnreadCounting?

        public init(reciprocalReadReceipts: Bool? = nil, unreadCounting: UnreadCounting? = nil) {
            self.reciprocalReadReceipts = reciprocalReadReceipts
            self.unreadCounting = unreadCounting
        }

        enum CodingKeys: String, CodingKey, CaseIterable {
            case reciprocalReadReceipts = "reciprocal_read_receipts"
            case unreadCounting = "unread_counting"
        }

        /// The rows to write: each named setting and its JSON value.
        func rows() throws -> [(String, String)] {
            [
                reciprocalReadReceipts.map { (CodingKeys.reciprocalReadReceipts.rawValue, $0 ? "true" : "false") },
                unreadCounting.map { (CodingKeys.unreadCounting.rawValue, $0.stored) },
            ].compactMap { $0 }
        }
    }
}
