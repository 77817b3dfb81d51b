import Foundation
import GRDB

/// The SDK's one SQLite database on the device (GRDB): the outbox of unsent
/// messages and the cache of channels, in the file `OutboxLocation` names.
final class LocalDatabase: Sendable {
    let writer: any DatabaseWriter

    init(_ location: OutboxLocation) throws {
        switch location {
        case .inMemory:
            writer = try DatabaseQueue()
        case .file(let url):
            try FileManager.default.createDirectory(
                at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            var configuration = Configuration()
            // Another connection to the file (a client still flushing its cache as the next
            // one opens, an app and its notification extension) is waited for, not an error.
            configuration.busyMode = .timeout(5)
            configuration.prepareDatabase { db in
                // An acknowledged write is on disk before `send` returns.
                try db.execute(sql: "PRAGMA synchronous = FULL")
            }
            writer = try DatabaseQueue(path: url.path, configuration: configuration)
        }
        try Self.migrator.migrate(writer)
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
        // The channel cache (`ChannelCache`): per user, each channel's head
        // (channel, members, read states, newest message) apart from its
        // messages, so the heads of every channel load at once and a
        // channel's messages only when it is opened.
        migrator.registerMigration("v2-channel-cache") { db in
            try db.execute(
                sql: """
                    CREATE TABLE cached_channel (
                      user_id TEXT NOT NULL,
                      cid TEXT NOT NULL,
                      head TEXT NOT NULL,               -- CachedChannel.Head as JSON
                      messages TEXT NOT NULL,           -- [Message] as JSON, oldest first
                      last_activity INTEGER NOT NULL,   -- microseconds: the newest message, else the creation
                      bytes INTEGER NOT NULL,           -- length of head and messages
                      PRIMARY KEY (user_id, cid)
                    ) WITHOUT ROWID;
                    CREATE INDEX cached_channel_by_activity ON cached_channel(user_id, last_activity);
                    CREATE TABLE sync_state (
                      user_id TEXT PRIMARY KEY NOT NULL,
                      synced_through INTEGER NOT NULL   -- microseconds, server time
                    );
                    """)
        }
        return migrator
    }
}
