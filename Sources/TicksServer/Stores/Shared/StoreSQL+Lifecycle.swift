import TicksProtocol
import TicksReceipts

/// The statements behind editing and deleting messages, truncating,
/// updating and deleting channels, member and user updates, unread counts
/// and tasks — written once for both databases, as the rest of `StoreSQL`.
extension StoreSQL {
    // MARK: Messages

    /// `message(id:)`, locked in PostgreSQL: edits and deletes of one message take turns.
    static func lockedMessage(id: String) -> StoreQuery {
        message(id: id) + "\(forUpdateOf: "g")"
    }

    /// `textChanged`: the edit changes the text (so `text_updated_at` moves too).
    static func editMessage(
        id: String, text: String, custom: String, at: Int64, textChanged: Bool, by actor: ChangeActor
    ) -> StoreQuery {
        let textAt: StoreQuery = textChanged ? ", text_updated_at = \(at)" : ""
        return "UPDATE message SET text = \(text), custom = \(custom), updated_at = \(at)" + textAt
            + actor.set("changed_by") + " WHERE id = \(id)"
    }

    /// What deleting does to a message row, for every way messages are
    /// deleted (one, a user's, a hard truncation): it is hidden (never unread
    /// again) and keeps the time of its first delete; a hard delete keeps
    /// nothing of its content, only the row that holds its place in the
    /// channel's numbering.
    static func deletedMessage(hard: Bool, at: Int64) -> StoreQuery {
        hard
            ? "text = '', custom = '{}', deleted_at = COALESCE(deleted_at, \(at)), hard_deleted = 1, hidden = 1"
            : "deleted_at = COALESCE(deleted_at, \(at)), hidden = 1"
    }

    static func deleteMessage(id: String, hard: Bool, at: Int64, by actor: ChangeActor) -> StoreQuery {
        "UPDATE message SET " + deletedMessage(hard: hard, at: at) + actor.set("changed_by") + " WHERE id = \(id)"
    }

    /// A message that counted leaves the unread counts (the reverse of
    /// `countNewMessage`): one fewer for every other member whose read cursor
    /// is before it; their totals follow, as sums (`StoreSQL.unreadSums`).
    /// Whether the message was counted by positions or in the kept counts,
    /// one fewer in the kept count is one fewer in the count (`memberUnread`).
    static func uncountMessage(seq: Seq, in channelPK: Int64, by author: String) -> StoreQuery {
        """
        UPDATE member SET unread = unread - 1
        WHERE channel_pk = \(channelPK) AND user_id <> \(author) AND read_seq < \(seq)
        """
    }

    // MARK: Truncating and deleting channels

    /// Every member's id, their rows locked in PostgreSQL in key order (the
    /// order a batch of moves takes them in, `StoreSQL.movesStatement`).
    static func lockedMemberIDs(_ channelPK: Int64) -> StoreQuery {
        "SELECT user_id FROM member WHERE channel_pk = \(channelPK) ORDER BY user_id\(forUpdateOf: nil)"
    }

    /// Every member has received and read everything up to `seq` (the
    /// channel's last message when it was truncated): nothing before it can be
    /// unread, and no receipt names it.
    static func moveCursors(in channelPK: Int64, pastOrAt seq: Seq) -> StoreQuery {
        """
        UPDATE member SET unread = 0\(keptNow("member")),
          read_seq = CASE WHEN read_seq < \(seq) THEN \(seq) ELSE read_seq END,
          delivered_seq = CASE WHEN delivered_seq < \(seq) THEN \(seq) ELSE delivered_seq END
        WHERE channel_pk = \(channelPK)
        """
    }


    static func truncate(_ channelPK: Int64, through seq: Seq, at: Int64, by actor: ChangeActor) -> StoreQuery {
        "UPDATE channel SET truncated_seq = \(seq), truncated_at = \(at), updated_at = \(at)"
            + actor.set("truncated_by") + actor.set("updated_by") + " WHERE pk = \(channelPK)"
    }

