import TicksReceipts

/// R14's statements: a member's first play of a voice note or video (`message_play`).
extension StoreSQL {
    /// Keeps the play unless one is kept, while the player is a member; column
    /// 0 (`played_at`) only when this one was. One statement, holding the
    /// member's row (`FOR KEY SHARE`) until it commits: a removal, which deletes
    /// that row and then the member's plays, either commits first (no member:
    /// nothing kept) or waits and then deletes this play too (R6, R14).
    static func insertPlay(seq: Seq, in channelPK: Int64, by userID: String, at: Int64) -> StoreQuery {
        """
        INSERT INTO message_play (channel_pk, seq, user_id, played_at)
        SELECT \(channelPK), \(seq), \(userID), \(at) FROM member
        WHERE channel_pk = \(channelPK) AND user_id = \(userID)\(forKeyShare: ())
        ON CONFLICT (channel_pk, seq, user_id) DO NOTHING RETURNING played_at
        """
    }

    /// Column 0: when `userID` first played the message.
    static func play(seq: Seq, in channelPK: Int64, by userID: String) -> StoreQuery {
        "SELECT played_at FROM message_play WHERE channel_pk = \(channelPK) AND seq = \(seq) AND user_id = \(userID)"
    }

    /// The current members who played the message: user id, played_at.
    static func plays(seq: Seq, in channelPK: Int64) -> StoreQuery {
        """
        SELECT p.user_id, p.played_at FROM message_play p
        JOIN member m ON m.channel_pk = p.channel_pk AND m.user_id = p.user_id
        WHERE p.channel_pk = \(channelPK) AND p.seq = \(seq)
        """
    }

    /// The plays of `scope`: a member's when they leave or are removed (a
    /// member who rejoins plays afresh, R6), a channel's when it goes for good
    /// (a hard delete, or a soft-deleted one made again), a user's when deleted.
    static func deletePlays(of scope: ReadStateScope) -> StoreQuery {
        "DELETE FROM message_play WHERE " + scope.condition
    }
}
