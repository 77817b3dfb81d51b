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

    /// The column that keeps `countedSeq(kind, deliveryEvents:)` on the
    /// rows of a channel that has had more than two members (NULL on the
    /// others: `StoreMigrations.countedColumns`).
    static func countedColumn(_ kind: CursorKind, deliveryEvents: Bool) -> String {
        switch (kind, deliveryEvents) {
        case (.read, true): "counted_read_seq"
        case (.read, false): "counted_quiet_read_seq"
        case (.delivered, _): "counted_delivered_seq"
        }
    }

    /// The channel's `limit` lowest counted positions, lowest first: user id,
    /// position (`notCounted` for a member who does not count), whatever the
    /// channel's size. From `v16-counted-columns`, the first entries of the
    /// counted column's index, with the rows whose column is NULL (a channel
    /// never of more than two, a row an older node added) counted from their
    /// cursors, which the same index finds; before it, the first entries of
    /// v11's index of the expression. `channelPK` and `limit` are fragments:
    /// values, or (`MovesFunction`) the names of a statement's own.
    static func lowestCounted(_ kind: CursorKind, deliveryEvents: Bool, in channelPK: StoreQuery, limit: StoreQuery)
        -> StoreQuery
    {
        let counted = countedSeq(kind, deliveryEvents: deliveryEvents)
        let column = countedColumn(kind, deliveryEvents: deliveryEvents)
        let fromColumns: StoreQuery = """
            SELECT user_id, seq FROM (
              SELECT user_id, seq FROM (
                SELECT user_id, \(raw: column) AS seq FROM member
                WHERE channel_pk = \(channelPK) AND \(raw: column) IS NOT NULL ORDER BY \(raw: column) LIMIT \(limit)) kept
              UNION ALL
              SELECT user_id, \(raw: counted) AS seq FROM member WHERE channel_pk = \(channelPK) AND \(raw: column) IS NULL
            ) lowest ORDER BY seq LIMIT \(limit)
            """
        let fromExpression: StoreQuery = """
            SELECT user_id, \(raw: counted) AS seq FROM member WHERE channel_pk = \(channelPK)
            ORDER BY \(raw: counted) LIMIT \(limit)
            """
        return "\(on: .countedColumns, fromColumns, otherwise: fromExpression)"
    }

    static func lowestCounted(_ kind: CursorKind, deliveryEvents: Bool, in channelPK: Int64, limit: Int) -> StoreQuery {
        lowestCounted(kind, deliveryEvents: deliveryEvents, in: "\(channelPK)", limit: "\(limit)")
    }

    /// Once the channel has more than two members (it is locked, the member
    /// just added), its rows keep their counted positions in the indexed
    /// columns (`StoreMigrations.countedColumns`): those not yet marked are.
    /// On PostgreSQL it skips a row another transaction holds (a move: it
    /// never waits, so it never joins a circle of waits); that row is counted
    /// from its cursors until a later join marks it.
    static func markInGroup(_ channelPK: Int64) -> StoreQuery {
        let column = countedColumn(.read, deliveryEvents: true)
        return """
            UPDATE member SET in_group = 1
            WHERE channel_pk = \(channelPK) AND \(raw: column) IS NULL
              AND user_id IN (SELECT user_id FROM member WHERE channel_pk = \(channelPK) AND \(raw: column) IS NULL\(
                forUpdateSkipLocked: ()))
              AND (SELECT member_count FROM channel WHERE pk = \(channelPK)) > 2
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
