import TicksProtocol
import TicksReceipts

/// Every statement the stores run, written once for SQLite and PostgreSQL
/// (`SQLDialect` renders the few places they differ). Each query that returns
/// rows lists its columns next to the decoder that reads them (`StoreRows`).
enum StoreSQL {
    // MARK: Users

    /// `created_at` of a user, locked in PostgreSQL until the upsert commits.
    static func userCreatedAt(_ id: String) -> StoreQuery {
        "SELECT created_at FROM app_user WHERE id = \(id)\(forUpdateOf: nil)"
    }

    static func upsertUser(id: String, body: String, createdAt: Int64, now: Int64) -> StoreQuery {
        """
        INSERT INTO app_user (id, body, created_at, updated_at) VALUES (\(id), \(body), \(createdAt), \(now))
        ON CONFLICT (id) DO UPDATE SET body = excluded.body, updated_at = excluded.updated_at
        """
    }

    /// Column 0: the user as JSON.
    static func users(_ ids: [String]) -> StoreQuery {
        let query: StoreQuery = "SELECT body FROM app_user WHERE \(in: "id", ids)"
        return query.prepared(as: .users)
    }

    // MARK: Channel types

    /// Column 0: the config as JSON.
    static let channelTypes: StoreQuery = "SELECT config FROM channel_type ORDER BY name"

    /// Column 0: the config as JSON; locked in PostgreSQL when `lock`.
    static func channelType(_ name: String, lock: Bool = false) -> StoreQuery {
        let query: StoreQuery = "SELECT config FROM channel_type WHERE name = \(name)"
        return lock ? query + "\(forUpdateOf: nil)" : query.prepared(as: .channelType)
    }

    /// A row back only when the name was free.
    static func insertChannelType(name: String, config: String) -> StoreQuery {
        "INSERT INTO channel_type (name, config) VALUES (\(name), \(config)) ON CONFLICT (name) DO NOTHING RETURNING name"
    }

    static func updateChannelType(name: String, config: String) -> StoreQuery {
        "UPDATE channel_type SET config = \(config) WHERE name = \(name)"
    }

    // MARK: Channels

    /// A channel with its type's config: the 13 columns `StoreRows.channel` reads.
    static let channelColumns = """
        c.pk, c.type, c.id, c.created_by, c.custom, c.last_seq, c.last_message_at, c.member_count, c.created_at,
          c.updated_at, t.config, c.truncated_at, c.truncated_seq
        """
    static let channelFrom = "channel c LEFT JOIN channel_type t ON t.name = c.type"

    static func channel(_ cid: ChannelID) -> StoreQuery {
        "SELECT \(raw: channelColumns) FROM \(raw: channelFrom) WHERE c.type = \(cid.type) AND c.id = \(cid.id) AND c.deleted_at IS NULL"
    }

    /// Locked in PostgreSQL when `lock`: a channel's row is taken before its members'.
    /// `lock`: the channel's row lock, which every change to its messages,
    /// members or counts takes first (docs/storage.md, "Concurrency on
    /// PostgreSQL"). `FOR NO KEY UPDATE`, not `FOR UPDATE`: a member row
    /// changed twice in one transaction has its foreign key checked the
    /// second time (`FOR KEY SHARE` of the channel), and under `FOR UPDATE`
    /// that check waited for a send that was waiting for the member row:
    /// mark all read and sends deadlocked in `RandomWritersTests`.
    static func channel(pk: Int64, lock: Bool = false) -> StoreQuery {
        let query: StoreQuery = "SELECT \(raw: channelColumns) FROM \(raw: channelFrom) WHERE c.pk = \(pk)"
        return lock ? (query + "\(forNoKeyUpdateOf: "c")").prepared(as: .lockedChannel) : query
    }

    /// The member rows of `users` in channel `channelPK`, locked in key order as a batch of marks
    /// locks its members (`StoreSQL.moves`), where sends count unread by positions (a send then
    /// locks no member row but its author's); none where sends keep counts, which lock every
    /// member's row themselves. PostgreSQL's group of sends (`PostgresEngine.runQueued`).
    static func lockMembers(_ users: [String], of channelPK: Int64) -> StoreQuery {
        """
        SELECT m.user_id FROM member m
        WHERE m.channel_pk = \(channelPK) AND m.user_id = ANY(\(array: users)) AND \(countsByPositions)
        ORDER BY m.user_id\(forUpdateOf: "m")
        """
    }

    /// The channel's columns and, last, whether `userID` is a member (every receipt asks).
    static func channel(_ cid: ChannelID, member userID: String) -> StoreQuery {
        let query: StoreQuery = """
            SELECT \(raw: channelColumns),
              EXISTS (SELECT 1 FROM member m WHERE m.channel_pk = c.pk AND m.user_id = \(userID)) AS is_member
            FROM \(raw: channelFrom) WHERE c.type = \(cid.type) AND c.id = \(cid.id) AND c.deleted_at IS NULL
            """
        return query.prepared(as: .channelWithMembership)
    }

