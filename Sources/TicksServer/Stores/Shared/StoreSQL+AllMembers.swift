import TicksReceipts

/// Read by everyone / delivered to everyone (R13, `AllMembers`).
extension StoreSQL {
    /// A member who does not count for "all": after every position.
    static let notCounted: Int64 = .max

    /// Where a member row counts for "all" of `kind`, `AllMembers.counted` in
    /// SQL over the row's own columns (the copy of its user's privacy), so
    /// that it is indexed per channel (migration `v11-all-members`). Shipped
    /// in that migration's indexes: a query must use the same text, and it is
    /// never changed.
    static func countedSeq(_ kind: CursorKind, deliveryEvents: Bool) -> String {
        switch (kind, deliveryEvents) {
        case (.read, true):
            "CASE WHEN reads_shared <> 0 THEN read_seq WHEN deliveries_shared <> 0 THEN delivered_seq ELSE \(notCounted) END"
        case (.read, false):
            "CASE WHEN reads_shared <> 0 THEN read_seq ELSE \(notCounted) END"
        case (.delivered, _):
            "CASE WHEN deliveries_shared <> 0 THEN delivered_seq WHEN reads_shared <> 0 THEN read_seq ELSE \(notCounted) END"
        }
    }

    /// The channel's `limit` lowest counted positions, lowest first: user id,
    /// position (`notCounted` for a member who does not count). The index's
    /// first entries, whatever the channel's size.
    static func lowestCounted(_ kind: CursorKind, deliveryEvents: Bool, in channelPK: Int64, limit: Int) -> StoreQuery {
        let counted = countedSeq(kind, deliveryEvents: deliveryEvents)
        return """
            SELECT user_id, \(raw: counted) FROM member WHERE channel_pk = \(channelPK)
            ORDER BY \(raw: counted) LIMIT \(limit)
            """
    }

    /// Serialises, per channel, the transactions that tell what became read
    /// by all (PostgreSQL; SQLite has one writer): each then sees the moves
    /// committed before it, so no crossing goes untold. Taken after the
    /// transaction's row locks, so it never waits while holding one another waits for.
    static func allMembersLock(_ channelPK: Int64) -> StoreQuery {
        "SELECT \(advisoryLock: channelPK)"
    }

    /// The newest message of each author that `reached` made reached by all:
    /// user id, message id, seq. Messages the channel shows only (not
    /// deleted, not thread-only), of authors still members, not the mover's.
    static func newlyReached(_ reached: AllMembers.Reached, by mover: String, in channelPK: Int64) -> StoreQuery {
        """
        SELECT user_id, id, seq FROM (
          SELECT g.user_id, g.id, g.seq, ROW_NUMBER() OVER (PARTITION BY g.user_id ORDER BY g.seq DESC) AS r
          FROM message g
          WHERE g.channel_pk = \(channelPK) AND g.seq > \(reached.from)
            AND g.seq <= \(max(reached.upTo, reached.upToForLowest)) AND g.hidden = 0 AND g.user_id <> \(mover)
            AND (g.seq <= \(reached.upTo) OR g.user_id = \(reached.lowestOther ?? ""))
            AND (g.seq <= \(reached.upToForLowest) OR g.user_id <> \(reached.lowestOther ?? ""))
            AND EXISTS (SELECT 1 FROM member b WHERE b.channel_pk = g.channel_pk AND b.user_id = g.user_id)
        ) newest WHERE r = 1
        """
    }

    /// The newest message of `author` at or before `seq` that the channel
    /// shows: its id.
    static func newestShown(by author: String, upTo seq: Int64, in channelPK: Int64) -> StoreQuery {
        """
        SELECT id FROM message
        WHERE channel_pk = \(channelPK) AND user_id = \(author) AND seq <= \(seq) AND hidden = 0
        ORDER BY seq DESC LIMIT 1
        """
    }

    /// The member rows of `userIDs`, locked in key order, as a batch of moves
    /// locks them: a change that goes on to take
    /// a user's row and then more of their member rows (a user update copying
    /// a changed privacy, mark all read) takes them all first, so it and a
    /// move never wait for each other in a circle.
    static func lockMembers(of userIDs: [String]) -> StoreQuery {
        "SELECT 1 FROM member WHERE \(in: "user_id", userIDs) ORDER BY channel_pk, user_id\(forUpdateOf: nil)"
    }

    /// Keeps the copy of a user's privacy on their member rows (and their own row).
    static func setSharing(of userID: String, reads: Bool, deliveries: Bool) -> [StoreQuery] {
        let (r, d): (Int64, Int64) = (reads ? 1 : 0, deliveries ? 1 : 0)
        return ["app_user", "member"].map { table in
            let key = table == "member" ? "user_id" : "id"
            return """
                UPDATE \(raw: table) SET reads_shared = \(r), deliveries_shared = \(d)
                WHERE \(raw: key) = \(userID) AND (reads_shared <> \(r) OR deliveries_shared <> \(d))
                """
        }
    }
}
