/// SQL both stores run as written: the receipt rules that are computed in
/// the database, kept in one place so SQLite and PostgreSQL cannot drift.
/// Constant text only (no input), so the stores may splice it in unescaped.
enum StoreSQL {
    /// R7 for member `m` of channel `c`: the messages after the read cursor
    /// (sequence numbers are dense, so `last_seq - read_seq` of them) less the
    /// member's own among them — none unless they marked unread before their
    /// own messages (R4) — found through `message_by_author`.
    static let unread = """
        ((c.last_seq - m.read_seq) - (SELECT COUNT(*) FROM message g
            WHERE g.channel_pk = m.channel_pk AND g.user_id = m.user_id AND g.seq > m.read_seq))
        """

    /// A read state's columns for member `m` of channel `c`: the role, the cursors, the
    /// ids they point at, the unread count and the first unread message (R7).
    static let memberStateColumns = """
        m.user_id, m.created_at, m.channel_role, m.read_seq, m.read_at, m.delivered_seq, m.delivered_at,
          (SELECT id FROM message WHERE channel_pk = m.channel_pk AND seq = m.read_seq) AS read_id,
          (SELECT id FROM message WHERE channel_pk = m.channel_pk AND seq = m.delivered_seq) AS delivered_id,
          \(unread) AS unread,
          (SELECT id FROM message g
             WHERE g.channel_pk = m.channel_pk AND g.seq > m.read_seq AND g.user_id <> m.user_id
             ORDER BY g.seq LIMIT 1) AS first_unread_id
        """
}

/// Decisions both stores make inside their transactions.
enum StoreRules {
    /// A channel takes at most `maxMembers` members (`ServerLimits.maxChannelMembers`).
    static func requireRoom(for newcomers: Int, in channel: ChannelRecord, maxMembers: Int) throws {
        guard channel.memberCount + newcomers <= maxMembers else {
            throw StoreError.tooManyMembers(
                cid: channel.cid, members: channel.memberCount, adding: newcomers, limit: maxMembers)
        }
    }
}
