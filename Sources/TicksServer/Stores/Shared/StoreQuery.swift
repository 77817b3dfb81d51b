/// A statement written once for both stores, with its values kept apart from
/// its text: `"SELECT … WHERE id = \(id) AND \(in: "c.type", types)"`.
/// Interpolated values are always bound, never spliced; only `raw:` text
/// (constants of the store's own) goes into the SQL as it is.
///
/// `SQLDialect.render` writes it the way each database takes it: `?` or
/// `$1`, and a list as `IN (?, ?, …)` for SQLite or `= ANY($n)` (one array)
/// for PostgreSQL, so a list of any length is one statement there.
struct StoreQuery: ExpressibleByStringInterpolation, Sendable {
    enum Value: Sendable, Equatable {
        case int(Int64)
        case text(String)
        case null
    }

    indirect enum Part: Sendable {
        case text(String)
        case value(Value)
        /// `column IN (values)`.
        case list(column: String, values: [String])
        /// PostgreSQL's row lock; nothing in SQLite, whose single writer already serialises changes.
        case forUpdate(of: String?)
        /// PostgreSQL's `FOR NO KEY UPDATE`: as `forUpdate` against every other writer of the
        /// row, but not against a foreign key's check (`FOR KEY SHARE`). Nothing in SQLite.
        case forNoKeyUpdate(of: String?)
        /// PostgreSQL's `FOR UPDATE SKIP LOCKED`: the rows no other transaction holds, locked. Nothing in SQLite.
        case forUpdateSkipLocked
        /// PostgreSQL's weakest row lock (`FOR KEY SHARE`): a row that must stay while the
        /// statement's change commits; only a delete (or a key change) of it waits. Nothing in SQLite.
        case forKeyShare
        /// One array value (PostgreSQL only: statements that take a batch as arrays, `unnest`ed).
        case array(SQLArray)
        /// A text column ordered by its bytes, as SQLite orders text: PostgreSQL
        /// would otherwise follow the database's locale.
        case byteOrdered(column: String)
        /// PostgreSQL's transaction-scoped advisory lock on a key; `NULL` in SQLite, whose single writer already serialises changes.
        case advisoryLock(Int64)
        /// The first parts where the schema has the migration's tables and
        /// columns, the second on a PostgreSQL node held before it, whose
        /// tables lack them (`SQLDialect.render`).
        case onSchema(SchemaLevel.Migration, [Part], otherwise: [Part])
    }

    var parts: [Part]
    /// A statement PostgreSQL keeps prepared on each connection (parsed and
    /// planned once): its text must be the same on every call, only its values differ.
    var prepared: PreparedStatementName?

    init(parts: [Part]) { self.parts = parts }

    init(stringLiteral value: String) { parts = [.text(value)] }

    init(stringInterpolation: Interpolation) { parts = stringInterpolation.parts }

    struct Interpolation: StringInterpolationProtocol {
        var parts: [Part] = []

        init(literalCapacity: Int, interpolationCount: Int) {}