    /// Column 0: the new channel's pk; no row when another request made it first.
    static func insertChannel(type: String, id: String, createdBy: String?, custom: String, now: Int64) -> StoreQuery {
        """
        INSERT INTO channel (type, id, created_by, custom, created_at, updated_at)
        VALUES (\(type), \(id), \(createdBy), \(custom), \(now), \(now))
        ON CONFLICT (type, id) DO NOTHING RETURNING pk
        """
    }

    /// `POST /channels`, in the order `sort` gives, then the newest channel first.
    static func channels(matching filter: ChannelFilter, sort: [ChannelSort], limit: Int, offset: Int) -> StoreQuery {
        var conditions: [StoreQuery] = ["c.deleted_at IS NULL"]
        if let member = filter.requiredMember {
            conditions.append("c.pk IN (SELECT channel_pk FROM member WHERE user_id = \(member))")
        }
        if let members = filter.memberIn {
            conditions.append("c.pk IN (SELECT channel_pk FROM member WHERE \(in: "user_id", members))")
        }
        if let cids = filter.cids { conditions.append("\(in: "(c.type || ':' || c.id)", cids.map(\.rawValue))") }
        if let types = filter.types { conditions.append("\(in: "c.type", types)") }
        if let ids = filter.ids { conditions.append("\(in: "c.id", ids)") }
        var sql: StoreQuery = "SELECT \(raw: channelColumns) FROM \(raw: channelFrom)"
        for (index, condition) in conditions.enumerated() {
            sql = sql + (index == 0 ? " WHERE " : " AND ") + condition
        }
        sql = sql + " ORDER BY "
        for key in sort {
            sql = sql + sortColumn(key.field) + (key.descending ? " DESC, " : " ASC, ")
        }
        return sql + "c.pk DESC LIMIT \(Int64(limit)) OFFSET \(Int64(offset))"
    }

    /// The expression a sort key orders by (the same order in both dialects).
    private static func sortColumn(_ field: ChannelSort.Field) -> StoreQuery {
        let lastMessage = "COALESCE(c.last_message_at, c.created_at)"
        switch field {
        case .lastMessageAt: return "\(raw: lastMessage)"
        case .lastUpdated: return "\(raw: "CASE WHEN c.updated_at > \(lastMessage) THEN c.updated_at ELSE \(lastMessage) END")"
        case .createdAt: return "c.created_at"
        case .updatedAt: return "c.updated_at"
        case .memberCount: return "c.member_count"
        case .id: return "\(byteOrdered: "c.id")"
        }
    }

    /// A change that names no one as the channel's updater (members added or removed).
    static func touch(_ channelPK: Int64, now: Int64, actors: ChangeActor) -> StoreQuery {
        "UPDATE channel SET updated_at = \(now)" + actors.set("updated_by") + " WHERE pk = \(channelPK)"
    }

    static func countMembers(_ channelPK: Int64, by delta: Int64) -> StoreQuery {
        "UPDATE channel SET member_count = member_count + \(delta) WHERE pk = \(channelPK)"
    }

    // MARK: Members

    /// Column 0: whether `userID` is a member.
    static func isMember(_ userID: String, of channelPK: Int64) -> StoreQuery {
        "SELECT EXISTS (SELECT 1 FROM member WHERE channel_pk = \(channelPK) AND user_id = \(userID))"
    }

    /// `sharing`: with the copy of the user's privacy (`v11-all-members`; an older schema has no such columns).
    /// Their count (none) is kept as of the channel's position now (`keptNow`); the channel is locked.
    static func insertMember(channelPK: Int64, userID: String, cursors: Cursors, now: Int64, sharing: Bool) -> StoreQuery {
        let countedAt: StoreQuery = "\(unreadPositions: ", counted_at", otherwise: "")"
        let channelCounted: StoreQuery =
            "\(unreadPositions: ", (SELECT counted FROM channel WHERE pk = \(channelPK))", otherwise: "")"
        let row: StoreQuery = """
            INSERT INTO member (channel_pk, user_id, read_seq, read_at, delivered_seq, delivered_at, created_at\(
                countedAt)\(raw: sharing ? ", reads_shared, deliveries_shared" : ""))
            VALUES (\(channelPK), \(userID), \(cursors.read), \(now), \(cursors.delivered), \(now), \(now)\(channelCounted)
            """
        guard sharing else { return row + ")" }
        return row + """
            , COALESCE((SELECT reads_shared FROM app_user WHERE id = \(userID)), 1),
              COALESCE((SELECT deliveries_shared FROM app_user WHERE id = \(userID)), 1))
            """
    }

    /// A row back when the role changed.
    static func setRole(_ role: ChannelRole, of userID: String, in channelPK: Int64) -> StoreQuery {
        """
        UPDATE member SET channel_role = \(role.rawValue)
        WHERE channel_pk = \(channelPK) AND user_id = \(userID) AND channel_role <> \(role.rawValue) RETURNING user_id
        """
    }

