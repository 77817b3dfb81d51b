import TicksProtocol
import TicksReceipts

/// The reads behind `POST /sync`, and the record of removed members they need.
extension StoreSQL {
    /// A channel by its cid, soft-deleted or not: `channelColumns`, then
    /// `deleted_at` and whether `userID` is a member — of a deleted channel,
    /// whether they were one when it was deleted (`recordRemovals(ofMembersOf:)`)
    /// — then who last updated, truncated and deleted it (NULLs when the
    /// schema keeps no actors).
    static func channelForSync(type: String, id: String, member userID: String, actors: Bool) -> StoreQuery {
        let kept = actors ? "c.updated_by, c.truncated_by, c.deleted_by" : "NULL, NULL, NULL"
        return """
        SELECT \(raw: channelColumns), c.deleted_at,
          CASE WHEN c.deleted_at IS NULL
            THEN EXISTS (SELECT 1 FROM member m WHERE m.channel_pk = c.pk AND m.user_id = \(userID))
            ELSE EXISTS (SELECT 1 FROM member_removal r
                         WHERE r.channel_pk = c.pk AND r.user_id = \(userID) AND r.removed_at = c.deleted_at)
          END AS is_member, \(raw: kept)
        FROM \(raw: channelFrom) WHERE c.type = \(type) AND c.id = \(id)
        """
    }

    /// The channel's newest `count` messages (still numbered after its
    /// truncation), oldest first: sequence numbers are dense, so this is a
    /// range of the primary key, whatever their times.
    static func newestMessages(of channel: ChannelRecord, count: Int) -> StoreQuery {
        """
        SELECT \(raw: messageColumns) FROM message g
        WHERE g.channel_pk = \(channel.pk) AND g.seq > \(max(channel.truncatedSeq, channel.lastSeq - Seq(count)))
        ORDER BY g.seq
        """
    }

    /// Messages from before `since`, still there, edited (`column` is
    /// `updated_at`) or deleted (`deleted_at`) after it, in that order; at
    /// most `limit`. `messageColumns`, then who last changed each (NULL when
    /// the schema keeps no actors).
    static func messages(
        of channel: ChannelRecord, changedIn column: ChangeColumn, after since: Int64, limit: Int, actors: Bool
    ) -> StoreQuery {
        """
        SELECT \(raw: messageColumns), \(raw: actors ? "g.changed_by" : "NULL") FROM message g
        WHERE g.channel_pk = \(channel.pk) AND g.\(raw: column.rawValue) > \(since) AND g.created_at <= \(since)
          AND g.seq > \(channel.truncatedSeq)
        ORDER BY g.\(raw: column.rawValue) LIMIT \(Int64(limit))
        """
    }

    enum ChangeColumn: String {
        case edited = "updated_at"
        case deleted = "deleted_at"
    }

    /// The read states of members who joined, read or received after
    /// `since`, and `userID`'s own; at most `limit`.
    static func memberStates(of channelPK: Int64, changedAfter since: Int64, or userID: String, limit: Int)
        -> StoreQuery
    {
        """
        SELECT \(memberStateColumns) FROM member m
        WHERE m.channel_pk = \(channelPK)
          AND (m.created_at > \(since) OR m.read_at > \(since) OR m.delivered_at > \(since) OR m.user_id = \(userID))
        ORDER BY m.created_at, m.user_id LIMIT \(Int64(limit))
        """
    }

    /// Members removed after `since`: user id and time; at most `limit`.
    static func removals(from channelPK: Int64, after since: Int64, limit: Int) -> StoreQuery {
        """
        SELECT user_id, removed_at FROM member_removal
        WHERE channel_pk = \(channelPK) AND removed_at > \(since) ORDER BY removed_at LIMIT \(Int64(limit))
        """
    }

    /// Records that `userID` left the channel at `at` (kept for `SyncLimits.horizon`).
    static func recordRemoval(of userID: String, from channelPK: Int64, at: Int64) -> StoreQuery {
        "INSERT INTO member_removal (channel_pk, user_id, removed_at) VALUES (\(channelPK), \(userID), \(at))"
    }

    /// `recordRemoval` for every member of a channel being soft-deleted, at
    /// the time of the delete: who still hears of it from a sync (`channelForSync`).
    static func recordRemovals(ofMembersOf channelPK: Int64, at: Int64) -> StoreQuery {
        """
        INSERT INTO member_removal (channel_pk, user_id, removed_at)
        SELECT channel_pk, user_id, \(at) FROM member WHERE channel_pk = \(channelPK)
        """
    }

    /// `recordRemoval` for every channel the user is a member of (a deleted user leaves them all).
    static func recordRemovals(ofMember userID: String, at: Int64) -> StoreQuery {
        """
        INSERT INTO member_removal (channel_pk, user_id, removed_at)
        SELECT channel_pk, user_id, \(at) FROM member WHERE user_id = \(userID)
        """
    }

    /// A hard-deleted channel's removals (or a soft-deleted one's, made
    /// again): nobody can sync it any more.
    static func forgetRemovals(from channelPK: Int64) -> StoreQuery {
        "DELETE FROM member_removal WHERE channel_pk = \(channelPK)"
    }

    static func forgetRemovals(before cutoff: Int64) -> StoreQuery {
        "DELETE FROM member_removal WHERE removed_at < \(cutoff)"
    }
}
