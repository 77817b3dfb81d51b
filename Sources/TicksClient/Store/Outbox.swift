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

    init(_ database: LocalDatabase) {
        self.database = database.writer
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
