import TicksReceipts

/// Schema changes both databases take the same way; each schema lists them
/// under the same name (`SQLiteSchema`, `PostgresSchema`). Shipped ones are
/// never edited.
enum StoreMigrations {
    /// Unread counts kept rather than counted on every request (R7): per
    /// member with its cursors, and per user over all their channels; filled
    /// in from the cursors and the messages already there.
    static func unreadCounters(integer: String) -> [String] {
        [
            "ALTER TABLE member ADD COLUMN unread \(integer) NOT NULL DEFAULT 0",
            "ALTER TABLE app_user ADD COLUMN unread_messages \(integer) NOT NULL DEFAULT 0",
            "ALTER TABLE app_user ADD COLUMN unread_channels \(integer) NOT NULL DEFAULT 0",
            """
            UPDATE member SET unread = (SELECT c.last_seq FROM channel c WHERE c.pk = member.channel_pk) - member.read_seq
              - (SELECT COUNT(*) FROM message g
                 WHERE g.channel_pk = member.channel_pk AND g.user_id = member.user_id AND g.seq > member.read_seq)
            """,
            """
            UPDATE app_user SET
              unread_messages = COALESCE((SELECT SUM(m.unread) FROM member m WHERE m.user_id = app_user.id), 0),
              unread_channels = (SELECT COUNT(*) FROM member m WHERE m.user_id = app_user.id AND m.unread > 0)
            """,
        ]
    }
}

extension StoreMigrations {
    /// Messages that are edited, deleted or truncated away, and channels that
    /// are deleted or truncated (see docs/receipt-rules.md, "Deleting,
    /// editing, truncating"). A deleted message keeps its row and its sequence
    /// number — the unread counts rely on a channel's numbers having no gaps —
    /// and is `hidden`: never unread, never counted. A hard-deleted one keeps
    /// nothing but that row's key, id and author. Messages at or below a
    /// channel's `truncated_seq` are gone from it; every cursor is at or past it.
    static func messageLifecycle(integer: String) -> [String] {
        [
            "ALTER TABLE message ADD COLUMN updated_at \(integer)",
            "ALTER TABLE message ADD COLUMN text_updated_at \(integer)",
            "ALTER TABLE message ADD COLUMN deleted_at \(integer)",
            "ALTER TABLE message ADD COLUMN hard_deleted \(integer) NOT NULL DEFAULT 0",
            "ALTER TABLE message ADD COLUMN hidden \(integer) NOT NULL DEFAULT 0",
            "CREATE INDEX message_hidden ON message (channel_pk, seq) WHERE hidden <> 0",
            "ALTER TABLE channel ADD COLUMN deleted_at \(integer)",
            "ALTER TABLE channel ADD COLUMN truncated_at \(integer)",
            "ALTER TABLE channel ADD COLUMN truncated_seq \(integer) NOT NULL DEFAULT 0",
            "ALTER TABLE member ADD COLUMN custom TEXT NOT NULL DEFAULT '{}'",
            """
            CREATE TABLE task (
              id TEXT PRIMARY KEY NOT NULL,
              status TEXT NOT NULL,
              result TEXT NOT NULL DEFAULT '{}',
              created_at \(integer) NOT NULL,
              updated_at \(integer) NOT NULL
            )
            """,
        ]
    }
}

extension StoreMigrations {
    /// Threads: a reply names its parent; one shown only in its thread is
    /// `hidden` from the channel (never unread there). Each participant of a
    /// thread (the parent's author and whoever replied, or marked it read)
    /// has a thread read state: the sequence number of the newest reply they
    /// have read and how many after it are unread.
    static func threads(integer: String) -> [String] {
        [
            "ALTER TABLE message ADD COLUMN parent_id TEXT",
            "ALTER TABLE message ADD COLUMN show_in_channel \(integer) NOT NULL DEFAULT 0",
            "ALTER TABLE message ADD COLUMN reply_count \(integer) NOT NULL DEFAULT 0",
            "CREATE INDEX message_replies ON message (parent_id, seq) WHERE parent_id IS NOT NULL",
            """
            CREATE TABLE thread_read (
              parent_id TEXT NOT NULL,
              user_id TEXT NOT NULL,
              channel_pk \(integer) NOT NULL,
              read_seq \(integer) NOT NULL,
              read_at \(integer) NOT NULL,
              unread \(integer) NOT NULL DEFAULT 0,
              PRIMARY KEY (parent_id, user_id)
            )
            """,
            "CREATE INDEX thread_read_by_user ON thread_read (user_id, channel_pk)",
            "CREATE INDEX thread_read_by_channel ON thread_read (channel_pk, user_id)",
        ]
    }
}

