import GRDB

/// The SQLite schema, as named migrations. A shipped migration is never edited:
/// add a new one.
enum SQLiteSchema {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-receipts") { db in
            try db.execute(
                sql: """
                    CREATE TABLE user (
                      id TEXT PRIMARY KEY NOT NULL,
                      body TEXT NOT NULL,             -- the user as JSON
                      created_at INTEGER NOT NULL,    -- microseconds since 1970, as every *_at
                      updated_at INTEGER NOT NULL
                    );
                    CREATE TABLE channel_type (
                      name TEXT PRIMARY KEY NOT NULL,
                      config TEXT NOT NULL            -- ChannelConfig as JSON
                    );
                    CREATE TABLE channel (
                      pk INTEGER PRIMARY KEY AUTOINCREMENT,
                      type TEXT NOT NULL,
                      id TEXT NOT NULL,
                      created_by TEXT,
                      custom TEXT NOT NULL DEFAULT '{}',
                      last_seq INTEGER NOT NULL DEFAULT 0,
                      last_message_at INTEGER,
                      created_at INTEGER NOT NULL,
                      updated_at INTEGER NOT NULL,
                      UNIQUE (type, id)
                    );
                    -- One row per member: the two cursors of the read state.
                    CREATE TABLE member (
                      channel_pk INTEGER NOT NULL REFERENCES channel(pk),
                      user_id TEXT NOT NULL,
                      read_seq INTEGER NOT NULL,
                      read_at INTEGER NOT NULL,
                      delivered_seq INTEGER NOT NULL,
                      delivered_at INTEGER NOT NULL,
                      created_at INTEGER NOT NULL,
                      PRIMARY KEY (channel_pk, user_id),
                      CHECK (read_seq <= delivered_seq)
                    ) WITHOUT ROWID;
                    CREATE INDEX member_by_user ON member(user_id, channel_pk);
                    CREATE TABLE message (
                      channel_pk INTEGER NOT NULL REFERENCES channel(pk),
                      seq INTEGER NOT NULL,
                      id TEXT NOT NULL UNIQUE,
                      user_id TEXT NOT NULL,
                      text TEXT NOT NULL,
                      custom TEXT NOT NULL DEFAULT '{}',
                      created_at INTEGER NOT NULL,
                      PRIMARY KEY (channel_pk, seq)
                    ) WITHOUT ROWID;
                    -- The receipt log: one row per cursor move, never one per message per member.
                    CREATE TABLE cursor_move (
                      id INTEGER PRIMARY KEY AUTOINCREMENT,
                      channel_pk INTEGER NOT NULL,
                      user_id TEXT NOT NULL,
                      kind INTEGER NOT NULL,          -- 0 delivered, 1 read
                      seq INTEGER NOT NULL,
                      at INTEGER NOT NULL
                    );
                    CREATE INDEX cursor_move_by_member ON cursor_move(channel_pk, user_id, kind, id);
                    """)
        }
        // Unread counts from the dense sequence numbers (a channel's messages are
        // numbered 1, 2, 3, … with no gaps): messages after a cursor are
        // `last_seq - read_seq`, less the member's own, found by author. And the
        // member count kept on the channel rather than counted on every read.
        migrator.registerMigration("v2-counts") { db in
            try db.execute(
                sql: """
                    ALTER TABLE channel ADD COLUMN member_count INTEGER NOT NULL DEFAULT 0;
                    UPDATE channel SET member_count = (SELECT COUNT(*) FROM member m WHERE m.channel_pk = channel.pk);
                    CREATE INDEX message_by_author ON message(channel_pk, user_id, seq);
                    """)
        }
        // Channel moderators may add and remove members, as the creator may.
        migrator.registerMigration("v3-channel-roles") { db in
            try db.execute(sql: "ALTER TABLE member ADD COLUMN channel_role TEXT NOT NULL DEFAULT 'channel_member'")
        }
        // The same table names as PostgreSQL's (`user` is a reserved word there).
        migrator.registerMigration("v4-app-user") { db in
            try db.execute(sql: "ALTER TABLE user RENAME TO app_user")
        }
        migrator.registerMigration("v5-unread-counters") { db in
            for statement in StoreMigrations.unreadCounters(integer: "INTEGER") { try db.execute(sql: statement) }
        }
        migrator.registerMigration("v6-message-lifecycle") { db in
            for statement in StoreMigrations.messageLifecycle(integer: "INTEGER") { try db.execute(sql: statement) }
        }
        migrator.registerMigration("v7-threads") { db in
            for statement in StoreMigrations.threads(integer: "INTEGER") { try db.execute(sql: statement) }
        }
        migrator.registerMigration("v8-sync") { db in
            for statement in StoreMigrations.sync(integer: "INTEGER") { try db.execute(sql: statement) }
        }
        migrator.registerMigration("v9-webhooks") { db in
            let key = "INTEGER PRIMARY KEY AUTOINCREMENT"
            for statement in StoreMigrations.webhooks(integer: "INTEGER", key: key) { try db.execute(sql: statement) }
        }
        migrator.registerMigration("v10-receipt-log-retention") { db in
            for statement in StoreMigrations.receiptLogRetention(integer: "INTEGER") { try db.execute(sql: statement) }
        }
        migrator.registerMigration("v11-all-members") { db in
            let sharing = { (field: String) in
                "CASE WHEN json_extract(body, '$.privacy_settings.\(field).enabled') = 0 THEN 0 ELSE 1 END"
            }
            for statement in StoreMigrations.allMembers(integer: "INTEGER", sharing: sharing) { try db.execute(sql: statement) }
        }
        migrator.registerMigration("v12-app-settings") { db in
            for statement in StoreMigrations.appSettings() { try db.execute(sql: statement) }
        }
        migrator.registerMigration("v13-played") { db in
            for statement in StoreMigrations.played(integer: "INTEGER") { try db.execute(sql: statement) }
        }
        migrator.registerMigration("v14-actors") { db in
            for statement in StoreMigrations.actors() { try db.execute(sql: statement) }
        }
        // One process serves the file: it counts by positions at once.
        migrator.registerMigration("v15-unread-positions") { db in
            for statement in StoreMigrations.unreadPositions(integer: "INTEGER", newDatabase: nil) {
                try db.execute(sql: statement)
            }
        }
        // SQLite adds only virtual generated columns to a table (computed when read; their index keeps
        // them). One process serves the file: v11's indexes go at once.
        migrator.registerMigration("v16-counted-columns") { db in
            for statement in StoreMigrations.countedColumns(integer: "INTEGER", stored: false, newDatabase: nil) {
                try db.execute(sql: statement)
            }
        }
        return migrator
    }

    /// The migrations applied to `db` that this binary does not know: a newer
    /// Ticks made them (empty for a database this one made, or a new one).
    static func unknownMigrations(in db: Database) throws -> [String] {
        try migrator.appliedIdentifiers(db).subtracting(migrator.migrations).sorted()
    }
}

/// A database whose schema has migrations this binary does not know: a newer
/// Ticks served it, so this older one might misread or corrupt what it wrote
/// (a downgrade). Refused unless the operator says otherwise
/// (`ticks serve --allow-newer-schema`).
public struct NewerSchemaError: Error, CustomStringConvertible {
    public let path: String
    public let migrations: [String]

    public var description: String {
        "\(path) was last served by a newer Ticks (its schema has migrations \(migrations.joined(separator: ", ")), "
            + "which this version does not know): run that version, or restore a backup this version made "
            + "(ticks restore). --allow-newer-schema serves it anyway."
    }
}
