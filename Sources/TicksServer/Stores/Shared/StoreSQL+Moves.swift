import TicksProtocol
import TicksReceipts

/// PostgreSQL's marks read and delivered: a batch of them in one round trip
/// (`moves`), through the function `MovesFunction` installs, whose
/// statements each take a fresh snapshot.
extension StoreSQL {
    /// A batch of marks read and delivered, for PostgreSQL, where every
    /// statement is a round trip and every commit a log flush: concurrent
    /// receipts are batched (`MoveBatcher`), one row of arrays per receipt,
    /// and committed together (SQLite runs `SQLStore`'s steps one by one, in
    /// process, and groups its commits in `GroupCommitter`). One statement,
    /// the call of `MovesFunction`: committed on its own when nothing else
    /// joins its transaction. It works out what the moves made read by all
    /// (R13) where `schema` has `v11-all-members` (an older one has no
    /// columns for it), and the hearers' privacy (R15) where it has
    /// `v12-app-settings`.
    ///
    /// Rows: first one per move, in order (`movesStatement`'s columns 0–36,
    /// 37 null), then one per move and kind of "all" the move raised the
    /// mover's counted position for: null but 36 (the move's number, from 1)
    /// and 37 (`MovesFunction`'s JSON of what it reached); then, with R15 on,
    /// one per move: null but 36 and 37 (JSON: `hiding`, those who hide their reads).
    static func moves(_ moves: [BatchedMove], schema: SchemaLevel) -> StoreQuery {
        let query: StoreQuery = """
            SELECT * FROM \(raw: MovesFunction.name)(\(array: moves.map { Int64($0.kind.rawValue) }), \(array: moves.map(\.userID)),
              \(array: moves.map(\.channel.type)), \(array: moves.map(\.channel.id)), \(array: moves.map { $0.messageID ?? "" }),
              \(array: moves.map { $0.messageID == nil ? 1 as Int64 : 0 }), \(array: moves.map(\.at.microseconds)),
              \(array: moves.map { Int64($0.audience.fullChannelLimit) }), \(schema.has(.allMembers) ? 1 : 0),
              \(schema.has(.appSettings) ? 1 : 0), \(schema.has(.unreadPositions) ? 1 : 0),
              \(schema.has(.countedColumns) ? 1 : 0))
            """
        return query.prepared(as: .moves)
    }

    /// The batch's moves, the second statement of `MovesFunction` (its
    /// `$1`–`$8`, the batch's arrays, as `moves` binds them). For each
    /// receipt it locks the member's row (members in key order, so two
    /// batches never wait on each other in a circle; no user's row: the
    /// totals are sums, `unreadSums`), applies `ReceiptRules.markRead`
    /// or `markDelivered` (written here again as SQL, and checked against
    /// them on every call: `OneStatementMove`), writes and logs the moves,
    /// keeps the unread counts, and returns what the events and the answer
    /// need. A data-modifying CTE's changes are invisible to the rest of its
    /// statement, so the new read state is computed from the decided cursors,
    /// not read back. Channel types with `delivery_events` off accept and
    /// ignore delivered (R9). The moves must name distinct members.
    ///
    /// One row per move, in order. Columns: the channel (0–12; null when it
    /// does not exist); the target's seq (13, null when the message is not in
    /// the channel); the cursors before (14, 15; null when not a member) and
    /// after (16, 17; null when R9 ignored the move); the member's row after
    /// the batch as `readerState` reads it (18–32, `ReaderRow`: the read state,
    /// the user as JSON, their unread totals: the sums of the statement's
    /// snapshot, moved by what the batch changed in their counts, which the
    /// snapshot cannot see); the member ids when the channel
    /// has at most the move's `fullChannelLimit` members (33), and the authors
    /// of the messages the read move (else the delivered move) covered (34),
    /// comma-separated; whether the member's row changed between the
    /// statement's snapshot and its lock (35: never, as the function locks the
    /// rows in a statement before, and the move is refused as inconsistent if
    /// it did); the move's number, from 1 (36); null (37).
    ///
    /// The statement reads the channel's last message, its `counted` and the
    /// messages' hidden flags from its snapshot: taken once the member rows
    /// are locked, that snapshot holds every change that wrote these members'
    /// counts (deletes, and sends that keep counts; the rest wait for the
    /// locks), so the counts it writes agree with the rows they came from. A
    /// send that counts by positions writes no member row: the count written
    /// is as of the snapshot's `counted` (`keptNow`), so a send committed
    /// after the snapshot still counts (`memberUnread`).
    /// The channel a batch's row `r` names (`r.ctype`, `r.cname`; only if not deleted when
    /// `shown`): a subquery of its own for each row (`OFFSET 0` keeps the planner from joining it
    /// flat), so that it is found by its key whatever the statistics say. Planned once on an almost
    /// empty schema (the first call on a connection, `force_generic_plan`), a flat join scanned
    /// every channel for every batch.
    static func channelByName(_ r: String, shown: Bool) -> String {
        "SELECT * FROM channel WHERE type = \(r).ctype AND id = \(r).cname\(shown ? " AND deleted_at IS NULL" : "") OFFSET 0"
    }