    /// A row back when there was such a member (their unread count leaves their totals with the row).
    static func deleteMember(_ userID: String, from channelPK: Int64) -> StoreQuery {
        "DELETE FROM member WHERE channel_pk = \(channelPK) AND user_id = \(userID) RETURNING user_id"
    }

    /// A read state: the 12 columns `StoreRows.memberState` reads — the
    /// role, the cursors, the ids they point at, the unread count, the
    /// first unread message (R7) and the member's custom data.
    static let memberStateColumns: StoreQuery = """
        m.user_id, m.created_at, m.channel_role, m.read_seq, m.read_at, m.delivered_seq, m.delivered_at,
          (SELECT id FROM message WHERE channel_pk = m.channel_pk AND seq = m.read_seq) AS read_id,
          (SELECT id FROM message WHERE channel_pk = m.channel_pk AND seq = m.delivered_seq) AS delivered_id,
          \(memberUnread("m")),
          (SELECT id FROM message g
             WHERE g.channel_pk = m.channel_pk AND g.seq > m.read_seq AND g.user_id <> m.user_id AND g.hidden = 0
             ORDER BY g.seq LIMIT 1) AS first_unread_id,
          m.custom
        """

    /// For each member behind the channel's newest message (`lastSeq`), or
    /// `userID` alone: when the first message after their read cursor and
    /// after their delivered cursor was sent (`MemberState.lastRead`).
    static func nextMessageTimes(in channelPK: Int64, lastSeq: Int64, userID: String? = nil) -> StoreQuery {
        var sql: StoreQuery = """
            SELECT m.user_id,
              (SELECT created_at FROM message g WHERE g.channel_pk = m.channel_pk AND g.seq > m.read_seq
                 ORDER BY g.seq LIMIT 1),
              (SELECT created_at FROM message g WHERE g.channel_pk = m.channel_pk AND g.seq > m.delivered_seq
                 ORDER BY g.seq LIMIT 1)
            FROM member m WHERE m.channel_pk = \(channelPK) AND m.read_seq < \(lastSeq)
            """
        if let userID { sql = sql + " AND m.user_id = \(userID)" }
        return sql
    }

    /// Every member's read state in join order, or `userID`'s alone.
    static func memberStates(_ channelPK: Int64, userID: String? = nil) -> StoreQuery {
        var sql: StoreQuery = """
            SELECT \(memberStateColumns) FROM member m
            WHERE m.channel_pk = \(channelPK)
            """
        if let userID { sql = sql + " AND m.user_id = \(userID)" }
        return sql + " ORDER BY m.created_at, m.user_id"
    }

    // MARK: Messages

    /// A message: the 15 columns `StoreRows.message` reads.
    static let messageColumns = """
        g.channel_pk, g.seq, g.id, g.user_id, g.text, g.custom, g.created_at, g.updated_at, g.deleted_at,
          g.hard_deleted, g.hidden, g.parent_id, g.show_in_channel, g.reply_count, g.text_updated_at
        """

    /// Whether a message (`g`) of a channel (`c`) is still there to be read:
    /// not hard-deleted, not truncated away, in a channel not deleted. A
    /// soft-deleted message is (Stream shows it as `type: "deleted"`).
    static let messageIsThere = "g.hard_deleted = 0 AND g.seq > c.truncated_seq AND c.deleted_at IS NULL"

    /// The message's columns, then its channel's type and id; any message
    /// with the id, gone or not (a resent id finds its message).
    static func message(id: String) -> StoreQuery {
        """
        SELECT \(raw: messageColumns), c.type, c.id FROM message g JOIN channel c ON c.pk = g.channel_pk
        WHERE g.id = \(id)
        """
    }

    /// `message(id:)` when the message is still there (`messageIsThere`).
    static func messageThere(id: String) -> StoreQuery {
        message(id: id) + " AND \(raw: messageIsThere)"
    }

    /// Column 0: the sequence number of a message of the channel that is still there.
    static func seq(of messageID: String, in channelPK: Int64) -> StoreQuery {
        """
        SELECT g.seq FROM message g JOIN channel c ON c.pk = g.channel_pk
        WHERE g.id = \(messageID) AND g.channel_pk = \(channelPK) AND \(raw: messageIsThere)
        """
    }

    /// The seq of the channel's newest message sent before `micros`, gone
    /// or not: read from the newest back, so it costs the messages since.
    static func newestSeq(before micros: Int64, in channelPK: Int64) -> StoreQuery {
        "SELECT seq FROM message WHERE channel_pk = \(channelPK) AND created_at < \(micros) ORDER BY seq DESC LIMIT 1"
    }

