/// How far the schema a store serves goes: the last migration this node
/// applies, compared by name in the order both dialects apply them. Always
/// the newest, except on a PostgreSQL node told to stop earlier
/// (`--migrations-up-to`: an older release's schema, in a rolling upgrade),
/// whose code then reads and writes only what that schema has.
struct SchemaLevel: Sendable, Equatable {
    /// The migrations whose tables or columns some code reads only where they exist, each
    /// named as both dialects name it (`SQLiteSchema`, `PostgresSchema`).
    enum Migration: String, CaseIterable, Sendable {
        /// `receipt_log_pruned`: where the receipt log was pruned (receipts, the pruner).
        case receiptLogRetention = "v10-receipt-log-retention"
        /// R13's columns and indexes: "read by all" and "delivered to all".
        case allMembers = "v11-all-members"
        /// `app_setting`: the app's settings (R15's reciprocal read receipts).
        case appSettings = "v12-app-settings"
        /// `message_play`: R14's plays.
        case played = "v13-played"
        /// Who made a change (`message.changed_by`, `channel.updated_by`, …), for `POST /sync`.
        case actors = "v14-actors"
        /// `channel.counted` and `member.counted_at`: a member's unread count
        /// kept as of a position of the channel (`StoreSQL.memberUnread`), so
        /// that a send need not write every member's row.
        case unreadPositions = "v15-unread-positions"
        /// `member.in_group` and R13's counted positions as indexed columns of their own
        /// (`StoreSQL.countedColumn`), in place of v11's indexes of expressions.
        case countedColumns = "v16-counted-columns"
    }

    /// The migrations, in the order they are applied (both dialects apply the same names).
    static let order = PostgresSchema.migrations.map(\.name)

    /// The last migration applied: a position in `order`.
    private let last: Int

    /// Every migration this binary knows.
    static let newest = SchemaLevel(last: order.count - 1)

    /// Up to the migration before `migration`: the schema of a node held just before it.
    static func before(_ migration: Migration) -> SchemaLevel {
        SchemaLevel(last: (order.firstIndex(of: migration.rawValue) ?? order.count) - 1)
    }

    private init(last: Int) { self.last = last }

    /// Up to the migration named `name`: every one when nil, or for a name this binary does not
    /// know (a newer node's: it has all of this binary's).
    init(upTo name: String?) {
        self.last = name.flatMap { Self.order.firstIndex(of: $0) } ?? Self.order.count - 1
    }

    /// Where each migration some code needs comes in `order` (none: never applied).
    private static let positions: [Migration: Int] = Dictionary(
        uniqueKeysWithValues: Migration.allCases.compactMap { m in order.firstIndex(of: m.rawValue).map { (m, $0) } })

    /// Whether the schema has what `migration` made.
    func has(_ migration: Migration) -> Bool {
        Self.positions[migration].map { $0 <= last } ?? false
    }

    /// The refusal of a change that needs `migration` on a schema held before it.
    func require(_ migration: Migration) throws {
        guard has(migration) else { throw StoreError.schemaBefore(migration: migration.rawValue) }
    }
}
