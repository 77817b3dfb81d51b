import Foundation
import GRDB
import Testing
import TicksProtocol

@testable import TicksServer

/// The compatibility rule of docs/operations.md ("Upgrade a cluster"): a
/// release's migrations are additive, so the previous release runs on the new
/// schema (old and new nodes share one PostgreSQL database in a rolling
/// upgrade). Each store's schema is made at the previous release's newest
/// migration, then migrated to this release's; every table and column it had
/// must still be there, unless `Tests/Fixtures/previous-release.json` allows
/// its removal with a reason.
@Suite("Migrations are additive")
struct MigrationsAreAdditiveTests {
    struct PreviousRelease: Decodable {
        struct Removal: Decodable {
            var column: String
            var reason: String
        }
        var tag: String
        var newestMigration: String
        var removalsAllowed: [Removal]

        static func load() throws -> PreviousRelease {
            let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("Fixtures/previous-release.json")
            let decoder = JSONDecoder()
            decoder.keyDecodingStrategy = .convertFromSnakeCase
            return try decoder.decode(PreviousRelease.self, from: Data(contentsOf: file))
        }

        /// What of `before` is missing from `after` and not allowed to be: `table.column` names.
        func removals(from before: Set<String>, to after: Set<String>) -> [String] {
            before.subtracting(after).filter { column in
                !removalsAllowed.contains { allowed in
                    allowed.column == column
                        || (allowed.column.hasSuffix(".*") && column.hasPrefix(allowed.column.dropLast()))
                }
            }.sorted()
        }
    }

    /// Every `table.column` of a SQLite database.
    static let sqliteColumns = """
        SELECT m.name || '.' || p.name FROM sqlite_master m, pragma_table_info(m.name) p
        WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'
        """
    /// Every `table.column` of the store's PostgreSQL schema.
    static let postgresColumns = """
        SELECT table_name || '.' || column_name FROM information_schema.columns WHERE table_schema = current_schema()
        """

    /// Every `table.index` of the store's PostgreSQL schema.
    static let postgresIndexes = "SELECT tablename || '.' || indexname FROM pg_indexes WHERE schemaname = current_schema()"

    @Test("the previous release's tables and columns are all there after this release's migrations (SQLite)")
    func sqlite() throws {
        let previous = try PreviousRelease.load()
        #expect(SQLiteSchema.migrator.migrations.contains(previous.newestMigration))
        let queue = try DatabaseQueue()
        try SQLiteSchema.migrator.migrate(queue, upTo: previous.newestMigration)
        let before = Set(try queue.read { db in try String.fetchAll(db, sql: Self.sqliteColumns) })
        try SQLiteSchema.migrator.migrate(queue)
        let after = Set(try queue.read { db in try String.fetchAll(db, sql: Self.sqliteColumns) })
        #expect(before.contains("member.read_seq"), "the snapshot reads the schema")
        #expect(previous.removals(from: before, to: after) == [], "dropped or renamed since \(previous.tag)")
    }

    @Test(
        "the previous release's tables, columns and indexes are all there after this release's migrations (PostgreSQL)",
        .enabled(if: PostgresTestDatabase.url != nil))
    func postgres() async throws {
        let previous = try PreviousRelease.load()
        #expect(PostgresSchema.migrations.map(\.name).contains(previous.newestMigration))
        try await PostgresTestDatabase.withStore(migrationsUpTo: previous.newestMigration) { store, _ in
            let engine = try #require(store.unbounded as? PostgresEngine)
            let before = Set(try await engine.read { Fetch.texts(StoreQuery(stringLiteral: Self.postgresColumns)) })
            let indexesBefore = Set(try await engine.read { Fetch.texts(StoreQuery(stringLiteral: Self.postgresIndexes)) })
            try await PostgresSchema.migrate(engine.transactions)
            let after = Set(try await engine.read { Fetch.texts(StoreQuery(stringLiteral: Self.postgresColumns)) })
            #expect(before.contains("member.read_seq"), "the snapshot reads the schema")
            #expect(previous.removals(from: before, to: after) == [], "dropped or renamed since \(previous.tag)")
            // Its indexes too: the release before's queries may need them (v11's for R13's lowest positions).
            #expect(indexesBefore.contains("member.member_read_by_all"), "the snapshot reads the indexes")
            let indexesAfter = Set(try await engine.read { Fetch.texts(StoreQuery(stringLiteral: Self.postgresIndexes)) })
            #expect(indexesBefore.subtracting(indexesAfter).sorted() == [], "indexes dropped since \(previous.tag)")
        }
    }

    @Test("a removal is caught unless allowed with a reason, and a table allowed with .* covers its columns")
    func removalsAreCaught() throws {
        var previous = try PreviousRelease.load()
        previous.removalsAllowed = []
        let before: Set<String> = ["member.read_seq", "member.unread", "receipt_log.at"]
        #expect(previous.removals(from: before, to: ["member.read_seq"]) == ["member.unread", "receipt_log.at"])
        previous.removalsAllowed = [
            .init(column: "member.unread", reason: "test"), .init(column: "receipt_log.*", reason: "test"),
        ]
        #expect(previous.removals(from: before, to: ["member.read_seq"]) == [])
    }
}