        mutating func appendLiteral(_ literal: String) { parts.append(.text(literal)) }
        mutating func appendInterpolation(_ value: Int64) { parts.append(.value(.int(value))) }
        mutating func appendInterpolation(_ value: Int) { parts.append(.value(.int(Int64(value)))) }
        mutating func appendInterpolation(_ value: String) { parts.append(.value(.text(value))) }
        mutating func appendInterpolation(_ value: String?) { parts.append(.value(value.map(Value.text) ?? .null)) }
        mutating func appendInterpolation(_ value: Int64?) { parts.append(.value(value.map(Value.int) ?? .null)) }
        /// `column IN (values)`; an empty list matches nothing.
        mutating func appendInterpolation(in column: String, _ values: [String]) {
            parts.append(.list(column: column, values: values))
        }
        /// Constant SQL of the store's own (column lists, a computed expression), never input.
        mutating func appendInterpolation(raw text: String) { parts.append(.text(text)) }
        /// An array bound as one value; PostgreSQL's statements only.
        mutating func appendInterpolation(array values: [String]) { parts.append(.array(.texts(values))) }
        mutating func appendInterpolation(array values: [Int64]) { parts.append(.array(.ints(values))) }
        /// ` FOR UPDATE [OF table]` in PostgreSQL.
        mutating func appendInterpolation(forUpdateOf table: String?) { parts.append(.forUpdate(of: table)) }
        /// ` FOR NO KEY UPDATE [OF table]` in PostgreSQL.
        mutating func appendInterpolation(forNoKeyUpdateOf table: String?) { parts.append(.forNoKeyUpdate(of: table)) }
        /// ` FOR UPDATE SKIP LOCKED` in PostgreSQL.
        mutating func appendInterpolation(forUpdateSkipLocked: Void) { parts.append(.forUpdateSkipLocked) }
        /// ` FOR KEY SHARE` in PostgreSQL.
        mutating func appendInterpolation(forKeyShare: Void) { parts.append(.forKeyShare) }
        /// A text column to order by, in byte order in both stores.
        mutating func appendInterpolation(byteOrdered column: String) { parts.append(.byteOrdered(column: column)) }
        /// `pg_advisory_xact_lock` on `key` in the current schema in PostgreSQL, `NULL` in SQLite.
        mutating func appendInterpolation(advisoryLock key: Int64) { parts.append(.advisoryLock(key)) }
        /// Another query's parts, as they are (a fragment the store builds, such as `StoreSQL.memberUnread`).
        mutating func appendInterpolation(_ query: StoreQuery) { parts += query.parts }
        /// `query` where the schema has `v15-unread-positions`'s columns, `otherwise` on a node held before it.
        mutating func appendInterpolation(unreadPositions query: StoreQuery, otherwise: StoreQuery) {
            appendInterpolation(on: .unreadPositions, query, otherwise: otherwise)
        }
        /// `query` where the schema has what `migration` made, `otherwise` on a node held before it.
        mutating func appendInterpolation(on migration: SchemaLevel.Migration, _ query: StoreQuery, otherwise: StoreQuery) {
            parts.append(.onSchema(migration, query.parts, otherwise: otherwise.parts))
        }
    }

    static func + (left: StoreQuery, right: StoreQuery) -> StoreQuery { StoreQuery(parts: left.parts + right.parts) }

    /// Whether it takes PostgreSQL's advisory lock (`SELECT \(advisoryLock: key)`): SQLite runs
    /// none of these, its single writer serialising every change already.
    var takesAdvisoryLock: Bool {
        parts.contains { if case .advisoryLock = $0 { true } else { false } }
    }

    /// This statement, kept prepared under `name` where the engine can (PostgreSQL).
    func prepared(as name: PreparedStatementName) -> StoreQuery {
        var query = self
        query.prepared = name
        return query
    }
}

/// The statements worth preparing: those of every receipt, and every send's: its call, the
/// channel it locks (twice when it shares a transaction with others: once for all, once for its
/// number), its channel type and its author.
enum PreparedStatementName: String, Sendable, CaseIterable {
    case moves
    case channelWithMembership
    case send
    case lockedChannel
    case channelType
    case users
}

/// An array bound as one value, in the dialect that takes arrays.
enum SQLArray: Sendable, Equatable {
    case texts([String])
    case ints([Int64])
}

/// What a statement binds: single values, or (PostgreSQL) arrays.
enum SQLBinding: Sendable, Equatable {
    case value(StoreQuery.Value)
    case array(SQLArray)
}

extension [SQLBinding] {
    /// Throws `StoreError.unstorableText` when a value holds U+0000: both
    /// engines call it on what they are about to bind, so that text
    /// PostgreSQL cannot carry is refused alike by SQLite.
    func requireStorable() throws {
        func storable(_ text: String) -> Bool { !text.utf8.contains(0) }
        for binding in self {
            switch binding {
            case .value(.text(let text)): guard storable(text) else { throw StoreError.unstorableText }
            case .array(.texts(let texts)): guard texts.allSatisfy(storable) else { throw StoreError.unstorableText }
            case .value(.int), .value(.null), .array(.ints): continue
            }
        }
    }
}