    /// The newest `limit` messages still there before `beforeSeq`, newest first.
    static func messages(in channel: ChannelRecord, before beforeSeq: Seq, limit: Int) -> StoreQuery {
        """
        SELECT \(raw: messageColumns) FROM message g
        WHERE g.channel_pk = \(channel.pk) AND g.seq < \(beforeSeq) AND g.seq > \(channel.truncatedSeq)
          AND g.hard_deleted = 0 AND (g.parent_id IS NULL OR g.show_in_channel <> 0)
        ORDER BY g.seq DESC LIMIT \(Int64(limit))
        """
    }

    /// The oldest `limit` messages still there from `fromSeq` on, oldest first.
    static func messages(in channel: ChannelRecord, from fromSeq: Seq, limit: Int) -> StoreQuery {
        """
        SELECT \(raw: messageColumns) FROM message g
        WHERE g.channel_pk = \(channel.pk) AND g.seq >= \(max(fromSeq, channel.truncatedSeq + 1))
          AND g.hard_deleted = 0 AND (g.parent_id IS NULL OR g.show_in_channel <> 0)
        ORDER BY g.seq LIMIT \(Int64(limit))
        """
    }

    /// The messages still there among `ids`, oldest first.
    static func messages(in channel: ChannelRecord, ids: [String]) -> StoreQuery {
        """
        SELECT \(raw: messageColumns) FROM message g
        WHERE g.channel_pk = \(channel.pk) AND \(in: "g.id", ids) AND g.seq > \(channel.truncatedSeq)
          AND g.hard_deleted = 0
        ORDER BY g.seq
        """
    }

    /// A send moves the channel's `updated_at`, naming no updater (`actors` of no user), and, for a
    /// message that `counts` toward unread (R7: not a reply shown only in its thread), the channel's
    /// `counted` where sends count by positions (`AppOptions.UnreadCounting`). Column 0: 1 when they do (the
    /// send then writes no member's count), 0 when every other member's kept count takes one more
    /// (`countNewMessage`). Read under the channel's row lock, which a change of the setting waits for
    /// (`SQLStore.updateAppOptions`).
    static func appendMessage(to channelPK: Int64, seq: Seq, at: Int64, counts: Bool, actors: ChangeActor)
        -> StoreQuery
    {
        let byPositions: StoreQuery = "CAST(CASE WHEN \(countsByPositions) THEN 1 ELSE 0 END AS BIGINT)"
        let counted: StoreQuery = counts ? "\(unreadPositions: ", counted = counted + \(byPositions)", otherwise: "")" : ""
        return "UPDATE channel SET last_seq = \(seq), last_message_at = \(at), updated_at = \(at)" + counted
            + actors.set("updated_by") + " WHERE pk = \(channelPK) RETURNING \(byPositions)"
    }

    static func insertMessage(channelPK: Int64, seq: Seq, message: NewMessage, custom: String, at: Int64) -> StoreQuery {
        """
        INSERT INTO message (channel_pk, seq, id, user_id, text, custom, created_at, parent_id, show_in_channel, hidden)
        VALUES (\(channelPK), \(seq), \(message.id), \(message.userID), \(message.text), \(custom), \(at),
          \(message.parentID), \(message.showInChannel ? 1 : 0 as Int64), \(message.threadOnly ? 1 : 0 as Int64))
        """
    }

    /// A member's read state (`memberStateColumns`, 0–11), then their user
    /// (12: the body, null when there is none) and unread totals (13, 14):
    /// what a cursor move's outcome reads back, in one statement (`ReaderRow`;
    /// PostgreSQL's batched moves return the same columns, `movesStatement`).
    /// With `setting`, column 15: that app setting's value (JSON; null when never set), so that a move
    /// reads what its hearers' privacy needs with no statement more (`SQLStore.withHearers`).
    static func readerState(_ userID: String, in channelPK: Int64, setting: String? = nil) -> StoreQuery {
        let query: StoreQuery = """
            SELECT \(memberStateColumns), u.body, \(unreadSums(of: "m.user_id"))
            """
        let from: StoreQuery = """
             FROM member m LEFT JOIN app_user u ON u.id = m.user_id
            WHERE m.channel_pk = \(channelPK) AND m.user_id = \(userID)
            """
        guard let setting else { return query + from }
        return query + ", (SELECT value FROM app_setting WHERE name = \(setting))" + from
    }

    // MARK: Cursors

    /// Where SQLite's mark read starts, in one statement: the channel's
    /// columns (0–12); the member's read and delivered seq (13, 14, null
    /// when `userID` is not a member); the seq of `messageID` if it is one of
    /// the channel's messages still there (15).
    /// It locks nothing: PostgreSQL batches every mark read (`moves`).
    static func readStart(_ cid: ChannelID, member userID: String, message messageID: String?) -> StoreQuery {
        """
        SELECT \(raw: channelColumns), m.read_seq, m.delivered_seq,
          (SELECT g.seq FROM message g WHERE g.id = \(messageID) AND g.channel_pk = c.pk AND \(raw: messageIsThere))
        FROM \(raw: channelFrom) LEFT JOIN member m ON m.channel_pk = c.pk AND m.user_id = \(userID)
        WHERE c.type = \(cid.type) AND c.id = \(cid.id) AND c.deleted_at IS NULL
        """
    }