extension StoreMigrations {
    /// What `POST /sync` needs to say what changed since a time: who left a
    /// channel and when (a removed member's row is gone, so a record of the
    /// removal is kept, for `SyncLimits.horizon` only), and the messages
    /// edited or deleted, found by time without reading the whole channel
    /// (partial indexes: only changed messages are in them).
    static func sync(integer: String) -> [String] {
        [
            """
            CREATE TABLE member_removal (
              channel_pk \(integer) NOT NULL,
              user_id TEXT NOT NULL,
              removed_at \(integer) NOT NULL
            )
            """,
            "CREATE INDEX member_removal_by_channel ON member_removal (channel_pk, removed_at)",
            "CREATE INDEX member_removal_by_time ON member_removal (removed_at)",
            "CREATE INDEX message_edited ON message (channel_pk, updated_at) WHERE updated_at IS NOT NULL",
            "CREATE INDEX message_deleted ON message (channel_pk, deleted_at) WHERE deleted_at IS NOT NULL",
        ]
    }
}

extension StoreMigrations {
    /// The webhook outbox (docs/webhooks.md): each call a change owes a
    /// webhook or the push hook, written in the change's own transaction and
    /// removed once the receiver answered 2xx. `dead_at` is set when it gave
    /// up (too many failures, too old, too many waiting); a dead call stays
    /// until retried, past its retention, or pushed out by newer dead ones. One queue per receiver and channel, in `id` order.
    /// `webhook_lease` names the node that sends (one at a time, so a
    /// channel's calls go out in order).
    static func webhooks(integer: String, key: String) -> [String] {
        [
            """
            CREATE TABLE webhook_outbox (
              id \(key),
              delivery_id TEXT NOT NULL,
              target TEXT NOT NULL,
              kind TEXT NOT NULL,
              event_type TEXT NOT NULL,
              cid TEXT NOT NULL,
              payload TEXT NOT NULL,
              recipients TEXT,
              created_at \(integer) NOT NULL,
              attempts \(integer) NOT NULL DEFAULT 0,
              next_attempt_at \(integer) NOT NULL,
              dead_at \(integer),
              last_error TEXT
            )
            """,
            "CREATE INDEX webhook_outbox_queue ON webhook_outbox (target, cid, id) WHERE dead_at IS NULL",
            "CREATE INDEX webhook_outbox_by_target ON webhook_outbox (target, id) WHERE dead_at IS NULL",
            "CREATE INDEX webhook_outbox_dead ON webhook_outbox (id) WHERE dead_at IS NOT NULL",
            "CREATE INDEX webhook_outbox_age ON webhook_outbox (created_at) WHERE dead_at IS NULL",
            """
            CREATE TABLE webhook_lease (
              id \(integer) PRIMARY KEY NOT NULL,
              node TEXT NOT NULL,
              expires_at \(integer) NOT NULL
            )
            """,
        ]
    }
}

extension StoreMigrations {
    /// Retention of the receipt log (`ticks serve --receipt-log-retention`):
    /// one row, written by the pruner in the transaction of each batch it
    /// deletes, saying that moves older than `pruned_before` may be gone.
    /// `GET /messages/{id}/receipts` reads it to tell an exact time from an
    /// upper bound (`ReceiptRules.reached`); no row means nothing was ever
    /// pruned. The pruner finds old moves by `id` (the log's order), so no
    /// index on `at` is added.
    static func receiptLogRetention(integer: String) -> [String] {
        [
            """
            CREATE TABLE receipt_log_pruned (
              id \(integer) PRIMARY KEY NOT NULL,
              pruned_before \(integer) NOT NULL
            )
            """
        ]
    }
}

