import Foundation
import GRDB
import TicksProtocol

/// Where the outbox keeps messages that are not yet on the server.
public enum OutboxLocation: Sendable, Equatable {
    /// A private in-memory database: lost when the process ends (tests).
    case inMemory
    /// A SQLite file, created if needed: pending messages survive restarts.
    case file(URL)
}

/// A message the current user wrote that the server has not acknowledged.
struct OutboxEntry: Codable, Sendable, Equatable {
    enum State: String, Codable, Sendable {
        case pending
        case failed
    }

    var id: String
    var userID: String
    var cid: String
    var text: String
    /// The message's extra fields as a JSON object.
    var custom: String
    /// Microseconds since 1970, when the user wrote it.
    var createdAt: Int64
    var state: State
    var attempts: Int
    var lastError: String?

    enum CodingKeys: String, CodingKey {
        case id
        case userID = "user_id"
        case cid, text, custom
        case createdAt = "created_at"
        case state, attempts
        case lastError = "last_error"
    }

    var extraData: [String: JSONValue] {
        (try? JSONDecoder().decode([String: JSONValue].self, from: Data(custom.utf8))) ?? [:]
    }
}

extension OutboxEntry: FetchableRecord, PersistableRecord {
    static let databaseTableName = "outbox_message"
}

/// The durable outbox (GRDB): a message is written here before any network
/// call and removed only once the server has acknowledged it, so nothing the
/// user wrote is lost to a crash, a restart or a dead network.
final class Outbox: Sendable {
    private let database: any DatabaseWriter

    init(_ location: OutboxLocation) throws {
        switch location {
        case .inMemory:
            database = try DatabaseQueue()
        case .file(let url):
            try FileManager.default.createDirectory(
                at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            var configuration = Configuration()
            configuration.prepareDatabase { db in
                // An acknowledged write is on disk before `send` returns.
                try db.execute(sql: "PRAGMA synchronous = FULL")
            }
            database = try DatabaseQueue(path: url.path, configuration: configuration)
        }
        try Self.migrator.migrate(database)
    }

    /// Named migrations; a shipped one is never edited.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-outbox") { db in
            try db.execute(
                sql: """
                    CREATE TABLE outbox_message (
                      id TEXT PRIMARY KEY NOT NULL,
                      user_id TEXT NOT NULL,
                      cid TEXT NOT NULL,
                      text TEXT NOT NULL,
                      custom TEXT NOT NULL DEFAULT '{}',
                      created_at INTEGER NOT NULL,      -- microseconds since 1970
                      state TEXT NOT NULL,              -- pending | failed
                      attempts INTEGER NOT NULL DEFAULT 0,
                      last_error TEXT
                    );
                    CREATE INDEX outbox_by_user ON outbox_message(user_id, created_at);
                    """)
        }
        return migrator
    }

    func add(_ entry: OutboxEntry) async throws {
        try await database.write { db in try entry.insert(db) }
    }

    /// The user's messages, oldest first.
    func entries(of userID: String) async throws -> [OutboxEntry] {
        try await database.read { db in
            try OutboxEntry.fetchAll(
                db, sql: "SELECT * FROM outbox_message WHERE user_id = ? ORDER BY created_at, id", arguments: [userID])
        }
    }

    func update(_ entry: OutboxEntry) async throws {
        try await database.write { db in try entry.update(db) }
    }

    /// The server has the message: it leaves the outbox.
    func remove(_ id: String) async throws {
        _ = try await database.write { db in try OutboxEntry.deleteOne(db, key: id) }
    }
}