    /// Columns 0 and 1: the read and delivered cursors; locked in
    /// PostgreSQL, so a member's moves through any node take turns (R2).
    static func cursors(of userID: String, in channelPK: Int64) -> StoreQuery {
        """
        SELECT read_seq, delivered_seq FROM member WHERE channel_pk = \(channelPK) AND user_id = \(userID)\(forUpdateOf: nil)
        """
    }

    /// Moves one cursor, only ever the way the rule moved it (`WHERE` guards
    /// the direction, so a stale decision cannot move it back).
    static func moveCursor(_ move: CursorMove, of userID: String, in channelPK: Int64, at: Int64) -> StoreQuery {
        let column = move.kind == .read ? "read" : "delivered"
        let direction = move.to > move.from ? "<" : ">"
        return """
            UPDATE member SET \(raw: column)_seq = \(move.to), \(raw: column)_at = \(at)
            WHERE channel_pk = \(channelPK) AND user_id = \(userID) AND \(raw: column)_seq \(raw: direction) \(move.to)
            """
    }

    /// Moves the cursors in one statement, each as `moveCursor` would
    /// (guarded the same way, column by column: a `SET` reads the row as it
    /// was). `ReceiptRules` moves each cursor at most once per update.
    static func moveCursors(_ moves: [CursorMove], of userID: String, in channelPK: Int64, at: Int64) -> StoreQuery {
        assert(!moves.isEmpty && Set(moves.map(\.kind)).count == moves.count, "each cursor moves at most once")
        guard moves.count > 1 else { return moveCursor(moves[0], of: userID, in: channelPK, at: at) }
        var query: StoreQuery = "UPDATE member SET "
        var guards: StoreQuery = ""
        for (index, move) in moves.enumerated() {
            let column = move.kind == .read ? "read" : "delivered"
            let moves: StoreQuery = "\(raw: column)_seq \(raw: move.to > move.from ? "<" : ">") \(move.to)"
            query = query + (index == 0 ? "" : ", ")
                + "\(raw: column)_seq = CASE WHEN " + moves + " THEN \(move.to) ELSE \(raw: column)_seq END, "
                + "\(raw: column)_at = CASE WHEN " + moves + " THEN \(at) ELSE \(raw: column)_at END"
            guards = guards + (index == 0 ? "" : " OR ") + moves
        }
        return query + " WHERE channel_pk = \(channelPK) AND user_id = \(userID) AND (" + guards + ")"
    }

    /// The receipt log rows of `moves`, in one statement.
    static func logMoves(_ moves: [CursorMove], of userID: String, in channelPK: Int64, at: Int64) -> StoreQuery {
        var query: StoreQuery = "INSERT INTO cursor_move (channel_pk, user_id, kind, seq, at) VALUES "
        for (index, move) in moves.enumerated() {
            query = query + (index == 0 ? "" : ", ")
                + "(\(channelPK), \(userID), \(Int64(move.kind.rawValue)), \(move.to), \(at))"
        }
        return query
    }

    /// The receipt log: one row per cursor move, never one per message per member.
    static func logMove(kind: CursorKind, seq: Seq, of userID: String, in channelPK: Int64, at: Int64) -> StoreQuery {
        """
        INSERT INTO cursor_move (channel_pk, user_id, kind, seq, at)
        VALUES (\(channelPK), \(userID), \(Int64(kind.rawValue)), \(seq), \(at))
        """
    }

    /// Column 0: the ids an `AudienceSource` names.
    static func audience(_ source: AudienceSource, in channelPK: Int64) -> StoreQuery {
        switch source {
        case .members:
            "SELECT user_id FROM member WHERE channel_pk = \(channelPK)"
        case .authors(let after, let through):
            "SELECT DISTINCT user_id FROM message WHERE channel_pk = \(channelPK) AND seq > \(after) AND seq <= \(through)"
        }
    }

    /// The user's channels, in pk order (the order every transaction locks members in).
    static func channels(ofMember userID: String) -> StoreQuery {
        """
        SELECT \(raw: channelColumns)
        FROM member m JOIN channel c ON c.pk = m.channel_pk LEFT JOIN channel_type t ON t.name = c.type
        WHERE m.user_id = \(userID) AND c.deleted_at IS NULL ORDER BY c.pk
        """
    }

    /// Columns 0 and 1: the user's unread messages over all their channels, and
    /// the channels with any (R7, `unreadSums`); no row when there is no such user.
    static func unreadTotals(of userID: String) -> StoreQuery {
        "SELECT \(unreadSums(of: "u.id")) FROM app_user u WHERE u.id = \(userID)"
    }