    static func movesStatement(_ moves: [BatchedMove]) -> StoreQuery {
        """
        WITH req AS (
          SELECT * FROM unnest(\(array: moves.map { Int64($0.kind.rawValue) }), \(array: moves.map(\.userID)),
            \(array: moves.map(\.channel.type)), \(array: moves.map(\.channel.id)), \(array: moves.map { $0.messageID ?? "" }),
            \(array: moves.map { $0.messageID == nil ? 1 as Int64 : 0 }), \(array: moves.map(\.at.microseconds)),
            \(array: moves.map { Int64($0.audience.fullChannelLimit) }))
            WITH ORDINALITY AS r(kind, user_id, ctype, cname, mid, to_newest, at, full_limit, ord)
        ), ch AS (
          -- The type's delivery events from the function's flags (`MovesFunction`, step 1: each type's
          -- config parsed once a call, not once a move).
          -- With the target's seq: null when the message is not in the channel.
          SELECT r.ord, \(raw: channelColumns),
            \(raw: MovesFunction.typeFlag(MovesFunction.typeDeliveryEvents, of: "c.type")) AS delivery_events,
            CASE WHEN r.to_newest = 1 THEN c.last_seq
                 ELSE (SELECT CASE WHEN g.channel_pk = c.pk AND g.seq > c.truncated_seq AND g.hard_deleted = 0
                                   THEN g.seq END
                       FROM message g WHERE g.id = r.mid) END AS target
          FROM req r CROSS JOIN LATERAL (\(raw: channelByName("r", shown: true))) c
            LEFT JOIN channel_type t ON t.name = c.type
        ), old AS (
          -- From here on each CTE reads only the one before: joined to each other, CTEs were planned as
          -- nested loops (a generic plan guesses one row each), a scan of the batch for every move.
          SELECT r.ord, r.kind, r.user_id, r.at, m.channel_pk, m.read_seq, m.delivered_seq, m.read_at,
                 m.delivered_at, m.created_at, m.channel_role, \(memberUnread("m")) AS unread, m.custom,
                 (SELECT s.xmin::text FROM member s WHERE s.channel_pk = m.channel_pk AND s.user_id = m.user_id)
                   IS DISTINCT FROM m.xmin::text AS stale,
                 ch.target, ch.last_seq AS newest, ch.delivery_events
          FROM req r JOIN ch ON ch.ord = r.ord
            JOIN member m ON m.channel_pk = ch.pk AND m.user_id = r.user_id
          ORDER BY m.channel_pk, m.user_id FOR UPDATE OF m
        ), decided AS (
          SELECT old.*, old.target IS NOT NULL AND NOT old.stale AND (old.kind = 1 OR old.delivery_events) AS decided
          FROM old
        ), new AS (
          -- A move not decided (no target, a stale row, delivered where R9 ignores it) keeps the cursors.
          SELECT decided.*,
                 CASE WHEN decided.decided AND decided.kind = 1
                      THEN GREATEST(decided.read_seq, LEAST(GREATEST(decided.target, 0), decided.newest))
                      ELSE decided.read_seq END AS read_to,
                 CASE WHEN decided.decided
                      THEN GREATEST(decided.delivered_seq, LEAST(GREATEST(decided.target, 0), decided.newest))
                      ELSE decided.delivered_seq END AS delivered_to
          FROM decided
        ), counted AS (
          SELECT new.*, CASE WHEN new.decided THEN (new.newest - new.read_to) - (SELECT COUNT(*) FROM message g
            WHERE g.channel_pk = new.channel_pk AND g.seq > new.read_to
              AND (g.user_id = new.user_id OR g.hidden <> 0)) ELSE new.unread END AS unread_to
          FROM new
        ), upd AS (
          UPDATE member m SET
            read_seq = counted.read_to,
            read_at = CASE WHEN counted.read_to > counted.read_seq THEN counted.at ELSE m.read_at END,
            delivered_seq = counted.delivered_to,
            delivered_at = CASE WHEN counted.delivered_to > counted.delivered_seq THEN counted.at ELSE m.delivered_at END,
            unread = counted.unread_to\(keptNow("m"))
          FROM counted
          WHERE m.channel_pk = counted.channel_pk AND m.user_id = counted.user_id
            AND (counted.read_to > counted.read_seq OR counted.delivered_to > counted.delivered_seq)
          RETURNING m.user_id
        ), delta AS (
          SELECT user_id, SUM(unread_to - unread)::bigint AS messages,
            SUM((CASE WHEN unread_to > 0 THEN 1 ELSE 0 END) - (CASE WHEN unread > 0 THEN 1 ELSE 0 END))::bigint AS channels
          FROM counted WHERE unread_to <> unread
            AND (counted.read_to > counted.read_seq OR counted.delivered_to > counted.delivered_seq)
          GROUP BY user_id
        ), logged AS (
          INSERT INTO cursor_move (channel_pk, user_id, kind, seq, at)
          SELECT counted.channel_pk, counted.user_id, k.kind, k.seq, counted.at
          FROM counted, LATERAL (VALUES (0, counted.delivered_to, counted.delivered_to > counted.delivered_seq),
                                        (1, counted.read_to, counted.read_to > counted.read_seq)) AS k(kind, seq, moved)
          WHERE k.moved ORDER BY counted.ord, k.kind
          RETURNING 1
        ), state AS (
          SELECT counted.*,
            CASE WHEN counted.read_to > counted.read_seq THEN counted.at ELSE counted.read_at END AS read_at_to,
            CASE WHEN counted.delivered_to > counted.delivered_seq THEN counted.at ELSE counted.delivered_at END
              AS delivered_at_to
          FROM counted
        ), counts AS (
          SELECT state.*,
            CASE WHEN state.read_to > state.read_seq THEN state.read_seq ELSE state.delivered_seq END AS covered_from,
            CASE WHEN state.read_to > state.read_seq THEN state.read_to ELSE state.delivered_to END AS covered_to
          FROM state
        )
        SELECT ch.pk, ch.type, ch.id, ch.created_by, ch.custom, ch.last_seq, ch.last_message_at, ch.member_count,
          ch.created_at, ch.updated_at, ch.config, ch.truncated_at, ch.truncated_seq,
          ch.target, counts.read_seq, counts.delivered_seq,
          CASE WHEN counts.decided THEN counts.read_to END, CASE WHEN counts.decided THEN counts.delivered_to END,
          counts.user_id, counts.created_at, counts.channel_role, counts.read_to, counts.read_at_to,
          counts.delivered_to, counts.delivered_at_to,
          (SELECT id FROM message WHERE channel_pk = ch.pk AND seq = counts.read_to),
          (SELECT id FROM message WHERE channel_pk = ch.pk AND seq = counts.delivered_to),
          counts.unread_to,
          (SELECT id FROM message g WHERE g.channel_pk = ch.pk AND g.seq > counts.read_to AND g.user_id <> r.user_id
             AND g.hidden = 0 ORDER BY g.seq LIMIT 1),
          counts.custom,
          (SELECT body FROM app_user WHERE id = r.user_id),
          \(unreadSums(of: "r.user_id", plus: (
            messages: "COALESCE((SELECT delta.messages FROM delta WHERE delta.user_id = r.user_id), 0)",
            channels: "COALESCE((SELECT delta.channels FROM delta WHERE delta.user_id = r.user_id), 0)"))),
          CASE WHEN ch.member_count <= r.full_limit
               THEN (SELECT string_agg(user_id, ',') FROM member WHERE channel_pk = ch.pk) END,
          (SELECT string_agg(DISTINCT user_id, ',') FROM message g WHERE g.channel_pk = ch.pk
             AND g.seq > LEAST(counts.covered_from, counts.covered_to)
             AND g.seq <= GREATEST(counts.covered_from, counts.covered_to)),
          COALESCE(counts.stale, false)
          , r.ord, NULL::text
        FROM req r LEFT JOIN ch ON ch.ord = r.ord LEFT JOIN counts ON counts.ord = r.ord
        ORDER BY r.ord
        """
    }
}

/// PostgreSQL's sends: a message stored and its author's read of it in one round trip.
extension StoreSQL {
    /// The call of `SendFunction` for `message`, numbered `seq` at `at` under the channel's row lock,
    /// which the caller holds. No rows: nothing was written, and the step-by-step program sends
    /// instead (a stored id, an author who is no member, counts kept by sends). Otherwise the rows of
    /// `moves` for the author's read of it (R4), a batch of one.
    static func send(_ message: NewMessage, custom: String, to channelPK: Int64, _ cid: ChannelID, seq: Seq, at: Int64)
        -> StoreQuery
    {
        let query: StoreQuery = """
            SELECT * FROM \(raw: SendFunction.name)(\(channelPK), \(cid.type), \(cid.id), \(message.id), \(message.userID),
              \(message.text), \(custom), \(seq), \(at))
            """
        return query.prepared(as: .send)
    }

    /// A send that gives `send` its text and types (its values are bound, never part of it).
    static let sampleSend = send(
        NewMessage(id: "m", userID: "u", text: "t", custom: [:]), custom: "{}", to: 1, ChannelID(type: "t", id: "i"),
        seq: 1, at: 0)
}
