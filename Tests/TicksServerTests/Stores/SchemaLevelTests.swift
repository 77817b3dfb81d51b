import Foundation
import GRDB
import Testing
import TicksProtocol

@testable import TicksServer

/// A node held at an older release's schema (`--migrations-up-to`, a rolling
/// upgrade) reads and writes only what that schema has (`SchemaLevel`).
@Suite("Schema levels")
struct SchemaLevelTests {
    @Test("a level has exactly the migrations up to its own, and each one some code needs is one both dialects apply")
    func levels() {
        let sqlite = SQLiteSchema.migrator.migrations
        for migration in SchemaLevel.Migration.allCases {
            #expect(sqlite.contains(migration.rawValue), "\(migration.rawValue) is not a SQLite migration")
        }
        // The names both dialects apply, in the same order.
        #expect(sqlite.filter(SchemaLevel.order.contains) == SchemaLevel.order)
        for (position, name) in SchemaLevel.order.enumerated() {
            let level = SchemaLevel(upTo: name)
            for migration in SchemaLevel.Migration.allCases {
                let needed = SchemaLevel.order.firstIndex(of: migration.rawValue) ?? Int.max
                #expect(level.has(migration) == (needed <= position), "held at \(name): \(migration.rawValue)")
            }
        }
        #expect(SchemaLevel(upTo: nil) == .newest)
        // A name this binary does not know is a newer node's: it has every migration known here.
        #expect(SchemaLevel(upTo: "v99-from-a-newer-release") == .newest)
        #expect(SchemaLevel.Migration.allCases.allSatisfy(SchemaLevel.newest.has))
    }

    /// Held at each level from the previous release's (`v9-webhooks`, tests/python/test_upgrade.py)
    /// on, on PostgreSQL's real schema of that level: receipts, the pruner, sync and the app's
    /// settings answer, and what the schema cannot keep is refused with the migration it needs.
    /// Held at `v9-webhooks`, receipts failed for want of `receipt_log_pruned` until SchemaLevel.
    @Test(
        "a store held at each older level answers receipts, prunes, syncs, and refuses only what its schema lacks",
        .enabled(if: PostgresTestDatabase.url != nil),
        arguments: SchemaLevel.order.drop { $0 != "v9-webhooks" })
    func heldStore(level name: String) async throws {
        try await PostgresTestDatabase.withStore(migrationsUpTo: name) { store, _ in
            let level = SchemaLevel(upTo: name)
            #expect(store.schema == level)
            let now = Timestamp(microseconds: 1_700_000_000_000_000)
            let everyone = ReceiptAudience(fullChannelLimit: 100)
            _ = try await store.upsertUsers([User(id: "alice"), User(id: "bob")], now: now)
            let cid = ChannelID(type: "messaging", id: "held")
            let (channel, _) = try await store.createChannel(
                cid, createdBy: "alice", memberIDs: ["alice", "bob"], custom: [:], now: now)
            _ = try await store.sendMessage(
                NewMessage(id: "m1", userID: "alice", text: "hi", custom: [:]), to: channel, now: now)
            _ = try await store.markDelivered(
                "bob", [DeliveredTarget(channel: cid, messageID: "m1")], audience: everyone, now: now + .seconds(1))
            let read = try await store.markRead("bob", in: cid, upTo: "m1", audience: everyone, now: now + .seconds(2))
            #expect(read.update.moved(.read))

            let receipts = try #require(try await store.receipts(forMessage: "m1"))
            #expect(receipts.entries.map(\.userID) == ["bob"])
            #expect(receipts.entries.first?.readAt == now + .seconds(2), "the exact time, from the log")
            #expect(receipts.readByAll == level.has(.allMembers), "no \"read by all\" kept before v11")

            // Before v10 the schema cannot record where the log was pruned: the node prunes nothing.
            let pruned = try await store.pruneReceiptLog(before: now + .seconds(60), after: 0, limit: 100)
            #expect(((pruned?.deleted ?? 0) > 0) == level.has(.receiptLogRetention))
            #expect(
                try await store.receiptLogPrunedBefore() == (level.has(.receiptLogRetention) ? now + .seconds(60) : nil)
            )

            let changes = try await store.changes(in: cid, for: "bob", since: now - .seconds(1), limit: 100)
            #expect(changes.newMessages.map(\.id) == ["m1"])

            // A new database at v15 or later counts unread by positions; held before it, kept.
            #expect(
                try await store.appOptions()
                    == AppOptions(unreadCounting: level.has(.unreadPositions) ? .positions : .kept))
            await Self.expect(level.has(.appSettings), else: .appSettings) {
                _ = try await store.updateAppOptions(AppOptions.Change(reciprocalReadReceipts: true))
            }
            await Self.expect(level.has(.unreadPositions), else: level.has(.appSettings) ? .unreadPositions : .appSettings) {
                _ = try await store.updateAppOptions(AppOptions.Change(unreadCounting: .kept))
            }
            let message = try #require(try await store.message(id: "m1")).message
            await Self.expect(level.has(.played), else: .played) {
                _ = try await store.markPlayed(message, by: "bob", now: now + .seconds(3))
            }
        }
    }

    /// `body` succeeds when `allowed`, and is otherwise refused naming `needed`.
    private static func expect(
        _ allowed: Bool, else needed: SchemaLevel.Migration, _ body: () async throws -> Void,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        do {
            try await body()
            #expect(allowed, "held before \(needed.rawValue), yet it succeeded", sourceLocation: sourceLocation)
        } catch StoreError.schemaBefore(let migration) {
            #expect(
                !allowed && migration == needed.rawValue, "refused for \(migration)", sourceLocation: sourceLocation)
        } catch {
            Issue.record(error, sourceLocation: sourceLocation)
        }
    }

    @Test("SQLite refuses a database a newer Ticks migrated (a downgrade), unless allowed, and says which migrations")
    func sqliteRefusesANewerSchema() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ticks-newer-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("ticks.sqlite").path
        // Made by this release, then by a newer one (a migration this binary does not know).
        do {
            let made = try SQLiteEngine.open(path: path)
            try made.writer.write { db in
                try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('v99-from-a-newer-release')")
            }
        }
        #expect(throws: NewerSchemaError.self) { _ = try SQLiteEngine.open(path: path) }
        do {
            _ = try SQLiteEngine.open(path: path)
        } catch let error as NewerSchemaError {
            #expect(error.migrations == ["v99-from-a-newer-release"])
            #expect(error.description.contains("--allow-newer-schema"))
        }
        let allowed = try SQLiteEngine.open(path: path, allowingNewerSchema: true)
        let applied = try allowed.writer.read { db in try SQLiteSchema.migrator.appliedIdentifiers(db) }
        #expect(applied.isSuperset(of: SQLiteSchema.migrator.migrations))
        // A database this release made opens as before.
        let own = folder.appendingPathComponent("own.sqlite").path
        _ = try SQLiteEngine.open(path: own)
        _ = try SQLiteEngine.open(path: own)
    }
}