    /// A hard truncation: the content of every message up to `seq` goes.
    static func wipeMessages(in channelPK: Int64, through seq: Seq, at: Int64) -> StoreQuery {
        "UPDATE message SET " + deletedMessage(hard: true, at: at)
            + " WHERE channel_pk = \(channelPK) AND seq <= \(seq) AND hard_deleted = 0"
    }

    static func deleteMembers(of channelPK: Int64) -> StoreQuery {
        "DELETE FROM member WHERE channel_pk = \(channelPK)"
    }

    /// A soft delete: the channel is gone from every look-up, its messages
    /// truncated away; its rows stay until a create of the same cid
    /// (`deletedChannel`) removes them for a new channel.
    static func markDeleted(_ channelPK: Int64, at: Int64, by actor: ChangeActor) -> StoreQuery {
        "UPDATE channel SET deleted_at = \(at), member_count = 0, truncated_seq = last_seq, truncated_at = \(at), "
            + "updated_at = \(at)" + actor.set("deleted_by") + actor.set("updated_by") + " WHERE pk = \(channelPK)"
    }

    static func deleteMessages(of channelPK: Int64) -> StoreQuery {
        "DELETE FROM message WHERE channel_pk = \(channelPK)"
    }

    static func deleteChannelRow(_ channelPK: Int64) -> StoreQuery {
        "DELETE FROM channel WHERE pk = \(channelPK)"
    }

    /// Column 0: the pk of the soft-deleted channel `type:id`, locked in
    /// PostgreSQL; no row when there is none.
    static func deletedChannel(type: String, id: String) -> StoreQuery {
        "SELECT pk FROM channel WHERE type = \(type) AND id = \(id) AND deleted_at IS NOT NULL\(forUpdateOf: nil)"
    }

    // MARK: Channel and member data

    static func setCustom(of channelPK: Int64, to custom: String, at: Int64, by actor: ChangeActor) -> StoreQuery {
        "UPDATE channel SET custom = \(custom), updated_at = \(at)" + actor.set("updated_by")
            + " WHERE pk = \(channelPK)"
    }

    static func setMemberCustom(of userID: String, in channelPK: Int64, to custom: String) -> StoreQuery {
        "UPDATE member SET custom = \(custom) WHERE channel_pk = \(channelPK) AND user_id = \(userID)"
    }

    /// The members among `userIDs` (all when nil), in join order, a page of them.
    static func memberStates(_ channelPK: Int64, among userIDs: [String]?, limit: Int, offset: Int) -> StoreQuery {
        var sql: StoreQuery = "SELECT \(memberStateColumns) FROM member m WHERE m.channel_pk = \(channelPK)"
        if let userIDs { sql = sql + " AND \(in: "m.user_id", userIDs)" }
        return sql + " ORDER BY m.created_at, m.user_id LIMIT \(Int64(limit)) OFFSET \(Int64(offset))"
    }

    /// Column 0: the user as JSON, locked in PostgreSQL until the update commits.
    static func userBody(_ id: String) -> StoreQuery {
        "SELECT body FROM app_user WHERE id = \(id)\(forUpdateOf: nil)"
    }

    static func setUserBody(_ id: String, body: String, now: Int64) -> StoreQuery {
        "UPDATE app_user SET body = \(body), updated_at = \(now) WHERE id = \(id)"
    }

    // MARK: Unread counts

    /// Each of the users' channels with unread messages, newest activity
    /// first: user id, channel type, channel id, unread, read_at, the id at
    /// the read cursor.
    static func unreadChannels(of userIDs: [String]) -> StoreQuery {
        """
        SELECT m.user_id, c.type, c.id, \(memberUnread("m")), m.read_at,
          (SELECT id FROM message WHERE channel_pk = m.channel_pk AND seq = m.read_seq)
        FROM member m JOIN channel c ON c.pk = m.channel_pk
        WHERE \(in: "m.user_id", userIDs) AND c.deleted_at IS NULL AND \(memberUnread("m")) > 0
        ORDER BY m.user_id, COALESCE(c.last_message_at, c.created_at) DESC, c.pk DESC
        """
    }