extension StoreMigrations {
    /// Read by everyone / delivered to everyone (R13): each member row keeps
    /// a copy of its user's privacy (R10), so that where a member counts for
    /// "all" (`StoreSQL.countedSeq`) is an expression of the row alone and
    /// can be indexed per channel: the lowest positions of a channel of any
    /// size are an index's first entries. `sharing(field)` reads a user's
    /// `privacy_settings.<field>.enabled` from their stored JSON (1 unless false).
    static func allMembers(integer: String, sharing: (String) -> String) -> [String] {
        let flags = ["reads_shared": "read_receipts", "deliveries_shared": "delivery_receipts"].sorted { $0.key < $1.key }
        return flags.flatMap { column, _ in
            [
                "ALTER TABLE app_user ADD COLUMN \(column) \(integer) NOT NULL DEFAULT 1",
                "ALTER TABLE member ADD COLUMN \(column) \(integer) NOT NULL DEFAULT 1",
            ]
        } + flags.map { column, field in
            "UPDATE app_user SET \(column) = \(sharing(field)) WHERE body LIKE '%privacy_settings%'"
        } + [
            """
            UPDATE member SET
              reads_shared = (SELECT u.reads_shared FROM app_user u WHERE u.id = member.user_id),
              deliveries_shared = (SELECT u.deliveries_shared FROM app_user u WHERE u.id = member.user_id)
            WHERE EXISTS (SELECT 1 FROM app_user u WHERE u.id = member.user_id
                          AND (u.reads_shared = 0 OR u.deliveries_shared = 0))
            """,
            "CREATE INDEX member_read_by_all ON member (channel_pk, (\(StoreSQL.countedSeq(.read, deliveryEvents: true))))",
            "CREATE INDEX member_read_by_all_quiet ON member (channel_pk, (\(StoreSQL.countedSeq(.read, deliveryEvents: false))))",
            "CREATE INDEX member_delivered_to_all ON member (channel_pk, (\(StoreSQL.countedSeq(.delivered, deliveryEvents: true))))",
        ]
    }
}

extension StoreMigrations {
    /// The app's settings that `PATCH /app` changes (`AppOptions`): one row per
    /// setting, its value as JSON. A setting without a row has its default.
    static func appSettings() -> [String] {
        ["CREATE TABLE app_setting (name TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL)"]
    }
}

extension StoreMigrations {
    /// Played (R14): each member's first play of a voice note or video, kept
    /// once (the key) and never changed. A message's attachments need no
    /// column: they are kept with its custom data (`StoredJSON.messageFields`),
    /// so every query that reads a message reads them, on any schema.
    static func played(integer: String) -> [String] {
        [
            """
            CREATE TABLE message_play (
              channel_pk \(integer) NOT NULL,
              seq \(integer) NOT NULL,
              user_id TEXT NOT NULL,
              played_at \(integer) NOT NULL,
              PRIMARY KEY (channel_pk, seq, user_id)
            )
            """
        ]
    }
}

extension StoreMigrations {
    /// Who made a change, for `POST /sync` to name as the live events do: a
    /// message's last editor or deleter, a channel's last updater, truncater
    /// and deleter. NULL where no user acted (the app) and for changes made
    /// before this migration. Only added columns: an older node runs on it.
    static func actors() -> [String] {
        [
            "ALTER TABLE message ADD COLUMN changed_by TEXT",
            "ALTER TABLE channel ADD COLUMN updated_by TEXT",
            "ALTER TABLE channel ADD COLUMN truncated_by TEXT",
            "ALTER TABLE channel ADD COLUMN deleted_by TEXT",
        ]
    }
}

