import Logging
import PostgresNIO

/// The PostgreSQL schema, as named migrations applied in order at start. A
/// shipped migration is never edited: add a new one. Nodes starting together
/// take turns through an advisory lock, so each migration runs once.
enum PostgresSchema {
    struct Migration {
        let name: String
        let statements: [String]
    }

    static let migrations: [Migration] = [
        Migration(
            name: "v1-receipts",
            statements: [
                """
                CREATE TABLE app_user (
                  id TEXT PRIMARY KEY,
                  body TEXT NOT NULL,             -- the user as JSON
                  created_at BIGINT NOT NULL,     -- microseconds since 1970, as every *_at
                  updated_at BIGINT NOT NULL
                )
                """,
                "CREATE TABLE channel_type (name TEXT PRIMARY KEY, config TEXT NOT NULL)",
                """
                CREATE TABLE channel (
                  pk BIGSERIAL PRIMARY KEY,
                  type TEXT NOT NULL,
                  id TEXT NOT NULL,
                  created_by TEXT,
                  custom TEXT NOT NULL DEFAULT '{}',
                  last_seq BIGINT NOT NULL DEFAULT 0,
                  last_message_at BIGINT,
                  member_count BIGINT NOT NULL DEFAULT 0,
                  created_at BIGINT NOT NULL,
                  updated_at BIGINT NOT NULL,
                  UNIQUE (type, id)
                )
                """,
                """
                CREATE TABLE member (
                  channel_pk BIGINT NOT NULL REFERENCES channel(pk),
                  user_id TEXT NOT NULL,
                  read_seq BIGINT NOT NULL,
                  read_at BIGINT NOT NULL,
                  delivered_seq BIGINT NOT NULL,
                  delivered_at BIGINT NOT NULL,
                  created_at BIGINT NOT NULL,
                  PRIMARY KEY (channel_pk, user_id),
                  CHECK (read_seq <= delivered_seq)
                )
                """,
                "CREATE INDEX member_by_user ON member (user_id, channel_pk)",
                """
                CREATE TABLE message (
                  channel_pk BIGINT NOT NULL REFERENCES channel(pk),
                  seq BIGINT NOT NULL,
                  id TEXT NOT NULL UNIQUE,
                  user_id TEXT NOT NULL,
                  text TEXT NOT NULL,
                  custom TEXT NOT NULL DEFAULT '{}',
                  created_at BIGINT NOT NULL,
                  PRIMARY KEY (channel_pk, seq)
                )
                """,
                "CREATE INDEX message_by_author ON message (channel_pk, user_id, seq)",
                """
                CREATE TABLE cursor_move (          -- the receipt log: one row per cursor move
                  id BIGSERIAL PRIMARY KEY,
                  channel_pk BIGINT NOT NULL,
                  user_id TEXT NOT NULL,
                  kind SMALLINT NOT NULL,           -- 0 delivered, 1 read
                  seq BIGINT NOT NULL,
                  at BIGINT NOT NULL
                )
                """,
                "CREATE INDEX cursor_move_by_member ON cursor_move (channel_pk, user_id, kind, id)",
                """
                CREATE TABLE event_batch (          -- event batches too large for a NOTIFY payload
                  id BIGSERIAL PRIMARY KEY,
                  body TEXT NOT NULL,
                  created_at TIMESTAMPTZ NOT NULL DEFAULT now()
                )
                """,
            ]),
        // Channel moderators may add and remove members, as the creator may.
        Migration(
            name: "v3-channel-roles",
            statements: ["ALTER TABLE member ADD COLUMN channel_role TEXT NOT NULL DEFAULT 'channel_member'"]),
        Migration(name: "v5-unread-counters", statements: StoreMigrations.unreadCounters(integer: "BIGINT")),
        Migration(name: "v6-message-lifecycle", statements: StoreMigrations.messageLifecycle(integer: "BIGINT")),
        Migration(name: "v7-threads", statements: StoreMigrations.threads(integer: "BIGINT")),
        Migration(name: "v8-sync", statements: StoreMigrations.sync(integer: "BIGINT")),
        Migration(
            name: "v9-webhooks", statements: StoreMigrations.webhooks(integer: "BIGINT", key: "BIGSERIAL PRIMARY KEY")),
        Migration(
            name: "v10-receipt-log-retention", statements: StoreMigrations.receiptLogRetention(integer: "BIGINT")),
        Migration(
            name: "v11-all-members",
            statements: StoreMigrations.allMembers(integer: "BIGINT") { field in
                "CASE WHEN (body::jsonb #>> '{privacy_settings,\(field),enabled}') = 'false' THEN 0 ELSE 1 END"
            }),
        Migration(name: "v12-app-settings", statements: StoreMigrations.appSettings()),
        Migration(name: "v13-played", statements: StoreMigrations.played(integer: "BIGINT")),
        Migration(name: "v14-actors", statements: StoreMigrations.actors()),
        // Nodes of the release before may still serve an upgraded database: it keeps counting as they
        // do. A new one (its first migration applied in this transaction, at its `now()`) counts by positions.
        Migration(
            name: "v15-unread-positions",
            statements: StoreMigrations.unreadPositions(integer: "BIGINT", newDatabase: newDatabase)),
        Migration(
            name: "v16-counted-columns",
            statements: StoreMigrations.countedColumns(integer: "BIGINT", stored: true, newDatabase: newDatabase)),
    ]