    /// User id and totals (`StoreSQL.unreadSums`) of the users among `userIDs` that exist.
    static func unreadTotals(of userIDs: [String]) -> StoreQuery {
        "SELECT u.id, \(unreadSums(of: "u.id")) FROM app_user u WHERE \(in: "u.id", userIDs)"
    }

    /// Up to `limit` messages of the channel after `seq`, in order: seq, id,
    /// author, created_at, hidden, deleted (1 or 0) — what `ReceiptRules.unreadRule` takes.
    static func messagesAfter(_ seq: Seq, in channelPK: Int64, limit: Int) -> StoreQuery {
        """
        SELECT seq, id, user_id, created_at, hidden, CASE WHEN deleted_at IS NULL THEN 0 ELSE 1 END
        FROM message WHERE channel_pk = \(channelPK) AND seq > \(seq) ORDER BY seq LIMIT \(Int64(limit))
        """
    }

    /// Up to `limit` user ids after `after` (from the first when nil), in byte order.
    static func userIDs(after: String?, limit: Int) -> StoreQuery {
        let from: StoreQuery = after.map { "WHERE \(byteOrdered: "id") > \($0) " } ?? ""
        return "SELECT id FROM app_user " + from + "ORDER BY \(byteOrdered: "id") LIMIT \(Int64(limit))"
    }

    /// The channels the users are members of, locked in pk order (PostgreSQL),
    /// as every change that takes them: a recount waits for sends and deletes.
    static func lockChannels(ofMembers userIDs: [String]) -> StoreQuery {
        """
        SELECT pk FROM channel WHERE pk IN (SELECT channel_pk FROM member WHERE \(in: "user_id", userIDs))
        ORDER BY pk\(forNoKeyUpdateOf: nil)
        """
    }

    /// The users' memberships with the kept count and the count made afresh
    /// (`countedUnread`), locked: channel pk, type, id, user id, kept, counted.
    static func memberCounts(of userIDs: [String]) -> StoreQuery {
        """
        SELECT m.channel_pk, c.type, c.id, m.user_id, \(memberUnread("m")), \(raw: countedUnread(of: "m"))
        FROM member m JOIN channel c ON c.pk = m.channel_pk
        WHERE \(in: "m.user_id", userIDs) ORDER BY m.channel_pk, m.user_id\(forUpdateOf: "m")
        """
    }

    static func setUnread(of userID: String, in channelPK: Int64, to unread: Int64) -> StoreQuery {
        "UPDATE member SET unread = \(unread)\(keptNow("member")) WHERE channel_pk = \(channelPK) AND user_id = \(userID)"
    }

    /// How many of `userIDs` are users.
    static func userCount(among userIDs: [String]) -> StoreQuery {
        "SELECT COUNT(*) FROM app_user WHERE \(in: "id", userIDs)"
    }

    /// The users' thread read states with the kept count and the count made
    /// afresh (`countedThreadUnread`), locked: parent id, user id, channel
    /// type, channel id, kept, counted.
    static func threadCounts(of userIDs: [String]) -> StoreQuery {
        """
        SELECT t.parent_id, t.user_id, c.type, c.id, t.unread, \(raw: countedThreadUnread(of: "t"))
        FROM thread_read t JOIN channel c ON c.pk = t.channel_pk
        WHERE \(in: "t.user_id", userIDs) ORDER BY t.parent_id, t.user_id\(forUpdateOf: "t")
        """
    }

    static func setThreadUnread(of userID: String, in parentID: String, to unread: Int64) -> StoreQuery {
        "UPDATE thread_read SET unread = \(unread) WHERE parent_id = \(parentID) AND user_id = \(userID)"
    }

    // MARK: Tasks