extension StoreMigrations {
    /// Unread counts kept as of a position (`StoreSQL.memberUnread`): the
    /// channel's number of messages that counted (`channel.counted`) and,
    /// with each member's kept count, the channel's number it was kept at
    /// (`member.counted_at`); a member's count is the kept one plus the
    /// messages that counted since. Only added columns, 0 on every existing
    /// row, so every count reads as it did: an older node runs on it.
    ///
    /// Whether sends count by moving `channel.counted` (the setting
    /// `AppOptions.UnreadCounting`) instead of adding one to every other
    /// member's kept count: a node of the release before reads and writes
    /// kept counts only, so it must not share a database that counts by
    /// positions. SQLite (one process) always does; PostgreSQL only on a
    /// database this migration run created (`newDatabase`: its first
    /// migration applied in the same transaction), since nodes of the release
    /// before may serve any other, even an empty one; an upgraded database
    /// keeps its kept counts until `PATCH /app` turns positions on.
    static func unreadPositions(integer: String, newDatabase: String?) -> [String] {
        let setting =
            "('\(AppOptions.Change.CodingKeys.unreadCounting.rawValue)', '\(AppOptions.UnreadCounting.positions.stored)')"
        return [
            "ALTER TABLE channel ADD COLUMN counted \(integer) NOT NULL DEFAULT 0",
            "ALTER TABLE member ADD COLUMN counted_at \(integer) NOT NULL DEFAULT 0",
            newDatabase.map { "INSERT INTO app_setting (name, value) SELECT * FROM (VALUES \(setting)) AS s WHERE \($0)" }
                ?? "INSERT INTO app_setting (name, value) VALUES \(setting)",
        ]
    }
}

extension StoreMigrations {
    /// R13's counted positions (`StoreSQL.countedSeq`) as columns of their
    /// own, which the database computes from the row on every write
    /// (generated: a node of an older release, which writes the cursors only,
    /// keeps them too), indexed per channel in place of v11's indexes of the
    /// expressions. They hold a position only on the rows of a channel that
    /// has had more than two members (`in_group`, set as the third joins:
    /// `StoreSQL.markInGroup`), and are NULL elsewhere. PostgreSQL updates a
    /// row in place (a HOT update: no index entry written, no dead entries
    /// left for vacuum) only when no indexed column changes; v11's indexes
    /// named the cursors, so every receipt was a full update. In a channel
    /// of two a receipt now changes no indexed column. The lowest positions
    /// of a channel read both the columns and, for rows where they are NULL,
    /// the expression (`StoreSQL.lowestCounted`): right whichever rows are
    /// marked, so marking is only an optimisation, never a condition.
    ///
    /// Only added columns: an older node runs on it. v11's indexes, which an
    /// older node's queries of the lowest positions need, are dropped only
    /// where no such node can run (the compatibility rule of
    /// docs/operations.md): on SQLite (one process) and on a PostgreSQL
    /// database this migration run created (`newDatabase`, as
    /// `unreadPositions`). An upgraded PostgreSQL database keeps them, and
    /// its receipts stay full updates, until a later release drops them.
    static func countedColumns(integer: String, stored: Bool, newDatabase: String?) -> [String] {
        let kinds: [(kind: CursorKind, deliveryEvents: Bool)] = [(.read, true), (.read, false), (.delivered, true)]
        let generated = stored ? "STORED" : "VIRTUAL"
        var statements = [
            "ALTER TABLE member ADD COLUMN in_group \(integer) NOT NULL DEFAULT 0",
            "UPDATE member SET in_group = 1 WHERE channel_pk IN (SELECT pk FROM channel WHERE member_count > 2)",
        ]
        for (kind, deliveryEvents) in kinds {
            let column = StoreSQL.countedColumn(kind, deliveryEvents: deliveryEvents)
            let counted = StoreSQL.countedSeq(kind, deliveryEvents: deliveryEvents)
            statements.append(
                "ALTER TABLE member ADD COLUMN \(column) \(integer) GENERATED ALWAYS AS (CASE WHEN in_group <> 0 THEN \(counted) END) \(generated)"
            )
        }
        for (kind, deliveryEvents) in kinds {
            let column = StoreSQL.countedColumn(kind, deliveryEvents: deliveryEvents)
            statements.append("CREATE INDEX member_\(column) ON member (channel_pk, \(column))")
        }
        let drops = ["member_read_by_all", "member_read_by_all_quiet", "member_delivered_to_all"].map { "DROP INDEX \($0)" }
        guard let newDatabase else { return statements + drops }
        let dropped = drops.map { "\($0);" }.joined(separator: " ")
        return statements + ["DO $$ BEGIN IF \(newDatabase) THEN \(dropped) END IF; END $$"]
    }
}