/// Where the two databases write the same statement differently.
enum SQLDialect: Sendable {
    case sqlite
    case postgres

    /// The statement's text in this dialect and the values to bind, in order.
    /// `schema`: how far the schema goes (the newest, but on a PostgreSQL
    /// node held before some migration).
    func render(_ sql: StoreQuery, schema: SchemaLevel = .newest) -> (text: String, bindings: [SQLBinding]) {
        var text = ""
        var bindings: [SQLBinding] = []
        func placeholder() -> String {
            switch self {
            case .sqlite: "?"
            case .postgres: "$\(bindings.count)"
            }
        }
        func append(_ parts: [StoreQuery.Part]) {
            for part in parts {
                switch part {
                case .text(let literal):
                    text += literal
                case .value(let value):
                    bindings.append(.value(value))
                    text += placeholder()
                case .list(let column, let values):
                    switch self {
                    case .sqlite:
                        // An empty list matches nothing: `IN (NULL)` is never true.
                        text += "\(column) IN (\(values.isEmpty ? "NULL" : Array(repeating: "?", count: values.count).joined(separator: ", ")))"
                        bindings += values.map { .value(.text($0)) }
                    case .postgres:
                        bindings.append(.array(.texts(values)))
                        text += "\(column) = ANY(\(placeholder()))"
                    }
                case .forUpdate(let table):
                    if self == .postgres { text += " FOR UPDATE" + (table.map { " OF \($0)" } ?? "") }
                case .forNoKeyUpdate(let table):
                    if self == .postgres { text += " FOR NO KEY UPDATE" + (table.map { " OF \($0)" } ?? "") }
                case .forKeyShare:
                    if self == .postgres { text += " FOR KEY SHARE" }
                case .forUpdateSkipLocked:
                    if self == .postgres { text += " FOR UPDATE SKIP LOCKED" }
                case .byteOrdered(let column):
                    text += self == .postgres ? "\(column) COLLATE \"C\"" : column
                case .advisoryLock(let key):
                    switch self {
                    case .sqlite: text += "NULL"
                    case .postgres:
                        // Keyed by schema too: several apps (or test runs) may share one database, one schema each.
                        bindings.append(.value(.int(key)))
                        text += "pg_advisory_xact_lock(hashtextextended(current_schema() || '/' || \(placeholder())::text, 0))"
                    }
                case .array(let array):
                    precondition(self == .postgres, "arrays are bound only in PostgreSQL's statements")
                    bindings.append(.array(array))
                    text += placeholder()
                case .onSchema(let migration, let newer, let otherwise):
                    append(schema.has(migration) ? newer : otherwise)
                }
            }
        }
        append(sql.parts)
        return (text, bindings)
    }
}

/// A result row, read by position: every store decodes the columns its
/// statement lists, in that order (`StoreRows`), whatever the database.
protocol StoreRow {
    func int(_ index: Int) throws -> Int64
    func optionalInt(_ index: Int) throws -> Int64?
    func text(_ index: Int) throws -> String
    func optionalText(_ index: Int) throws -> String?
    func bool(_ index: Int) throws -> Bool
}

/// Who made a change, kept with it (`v14-actors`: a message's `changed_by`,
/// a channel's `updated_by`, `truncated_by` and `deleted_by`) for `POST
/// /sync` to name, as the live event does. `kept` is false on a node held
/// before that migration, whose schema has no such columns: it sets none.
struct ChangeActor: Sendable {
    var userID: String?
    var kept: Bool

    /// `, column = userID` (NULL for none), or nothing when the schema keeps no actors.
    func set(_ column: StaticString) -> StoreQuery {
        kept ? ", \(raw: "\(column)") = \(userID)" : ""
    }
}