    static func insertTask(id: String, status: String, result: String, at: Int64) -> StoreQuery {
        """
        INSERT INTO task (id, status, result, created_at, updated_at) VALUES (\(id), \(status), \(result), \(at), \(at))
        """
    }

    /// Columns: status, result as JSON, created_at, updated_at.
    static func task(_ id: String) -> StoreQuery {
        "SELECT status, result, created_at, updated_at FROM task WHERE id = \(id)"
    }
}

/// Threads: replies and each participant's thread read state.
extension StoreSQL {
    static func addReply(to parentID: String) -> StoreQuery {
        "UPDATE message SET reply_count = reply_count + 1 WHERE id = \(parentID)"
    }

    /// The parent's author joins the thread's readers at its first reply
    /// (having read up to the parent), while they are a member. A row back
    /// when they joined just now.
    static func joinThread(_ parent: MessageRecord, at: Int64) -> StoreQuery {
        """
        INSERT INTO thread_read (parent_id, user_id, channel_pk, read_seq, read_at, unread)
        SELECT \(parent.id), \(parent.userID), \(parent.channelPK), \(parent.seq), \(at), 0
        WHERE EXISTS (SELECT 1 FROM member WHERE channel_pk = \(parent.channelPK) AND user_id = \(parent.userID))
        ON CONFLICT (parent_id, user_id) DO NOTHING RETURNING user_id
        """
    }

    /// One reader's thread count counted afresh (`countedThreadUnread`).
    static func recountThread(_ parentID: String, of userID: String) -> StoreQuery {
        """
        UPDATE thread_read SET unread = \(raw: countedThreadUnread(of: "thread_read"))
        WHERE parent_id = \(parentID) AND user_id = \(userID)
        """
    }

    /// A new reply: one more unread in the thread for every reader of it but its author.
    static func countNewReply(in parentID: String, by author: String) -> StoreQuery {
        "UPDATE thread_read SET unread = unread + 1 WHERE parent_id = \(parentID) AND user_id <> \(author)"
    }

    /// A reply that counted leaves the thread counts of those who had not read it.
    static func uncountReply(in parentID: String, seq: Seq, by author: String) -> StoreQuery {
        """
        UPDATE thread_read SET unread = unread - 1
        WHERE parent_id = \(parentID) AND user_id <> \(author) AND read_seq < \(seq)
        """
    }

    /// Locks threads' parent messages (PostgreSQL; SQLite's single writer
    /// needs none), in byte order of their ids: a reply takes its parent's
    /// row lock (`addReply`) before it counts itself in the thread's read
    /// states, so a thread read that holds it sees, in its next statement,
    /// every reply that counted itself, and the others wait until it commits
    /// and then count themselves in the state it wrote. Without it a reply
    /// committed between the read of the newest reply and the write of
    /// `unread = 0` was counted and then wiped (issue 40).
    static func lockThreads(_ parentIDs: [String]) -> StoreQuery {
        "SELECT 1 FROM message WHERE \(in: "id", parentIDs) ORDER BY \(byteOrdered: "id")\(forUpdateOf: nil)"
    }

    /// `lockThreads` of every thread `userID` has a read state in.
    static func lockThreads(of userID: String) -> StoreQuery {
        """
        SELECT 1 FROM message WHERE id IN (SELECT parent_id FROM thread_read WHERE user_id = \(userID))
        ORDER BY \(byteOrdered: "id")\(forUpdateOf: nil)
        """
    }

    /// `userID` has read the thread up to `seq` (its newest reply): nothing in it is unread.
    static func readThread(_ parentID: String, by userID: String, in channelPK: Int64, upTo seq: Seq, at: Int64)
        -> StoreQuery
    {
        """
        INSERT INTO thread_read (parent_id, user_id, channel_pk, read_seq, read_at, unread)
        VALUES (\(parentID), \(userID), \(channelPK), \(seq), \(at), 0)
        ON CONFLICT (parent_id, user_id) DO UPDATE SET
          read_seq = CASE WHEN excluded.read_seq > thread_read.read_seq THEN excluded.read_seq ELSE thread_read.read_seq END,
          read_at = excluded.read_at, unread = 0
        """
    }