    /// True in the migrations' transaction that made the database: its first migration was
    /// applied in it (at its `now()`). Nodes of the release before may serve any other, even an empty one.
    static let newDatabase = "EXISTS (SELECT 1 FROM ticks_migration WHERE name = 'v1-receipts' AND applied_at = now())"

    /// An arbitrary constant: the advisory lock that serialises migrations.
    static let migrationLock: Int64 = 0x7469_636B_735F_6D67

    /// How often a node starting on a server in recovery asks again.
    static let recoveryPoll = Duration.seconds(2)

    /// Returns once the server is out of recovery. One in recovery (a standby, or a point-in-time
    /// recovery not yet promoted: docs/operations.md) takes no migrations, writes or LISTEN, and
    /// the driver's error for that says only "Generic description": so a node starting on one
    /// says so in plain words, once, and asks again every `recoveryPoll` until it is promoted. Each
    /// question has the store's deadline (a server gone silent is unavailable, as for any call); the
    /// wait as a whole has none, as the migrations after it have none.
    static func waitForPromotion(_ transactions: PostgresTransactions, deadline: StoreDeadline) async throws {
        var waited = false
        func inRecovery() async throws -> Bool {
            try await deadline.run {
                try await transactions.run(.read) { session in
                    try await session.run(Fetch.texts("SELECT pg_is_in_recovery()::text"))
                }
            } == ["true"]
        }
        while try await inRecovery() {
            if !waited {
                transactions.logger.warning(
                    """
                    PostgreSQL is in recovery (a standby, or a restore not yet promoted) and takes no writes: \
                    waiting for it to be promoted before serving
                    """)
                waited = true
            }
            try await deadline.time.sleep(for: recoveryPoll)
        }
        if waited { transactions.logger.notice("PostgreSQL is out of recovery: starting") }
    }

    /// Applies the migrations not yet applied, in order, up to `last` (all when nil), under the
    /// advisory lock. Migrations applied by a newer node that this binary does not know are left
    /// alone: they are additive (docs/operations.md, "Upgrade a cluster"), so this node keeps working
    /// until it is replaced.
    static func migrate(_ transactions: PostgresTransactions, upTo last: String? = nil) async throws {
        let wanted: ArraySlice<Migration>
        if let last {
            guard let index = migrations.firstIndex(where: { $0.name == last }) else {
                throw PostgresSchemaError.unknownMigration(last, known: migrations.map(\.name))
            }
            wanted = migrations[...index]
        } else {
            wanted = migrations[...]
        }
        // Told after the commit: a transaction retried after a deadlock (with a node still serving
        // beside it) runs its migrations again, and only the attempt that commits applied them.
        let (done, newer) = try await transactions.run(.write) { session -> ([String], Set<String>) in
            // Held until this transaction ends; a second node waits here.
            try await session.execute("SELECT pg_advisory_xact_lock(\(migrationLock))")
            try await session.execute(
                """
                CREATE TABLE IF NOT EXISTS ticks_migration (name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())
                """)
            let applied = Set(try await session.run(Fetch.texts("SELECT name FROM ticks_migration")))
            var done: [String] = []
            for migration in wanted where !applied.contains(migration.name) {
                for statement in migration.statements {
                    try await session.execute(StoreQuery(stringLiteral: statement))
                }
                try await session.execute("INSERT INTO ticks_migration (name) VALUES (\(migration.name))")
                done.append(migration.name)
            }
            // The functions of this release's marks and sends (not migrations: `MovesFunction`,
            // `SendFunction`, which calls the first).
            for (name, definition) in [
                (MovesFunction.name, MovesFunction.definition), (SendFunction.name, SendFunction.definition),
            ] {
                let installed = try await session.run(
                    Fetch.texts("SELECT proname::text FROM pg_proc WHERE proname = \(name) AND pronamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())"))
                if installed.isEmpty {
                    try await session.execute(StoreQuery(stringLiteral: definition))
                }
            }
            return (done, applied.subtracting(wanted.map(\.name)))
        }
        for name in done {
            transactions.logger.info("applied migration", metadata: ["migration": "\(name)"])
        }
        if !newer.isEmpty {
            transactions.logger.notice(
                "the schema has migrations of a newer Ticks; this node runs against it until it is replaced",
                metadata: ["migrations": "\(newer.sorted().joined(separator: ", "))"])
        }
    }
}

enum PostgresSchemaError: Error, CustomStringConvertible {
    case unknownMigration(String, known: [String])

    var description: String {
        switch self {
        case .unknownMigration(let name, let known):
            "no migration is named '\(name)'; this binary knows \(known.joined(separator: ", "))"
        }
    }
}