    /// A user's totals as two columns: the unread messages over all their
    /// channels and the channels with any (R7), summed from their
    /// memberships' kept counts as they are read (by `member_by_user`), never
    /// kept themselves: a send or a mark read writes no user's row, so it
    /// locks none, and nothing can leave a total out of step with its
    /// channels. Deleting a channel or a membership deletes its rows, so
    /// every row summed is a membership that counts. `user`: the SQL
    /// expression of the user's id; `plus`: SQL added to each sum (what a
    /// statement changed that its own snapshot cannot see, `movesStatement`).
    static func unreadSums(of user: String, plus: (messages: String, channels: String)? = nil) -> StoreQuery {
        let (messages, channels) = plus.map { (" + \($0.messages)", " + \($0.channels)") } ?? ("", "")
        return """
            CAST(COALESCE((SELECT SUM(\(memberUnread("us"))) FROM member us WHERE us.user_id = \(raw: user)), 0)\(raw: messages) AS BIGINT),
              (SELECT COUNT(*) FROM member us WHERE us.user_id = \(raw: user) AND \(memberUnread("us")) > 0)\(raw: channels)
            """
    }

    /// Every member's counts, in join order: user id, their unread count in
    /// the channel, and their totals (`unreadSums`). What `message.new` tells
    /// each member, and no more: a send into a channel of N members reads N
    /// rows of four columns, not their whole read states (`memberStates`,
    /// three look-ups of messages a row).
    /// `among`: those of the members alone (the users connected to a node).
    static func recipientCounts(in channelPK: Int64, among userIDs: [String]? = nil) -> StoreQuery {
        var sql: StoreQuery = """
            SELECT m.user_id, \(memberUnread("m")), \(unreadSums(of: "m.user_id"))
            FROM member m
            WHERE m.channel_pk = \(channelPK)
            """
        if let userIDs { sql = sql + " AND \(in: "m.user_id", userIDs)" }
        return sql + " ORDER BY m.created_at, m.user_id"
    }

    /// Every member's user id, in join order: who `message.new` is for, each node reading the
    /// counts of those connected to it (`recipientCounts(in:among:)`).
    static func memberIDs(of channelPK: Int64) -> StoreQuery {
        "SELECT user_id FROM member WHERE channel_pk = \(channelPK) ORDER BY created_at, user_id"
    }

    /// `memberIDs` as one text, comma-separated (PostgreSQL); null when there are none.
    static func memberIDList(of channelPK: Int64) -> StoreQuery {
        "SELECT string_agg(user_id, ',' ORDER BY created_at, user_id) FROM member WHERE channel_pk = \(channelPK)"
    }

    /// A new message in the channel by `author`: one more unread for every
    /// other member (R7; their read cursors are all before it). Their totals
    /// follow, as sums (`unreadSums`): no user's row is written or locked, so
    /// sends into channels that share members never wait on each other.
    /// The author's row is taken with the others' (their count unchanged):
    /// the send goes on to move the author's read cursor (R4), and taking
    /// that row only then deadlocked with a batch of moves and with a send
    /// into another channel the two authors share (`RandomWritersTests`).
    ///
    /// Only where sends keep counts (`AppOptions.UnreadCounting.kept`, an upgraded
    /// PostgreSQL database until its operator turns positions on): elsewhere
    /// the send moved the channel's `counted` instead (`appendMessage`) and
    /// writes no member's row.
    static func countNewMessage(in channelPK: Int64, by author: String) -> StoreQuery {
        """
        UPDATE member SET unread = unread + CASE WHEN user_id = \(author) THEN 0 ELSE 1 END
        WHERE channel_pk = \(channelPK)
        """
    }

    /// R7 counted afresh for the member after their read cursor moved, and
    /// kept: the messages after the read cursor (sequence numbers are dense,
    /// so `last_seq - read_seq` of them) less those that never count — the
    /// member's own (none unless they marked unread before their own
    /// messages, R4) and hidden ones (deleted) — read by the channel's key
    /// from the cursor on. Column 0: the new count. Everything else reads the
    /// counts kept with the members (`member.unread`) and sums them for the
    /// user's totals (`unreadSums`).
    /// `userID`'s count, or (nil) every member's of the channel (a user's
    /// messages deleted).
    static func recountUnread(of userID: String?, in channelPK: Int64) -> StoreQuery {
        let sql: StoreQuery = """
            UPDATE member SET unread = \(raw: countedUnread(of: "member"))\(keptNow("member")) WHERE channel_pk = \(channelPK)
            """
        return (userID.map { sql + " AND user_id = \($0)" } ?? sql) + " RETURNING unread"
    }

    /// `recountUnread`'s count as an expression of the `member` row named
    /// `member` (a table or its alias): what `POST /unread/recount` compares
    /// with the kept count.
    static func countedUnread(of member: String) -> String {
        """
        ((SELECT lc.last_seq FROM channel lc WHERE lc.pk = \(member).channel_pk) - \(member).read_seq
          - (SELECT COUNT(*) FROM message lg
             WHERE lg.channel_pk = \(member).channel_pk AND lg.seq > \(member).read_seq
               AND (lg.user_id = \(member).user_id OR lg.hidden <> 0)))
        """
    }