    /// `userID` has read the thread only up to its parent (`seq`): every
    /// reply counts, as `countedThreadUnread` counts. Returns the count.
    static func unreadThread(_ parentID: String, by userID: String, in channelPK: Int64, from seq: Seq, at: Int64)
        -> StoreQuery
    {
        """
        INSERT INTO thread_read (parent_id, user_id, channel_pk, read_seq, read_at, unread)
        VALUES (\(parentID), \(userID), \(channelPK), \(seq), \(at),
          (SELECT COUNT(*) FROM message lg
            WHERE lg.parent_id = \(parentID) AND lg.seq > \(seq) AND lg.user_id <> \(userID) AND lg.deleted_at IS NULL))
        ON CONFLICT (parent_id, user_id) DO UPDATE SET
          read_seq = excluded.read_seq, read_at = excluded.read_at, unread = excluded.unread
        RETURNING unread
        """
    }

    /// Every thread read state of `userID` that is behind its thread's newest
    /// reply, or counts unread ones, read up to that reply (as `readThread`):
    /// in channels they are a member of, for parents still there. Returns the
    /// parent ids of those it moved.
    static func readAllThreads(of userID: String, at: Int64) -> StoreQuery {
        let newest = "(SELECT COALESCE(MAX(r.seq), 0) FROM message r WHERE r.parent_id = thread_read.parent_id AND r.hard_deleted = 0)"
        return """
            UPDATE thread_read SET
              read_seq = CASE WHEN \(raw: newest) > read_seq THEN \(raw: newest) ELSE read_seq END,
              read_at = \(at), unread = 0
            WHERE user_id = \(userID) AND (unread > 0 OR read_seq < \(raw: newest))
              AND EXISTS (SELECT 1 FROM member m WHERE m.channel_pk = thread_read.channel_pk AND m.user_id = thread_read.user_id)
              AND EXISTS (SELECT 1 FROM message g JOIN channel c ON c.pk = g.channel_pk
                          WHERE g.id = thread_read.parent_id AND \(raw: messageIsThere))
            RETURNING parent_id
            """
    }

    /// The user's thread read states in a channel that moved after `after`,
    /// oldest first: `messageColumns` of the parent, then read_at and the id
    /// at their thread cursor.
    static func threadReads(of userID: String, in channelPK: Int64, after: Int64, limit: Int) -> StoreQuery {
        """
        SELECT \(raw: messageColumns), t.read_at, (SELECT id FROM message WHERE channel_pk = t.channel_pk AND seq = t.read_seq)
        FROM thread_read t JOIN message g ON g.id = t.parent_id JOIN channel c ON c.pk = g.channel_pk
        WHERE t.channel_pk = \(channelPK) AND t.user_id = \(userID) AND t.read_at > \(after) AND \(raw: messageIsThere)
        ORDER BY t.read_at, t.parent_id LIMIT \(Int64(limit))
        """
    }

    /// Column 0: the id of the message at `seq`.
    static func messageAt(seq: Seq, in channelPK: Int64) -> StoreQuery {
        "SELECT id FROM message WHERE channel_pk = \(channelPK) AND seq = \(seq)"
    }

    /// Column 0: the sequence number of the thread's newest reply still there (0 when none).
    static func newestReply(to parentID: String) -> StoreQuery {
        "SELECT COALESCE(MAX(seq), 0) FROM message WHERE parent_id = \(parentID) AND hard_deleted = 0"
    }

    /// Whose read state a removal takes: one member's (R6), a channel's
    /// (truncation, deletion), or a user's everywhere (user deletion).
    enum ReadStateScope {
        case member(String, in: Int64)
        case channel(Int64)
        case user(String)

        var condition: StoreQuery {
            switch self {
            case .member(let userID, let channelPK): "channel_pk = \(channelPK) AND user_id = \(userID)"
            case .channel(let channelPK): "channel_pk = \(channelPK)"
            case .user(let userID): "user_id = \(userID)"
            }
        }
    }

