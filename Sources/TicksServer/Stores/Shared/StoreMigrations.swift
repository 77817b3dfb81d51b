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