    // MARK: Receipts

    /// For each member whose cursor of `kind` is at or past `seq` now, what
    /// the receipt log tells of when it got there (`ReceiptRules.reached` as
    /// one query): 0 user id; 1 the time of the first move at or past `seq`
    /// after the last move before it (null when the log holds none); 2 that
    /// last move's id (null when the log holds none: the log may have been
    /// pruned past it); 3 when the member joined; 4 the cursor's own time (its
    /// latest move); 5 the time before which moves may have been pruned (null
    /// when the log never was, or the schema cannot say: `pruned` false).
    static func reachedTimes(kind: CursorKind, seq: Seq, in channelPK: Int64, pruned: Bool) -> StoreQuery {
        let column = kind == .read ? "read" : "delivered"
        let kindValue = Int64(kind.rawValue)
        let prunedBefore = pruned ? "(SELECT p.pruned_before FROM receipt_log_pruned p WHERE p.id = 1)" : "NULL"
        return """
            SELECT a.user_id,
              (SELECT l.at FROM cursor_move l
                WHERE l.channel_pk = a.channel_pk AND l.user_id = a.user_id AND l.kind = \(kindValue)
                  AND l.seq >= \(seq) AND l.id > COALESCE(a.anchor, 0)
                ORDER BY l.id LIMIT 1) AS at,
              a.anchor, a.created_at, a.cursor_at,
              \(raw: prunedBefore)
            FROM (
              SELECT m.channel_pk, m.user_id, m.created_at, m.\(raw: column)_at AS cursor_at,
                (SELECT MAX(b.id) FROM cursor_move b
                  WHERE b.channel_pk = m.channel_pk AND b.user_id = m.user_id
                    AND b.kind = \(kindValue) AND b.seq < \(seq)) AS anchor
              FROM member m WHERE m.channel_pk = \(channelPK) AND m.\(raw: column)_seq >= \(seq)
            ) a
            """
    }

    /// The raw log of one member's moves of one kind, oldest first: id, seq, at.
    static func loggedMoves(kind: CursorKind, of userID: String, in channelPK: Int64) -> StoreQuery {
        """
        SELECT id, seq, at FROM cursor_move
        WHERE channel_pk = \(channelPK) AND user_id = \(userID) AND kind = \(Int64(kind.rawValue)) ORDER BY id
        """
    }
}

/// Decoders of the rows `StoreSQL` lists, by position, for every store.
enum StoreRows {
    /// `StoreSQL.channelColumns` from column `offset` on; the config is nil when the type is gone.
    static func channel(_ row: some StoreRow, at offset: Int = 0) throws -> (channel: ChannelRecord, config: ChannelConfig?) {
        let channel = ChannelRecord(
            pk: try row.int(offset), cid: ChannelID(type: try row.text(offset + 1), id: try row.text(offset + 2)),
            createdBy: try row.optionalText(offset + 3), custom: try StoredJSON.customFields(try row.text(offset + 4)),
            lastSeq: try row.int(offset + 5), lastMessageAt: try row.optionalInt(offset + 6).map(Timestamp.init(microseconds:)),
            memberCount: Int(try row.int(offset + 7)), createdAt: Timestamp(microseconds: try row.int(offset + 8)),
            updatedAt: Timestamp(microseconds: try row.int(offset + 9)),
            truncatedAt: try row.optionalInt(offset + 11).map(Timestamp.init(microseconds:)),
            truncatedSeq: try row.int(offset + 12))
        return (channel, try row.optionalText(offset + 10).map(StoredJSON.config))
    }

    /// `StoreSQL.messageColumns` from column `offset` on.
    static func message(_ row: some StoreRow, at offset: Int = 0, cid: ChannelID) throws -> MessageRecord {
        let (custom, attachments) = try StoredJSON.messageFields(try row.text(offset + 5))
        return MessageRecord(
            id: try row.text(offset + 2), channelPK: try row.int(offset), cid: cid, seq: try row.int(offset + 1),
            userID: try row.text(offset + 3), text: try row.text(offset + 4),
            custom: custom,
            createdAt: Timestamp(microseconds: try row.int(offset + 6)),
            updatedAt: try row.optionalInt(offset + 7).map(Timestamp.init(microseconds:)),
            deletedAt: try row.optionalInt(offset + 8).map(Timestamp.init(microseconds:)),
            hardDeleted: try row.int(offset + 9) != 0, hidden: try row.int(offset + 10) != 0,
            parentID: try row.optionalText(offset + 11), showInChannel: try row.int(offset + 12) != 0,
            replyCount: Int(try row.int(offset + 13)),
            textUpdatedAt: try row.optionalInt(offset + 14).map(Timestamp.init(microseconds:)),
            attachments: attachments)
    }