    /// The receipt log of `scope`.
    static func deleteMoves(of scope: ReadStateScope) -> StoreQuery {
        "DELETE FROM cursor_move WHERE " + scope.condition
    }

    /// The thread read states of `scope`.
    static func deleteThreadReads(of scope: ReadStateScope) -> StoreQuery {
        "DELETE FROM thread_read WHERE " + scope.condition
    }

    /// The users' threads with unread replies: user id, parent id, unread,
    /// read_at, the id at their thread cursor.
    static func unreadThreads(of userIDs: [String]) -> StoreQuery {
        """
        SELECT t.user_id, t.parent_id, t.unread, t.read_at,
          (SELECT id FROM message WHERE channel_pk = t.channel_pk AND seq = t.read_seq)
        FROM thread_read t JOIN channel c ON c.pk = t.channel_pk
        WHERE \(in: "t.user_id", userIDs) AND t.unread > 0 AND c.deleted_at IS NULL
        ORDER BY t.user_id, t.parent_id
        """
    }

    /// The newest `limit` replies still there before `beforeSeq`, newest first.
    static func replies(to parentID: String, before beforeSeq: Seq, limit: Int) -> StoreQuery {
        """
        SELECT \(raw: messageColumns) FROM message g JOIN channel c ON c.pk = g.channel_pk
        WHERE g.parent_id = \(parentID) AND \(raw: messageIsThere) AND g.seq < \(beforeSeq)
        ORDER BY g.seq DESC LIMIT \(Int64(limit))
        """
    }
}

/// Deleting a user: they leave every channel (R6), their messages may go.
extension StoreSQL {
    /// The pks of the channels the user is a member of, in pk order.
    static func channelPKs(ofMember userID: String) -> StoreQuery {
        "SELECT channel_pk FROM member WHERE user_id = \(userID) ORDER BY channel_pk"
    }

    /// The pks of the channels holding the user's messages not deleted yet.
    static func channelPKs(withMessagesBy userID: String) -> StoreQuery {
        "SELECT DISTINCT channel_pk FROM message WHERE user_id = \(userID) AND deleted_at IS NULL ORDER BY channel_pk"
    }

    /// Thread unread counts of a channel counted afresh: the replies after
    /// each reader's thread cursor, not theirs, not deleted.
    static func recountThreads(in channelPK: Int64) -> StoreQuery {
        "UPDATE thread_read SET unread = \(raw: countedThreadUnread(of: "thread_read")) WHERE channel_pk = \(channelPK)"
    }

    /// `recountThreads`'s count as an expression of the `thread_read` row named `read`.
    static func countedThreadUnread(of read: String) -> String {
        """
        (SELECT COUNT(*) FROM message lg
          WHERE lg.parent_id = \(read).parent_id AND lg.seq > \(read).read_seq
            AND lg.user_id <> \(read).user_id AND lg.deleted_at IS NULL)
        """
    }

    /// Every message of the user deleted (`deletedMessage`).
    /// Deleted with their author, by the app: no user is named as who deleted them.
    static func deleteMessages(by userID: String, hard: Bool, at: Int64, actors: ChangeActor) -> StoreQuery {
        "UPDATE message SET " + deletedMessage(hard: hard, at: at) + actors.set("changed_by")
            + " WHERE user_id = \(userID)"
    }

    static func deleteAllMemberships(of userID: String) -> StoreQuery {
        """
        UPDATE channel SET member_count = member_count - 1
        WHERE pk IN (SELECT channel_pk FROM member WHERE user_id = \(userID))
        """
    }

    static func deleteMemberRows(of userID: String) -> StoreQuery {
        "DELETE FROM member WHERE user_id = \(userID)"
    }

    static func deleteUserRow(_ userID: String) -> StoreQuery {
        "DELETE FROM app_user WHERE id = \(userID)"
    }
}