    /// `StoreSQL.memberStateColumns`, from column `offset`.
    static func memberState(_ row: some StoreRow, at offset: Int = 0) throws -> MemberState {
        MemberState(
            userID: try row.text(offset), joinedAt: Timestamp(microseconds: try row.int(offset + 1)),
            channelRole: ChannelRole(rawValue: try row.text(offset + 2)) ?? .member,
            cursors: Cursors(read: try row.int(offset + 3), delivered: try row.int(offset + 5)),
            readAt: Timestamp(microseconds: try row.int(offset + 4)),
            deliveredAt: Timestamp(microseconds: try row.int(offset + 6)),
            lastReadMessageID: try row.optionalText(offset + 7),
            lastDeliveredMessageID: try row.optionalText(offset + 8),
            unread: Int(try row.int(offset + 9)), firstUnreadMessageID: try row.optionalText(offset + 10),
            custom: try StoredJSON.customFields(try row.text(offset + 11)))
    }

    static func totals(_ row: some StoreRow, at offset: Int = 0) throws -> UnreadTotals {
        UnreadTotals(messages: Int(try row.int(offset)), channels: Int(try row.int(offset + 1)))
    }

    /// A row of `StoreSQL.recipientCounts`.
    static func recipient(_ row: some StoreRow) throws -> RecipientUnread {
        RecipientUnread(
            userID: try row.text(0), channelUnread: Int(try row.int(1)), totals: try totals(row, at: 2))
    }

    /// `StoreSQL.message(id:)`: the message, in the channel its last two columns name.
    static func messageWithChannel(_ row: some StoreRow) throws -> MessageRecord {
        try message(row, cid: ChannelID(type: try row.text(15), id: try row.text(16)))
    }
}

/// A member's row as a cursor move reads it back after moving it: their read
/// state, their user and their unread totals. Both dialects decode it here —
/// SQLite from `StoreSQL.readerState`, PostgreSQL's batch from columns 18–32
/// of `StoreSQL.movesStatement`, the same columns in the same order — and
/// make the move's outcome of it (`outcome(of:in:config:at:recipients:)`).
struct ReaderRow {
    var state: MemberState
    var reader: User
    var totals: UnreadTotals

    /// How many columns it takes.
    static let width = 15

    /// The row's `width` columns from `offset`.
    init(_ row: some StoreRow, at offset: Int = 0) throws {
        state = try StoreRows.memberState(row, at: offset)
        reader = try row.optionalText(offset + 12).map { try StoredJSON.user($0) } ?? User(id: state.userID)
        totals = try StoreRows.totals(row, at: offset + 13)
    }

    /// The outcome of `update`, the move that left the row so.
    func outcome(
        of update: CursorUpdate, in channel: ChannelRecord, config: ChannelConfig, at: Timestamp, recipients: [String]
    ) -> CursorOutcome {
        CursorOutcome(
            channel: channel, config: config, reader: reader, update: update, state: state, totals: totals, at: at,
            recipients: recipients)
    }
}

// MARK: Unread counts by positions

extension StoreSQL {
    /// Whether sends count by positions (`AppOptions.UnreadCounting`), as
    /// SQL: never on a node held before `v15-unread-positions`.
    static let countsByPositions: StoreQuery = {
        let setting = AppOptions.Change.CodingKeys.unreadCounting.rawValue
        let exists: StoreQuery = """
            EXISTS (SELECT 1 FROM app_setting WHERE name = '\(raw: setting)' \
            AND value = '\(raw: AppOptions.UnreadCounting.positions.stored)')
            """
        return "\(unreadPositions: exists, otherwise: "1 = 0")"
    }()

    /// A member's unread count (R7) for the `member` row named `member` (a
    /// table or its alias): the count kept with it, plus the messages that
    /// counted in the channel since it was kept (`channel.counted` less
    /// `member.counted_at`). On a node held before `v15-unread-positions`,
    /// the kept count alone.
    static func memberUnread(_ member: String) -> StoreQuery {
        let positions: StoreQuery = """
            (\(raw: member).unread + \(raw: channelCounted(of: member)) - \(raw: member).counted_at)
            """
        return "\(unreadPositions: positions, otherwise: "\(raw: member).unread")"
    }

    /// The `counted` of the channel of the `member` row named `member`, as a
    /// subquery (a statement on a schema with `v15-unread-positions` only).
    static func channelCounted(of member: String) -> String {
        "(SELECT uc.counted FROM channel uc WHERE uc.pk = \(member).channel_pk)"
    }

    /// `, counted_at = <the channel's counted now>` for an update that sets
    /// the kept count of the `member` row named `member` afresh: the count is
    /// then as of the channel's position now. Nothing on a node held before
    /// `v15-unread-positions`.
    static func keptNow(_ member: String) -> StoreQuery {
        let positions: StoreQuery = ", counted_at = \(raw: channelCounted(of: member))"
        return "\(unreadPositions: positions, otherwise: "")"
    }
}
