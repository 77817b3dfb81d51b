import TicksProtocol
import TicksReceipts

/// The PL/pgSQL function behind `StoreSQL.moves`: a batch of marks read and
/// delivered, and what they made read by all (R13), in one round trip.
///
/// One statement cannot do both: it reads from one snapshot, taken before it
/// waits for a lock, so two concurrent moves in one channel would each miss
/// the other and neither tell that together they crossed. The statements of
/// a function in READ COMMITTED each take a fresh snapshot, so the function
/// runs them in turn, in the caller's transaction:
///
/// 1. reads whether each of the batch's channel types tells read and delivery
///    events (`typeNames`…: each config parsed once a call; steps 2 and 4 read
///    the flags from it, so a type's config changed meanwhile counts from the
///    next batch on), locks the batch's member rows in key order and keeps
///    their cursors before;
/// 2. `StoreSQL.movesStatement`: moves them (its snapshot, taken after the
///    locks, holds every change to these rows), returning one row per move;
/// 3. takes each moved channel's advisory lock in pk order, after every row
///    lock, as every change that may tell R13 does (`StoreSQL.allMembersLock`);
/// 4. for each move and each kind of "all" the channel type tells, where the
///    mover's counted position rose: the channel's three lowest counted
///    positions (from the index, in a fresh snapshot holding every move
///    committed before the lock), `AllMembers.reached` in SQL, and the newest
///    message of each author it reached — one row each, as JSON. Where the
///    messages it passed are all the mover's own (a send's read of its own
///    message, most often), it reached nothing (no move makes its mover's
///    own messages read by all: `StoreSQL.newlyReached` leaves them out) and
///    the lowest positions are not asked: the row says so (`others` false).
///
/// 5. where the schema has `v12-app-settings` and the app's reciprocal read
///    receipts are on (R15), for each move those who hide their reads among
///    all who may hear it (the channel's members and the authors of what it
///    covered) — as JSON, one row each; none when it is off
///    (`SQLStore.withHearers` reads the same step by step).
///
/// `OneStatementMove` checks step 4 against `AllMembers` on every call, as it
/// checks step 2 against `ReceiptRules`.
///
/// Its statements are planned once per connection (`plan_cache_mode =
/// force_generic_plan`), with sequential scans off (`enable_seqscan = off`):
/// every row it reads is found by a key, but a plan made on a small schema
/// (a new deployment, or ticks-bench's 400 members) scanned `member` whole in
/// steps 1, 2 and 4, and kept doing so on that connection as the table grew
/// (with the other changes of 55098de, at 1,000 receipts/s the cluster's
/// time over the load 3,471 → 3,165 ms, step 1 186.5 → 61.7 µs a call:
/// `bench/postgres-profile --rate 1000 --pin`).
/// PL/pgSQL caches their plans, but under the default (`auto`) PostgreSQL
/// found a plan made for each call's arrays cheaper than the generic one and
/// planned the ~70-line moves statement again on every call: from C
/// (bench/floor-postgres.c), one call per commit on one connection ran at
/// 268/s; with generic plans, 623/s.
///
/// The function is created at start (`install`) under a name carrying a hash
/// of its text, so nodes of two releases sharing a database each call their
/// own. It is not a migration: it holds no data, and a node held at an older
/// migration (`--migrations-up-to`) needs it too; steps 3 and 4 run only where the
/// schema has `v11-all-members`, step 5 only where it has `v12-app-settings`,
/// step 2 counts unread by positions only where it has
/// `v15-unread-positions`, and step 4 reads the lowest positions from the
/// columns of `v16-counted-columns` only where it has them (PL/pgSQL plans a statement when it first runs it, so one that names a
/// table a held schema lacks never fails there).
enum MovesFunction {
    /// The function's text, without its name.
    private static let signatureAndBody: String = {
        func statement(unreadPositions: Bool) -> String {
            SQLDialect.postgres.render(
                StoreSQL.movesStatement([sampleMove]), schema: unreadPositions ? .newest : .before(.unreadPositions)
            ).text
        }
        let columns = resultColumns.map { "\($0.name) \($0.type)" }.joined(separator: ", ")
        let reciprocal = AppOptions.Change.CodingKeys.reciprocalReadReceipts.rawValue
        return """
            (BIGINT[], TEXT[], TEXT[], TEXT[], TEXT[], BIGINT[], BIGINT[], BIGINT[], BIGINT, BIGINT, BIGINT, BIGINT)
            RETURNS TABLE (\(columns))
            LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan
              SET enable_seqscan = off AS $ticks$
            #variable_conflict use_column
            DECLARE
              o BIGINT[]; p BIGINT[]; rs BIGINT[]; ds BIGINT[];
              \(typeNames) TEXT[]; \(typeReadEvents) BOOLEAN[]; \(typeDeliveryEvents) BOOLEAN[];
            BEGIN
              -- 1. The flags of the batch's channel types, each config parsed once (not once a move in steps 2 and 4).
              SELECT array_agg(t.name), array_agg(COALESCE((j.config ->> 'read_events')::boolean, false)),
                array_agg(COALESCE((j.config ->> 'delivery_events')::boolean, false))
                INTO \(typeNames), \(typeReadEvents), \(typeDeliveryEvents)
              FROM channel_type t CROSS JOIN LATERAL (SELECT t.config::jsonb AS config OFFSET 0) j
              WHERE t.name = ANY($3);
              -- 1. The batch's members, locked in key order; their cursors before.
              SELECT array_agg(x.ord), array_agg(x.channel_pk), array_agg(x.read_seq), array_agg(x.delivered_seq)
                INTO o, p, rs, ds
              FROM (SELECT r.ord, m.channel_pk, m.read_seq, m.delivered_seq
                    FROM unnest($3, $4, $2) WITH ORDINALITY AS r(ctype, cname, user_id, ord)
                    CROSS JOIN LATERAL (\(StoreSQL.channelByName("r", shown: false))) c
                    JOIN member m ON m.channel_pk = c.pk AND m.user_id = r.user_id
                    ORDER BY m.channel_pk, m.user_id FOR UPDATE OF m) x;
              -- 2. The moves: one row each, in order (a schema held before v15-unread-positions has no
              -- columns for counts by positions: PL/pgSQL plans only the branch it runs).
              IF $11 <> 0 THEN
              RETURN QUERY
            \(statement(unreadPositions: true));
              ELSE
              RETURN QUERY
            \(statement(unreadPositions: false));
              END IF;
              IF o IS NULL THEN RETURN; END IF;
              IF $9 <> 0 THEN
              -- 3. R13: the advisory lock of each channel where a cursor moved, in pk order.
              PERFORM pg_advisory_xact_lock(hashtextextended(current_schema() || '/' || x.pk::text, 0))
              FROM (SELECT DISTINCT b.pk FROM unnest(o, p, rs, ds) AS b(ord, pk, read_before, delivered_before)
                    JOIN member m ON m.channel_pk = b.pk AND m.user_id = ($2)[b.ord]
                    WHERE m.read_seq > b.read_before OR m.delivered_seq > b.delivered_before
                    ORDER BY b.pk) x;
              -- 4. What each move made read by all: one row per move and kind its counted position rose for
              -- (read before delivered, as SQLite tells them).
              -- (The channel's lowest positions come from v16-counted-columns' columns where the schema has them.)
              IF $12 <> 0 THEN
              RETURN QUERY
            \(reachedStatement(schema: .newest));
              ELSE
              RETURN QUERY
            \(reachedStatement(schema: .before(.countedColumns)));
              END IF;
              END IF;
              -- 5. R15: with the app's reciprocal read receipts on, for each move those who hide their reads
              -- among all who may hear it: the channel's members now and the authors of what it covered
              -- (who may have left). A superset of the move's hearers, who are read from step 2's snapshot:
              -- the store keeps those of them alone. No rows: the setting is off. (Two IFs: PL/pgSQL plans
              -- a condition whole, and a held schema has no app_setting.)
              IF $10 = 0 THEN RETURN; END IF;
              IF EXISTS (SELECT 1 FROM app_setting WHERE name = '\(reciprocal)' AND value = 'true') THEN
              RETURN QUERY
              -- (Each of them looked up by id: an OR of the two sets as the filter of app_user scanned it whole.)
              SELECT \(nullColumns), b.ord, json_build_object('hiding', COALESCE((
                  SELECT json_agg(u.id) FROM (
                      SELECT h.user_id FROM member h WHERE h.channel_pk = b.pk
                      UNION SELECT g.user_id FROM message g WHERE g.channel_pk = b.pk
                        AND g.seq > LEAST(b.read_before, b.delivered_before)
                        AND g.seq <= GREATEST(m.read_seq, m.delivered_seq)
                    ) x JOIN app_user u ON u.id = x.user_id
                  WHERE u.reads_shared = 0), '[]'))::text
              FROM unnest(o, p, rs, ds) AS b(ord, pk, read_before, delivered_before)
              JOIN member m ON m.channel_pk = b.pk AND m.user_id = ($2)[b.ord]
              ORDER BY b.ord;
              END IF;
            END
            $ticks$
            """
    }()

    /// Step 4's statement, which reads the channel's lowest counted positions
    /// as `schema` keeps them (`StoreSQL.lowestCounted`).
    private static func reachedStatement(schema: SchemaLevel) -> String {
        func lowest(_ kind: CursorKind, deliveryEvents: Bool) -> String {
            SQLDialect.postgres.render(
                StoreSQL.lowestCounted(kind, deliveryEvents: deliveryEvents, in: "mv.pk", limit: "3"), schema: schema
            ).text
        }
        let notCounted = StoreSQL.notCounted
        return """
              -- MATERIALIZED: computed once a move, not wherever re and de are used.
              WITH b AS MATERIALIZED (
                SELECT b.ord, b.pk, m.user_id, m.reads_shared, m.deliveries_shared, b.read_before, b.delivered_before,
                  m.read_seq AS read_after, m.delivered_seq AS delivered_after, c.member_count,
                  \(typeFlag(typeReadEvents, of: "c.type")) AS re,
                  \(typeFlag(typeDeliveryEvents, of: "c.type")) AS de
                FROM unnest(o, p, rs, ds) AS b(ord, pk, read_before, delivered_before)
                JOIN member m ON m.channel_pk = b.pk AND m.user_id = ($2)[b.ord]
                JOIN channel c ON c.pk = b.pk
              ), mv AS (
                -- AllMembers.counted of the mover, before and after; whether what it passed holds a message
                -- of anyone else's (none: it reached nothing, and the lowest positions are not asked).
                SELECT b.*, k.kind, k.from_seq, k.to_seq, EXISTS (SELECT 1 FROM message o
                    WHERE o.channel_pk = b.pk AND o.seq > k.from_seq AND o.seq <= k.to_seq AND o.user_id <> b.user_id
                  ) AS others
                FROM b CROSS JOIN LATERAL (VALUES
                  (1, CASE WHEN b.reads_shared <> 0 THEN b.read_before
                           WHEN b.de AND b.deliveries_shared <> 0 THEN b.delivered_before END,
                      CASE WHEN b.reads_shared <> 0 THEN b.read_after
                           WHEN b.de AND b.deliveries_shared <> 0 THEN b.delivered_after END),
                  (0, CASE WHEN b.deliveries_shared <> 0 THEN b.delivered_before WHEN b.reads_shared <> 0 THEN b.read_before END,
                      CASE WHEN b.deliveries_shared <> 0 THEN b.delivered_after WHEN b.reads_shared <> 0 THEN b.read_after END)
                ) AS k(kind, from_seq, to_seq)
                WHERE b.re AND (k.kind = 1 OR b.de) AND k.to_seq > k.from_seq
              ), low AS (
                -- The channel's three lowest counted positions (none in two members: the mover is every
                -- member but the other, who holds nothing back), from the index (`StoreSQL.lowestCounted`).
                SELECT mv.ord, mv.kind, l.user_id, NULLIF(l.seq, \(notCounted)) AS seq, l.n FROM mv CROSS JOIN LATERAL (
                  SELECT x.user_id, x.seq, row_number() OVER (ORDER BY x.seq) AS n FROM (
                    (SELECT * FROM (\(lowest(.read, deliveryEvents: true))) l WHERE mv.kind = 1 AND mv.de)
                    UNION ALL
                    (SELECT * FROM (\(lowest(.read, deliveryEvents: false))) l WHERE mv.kind = 1 AND NOT mv.de)
                    UNION ALL
                    (SELECT * FROM (\(lowest(.delivered, deliveryEvents: true))) l WHERE mv.kind = 0)
                  ) x
                ) l WHERE mv.member_count > 2 AND mv.others
              ), reach AS (
                -- AllMembers.reached: the lowest member but the mover, and the one after.
                SELECT mv.ord, mv.kind, mv.pk, mv.user_id, mv.from_seq, mv.to_seq, mv.others, f.user_id AS lowest_other,
                  CASE WHEN mv.others THEN LEAST(mv.to_seq, COALESCE(f.seq, \(notCounted))) ELSE mv.from_seq END AS up_to,
                  CASE WHEN mv.others THEN LEAST(mv.to_seq, COALESCE(s.seq, \(notCounted))) ELSE mv.from_seq END
                    AS up_to_for_lowest,
                  (SELECT json_agg(json_build_object('user_id', l.user_id, 'seq', l.seq) ORDER BY l.n)
                   FROM low l WHERE l.ord = mv.ord AND l.kind = mv.kind) AS lowest
                FROM mv
                LEFT JOIN LATERAL (SELECT l.user_id, l.seq FROM low l
                  WHERE l.ord = mv.ord AND l.kind = mv.kind AND l.user_id <> mv.user_id ORDER BY l.n LIMIT 1) f ON true
                LEFT JOIN LATERAL (SELECT l.seq FROM low l
                  WHERE l.ord = mv.ord AND l.kind = mv.kind AND l.user_id <> mv.user_id ORDER BY l.n OFFSET 1 LIMIT 1) s ON true
              )
              SELECT \(nullColumns), reach.ord, json_build_object(
                'kind', reach.kind, 'from', reach.from_seq, 'to', reach.to_seq, 'others', reach.others,
                'lowest', COALESCE(reach.lowest, '[]'),
                'reached', reach.up_to > reach.from_seq OR reach.up_to_for_lowest > reach.from_seq,
                'lowest_other', reach.lowest_other, 'up_to', reach.up_to, 'up_to_for_lowest', reach.up_to_for_lowest,
                -- StoreSQL.newlyReached: the newest message of each author it reached.
                'messages', COALESCE((SELECT json_agg(json_build_object('user_id', n.user_id, 'id', n.id, 'seq', n.seq))
                  FROM (SELECT g.user_id, g.id, g.seq,
                          ROW_NUMBER() OVER (PARTITION BY g.user_id ORDER BY g.seq DESC) AS r
                        FROM message g
                        WHERE (reach.up_to > reach.from_seq OR reach.up_to_for_lowest > reach.from_seq)
                          AND g.channel_pk = reach.pk AND g.seq > reach.from_seq
                          AND g.seq <= GREATEST(reach.up_to, reach.up_to_for_lowest) AND g.hidden = 0
                          AND g.user_id <> reach.user_id
                          AND (g.seq <= reach.up_to OR g.user_id = COALESCE(reach.lowest_other, ''))
                          AND (g.seq <= reach.up_to_for_lowest OR g.user_id <> COALESCE(reach.lowest_other, ''))
                          AND EXISTS (SELECT 1 FROM member e WHERE e.channel_pk = g.channel_pk AND e.user_id = g.user_id)
                       ) n WHERE n.r = 1), '[]'))::text
              FROM reach ORDER BY reach.ord, reach.kind DESC
            """
    }

    /// The variables holding the flags of the batch's channel types, in step
    /// 1: their names, and whether each tells read and delivery events (a
    /// type's config is JSON text; parsed once a move, in steps 2 and 4, it
    /// took most of step 4's time: 3.9 of 4.9 ms for a batch of 35 under
    /// auto_explain).
    static let typeNames = "type_names"
    static let typeReadEvents = "type_read_events"
    static let typeDeliveryEvents = "type_delivery_events"

    /// One of step 1's flags (`typeReadEvents` or `typeDeliveryEvents`) for the channel type
    /// named by the SQL expression `type`; false for a type with no row.
    static func typeFlag(_ flags: String, of type: String) -> String {
        "COALESCE(\(flags)[array_position(\(typeNames), \(type))], false)"
    }

    /// Every result column but the last two as NULL: the rows of steps 4 and 5, which carry only
    /// the move's number and what it reached.
    private static let nullColumns = resultColumns.dropLast(2).map { "NULL::\($0.type)" }.joined(separator: ", ")

    /// The function's name: `ticks_moves_` and a hash of its text.
    static let name = "ticks_moves_" + String(fnv1a(signatureAndBody), radix: 16)

    /// Creates the function unless a node of this release already did; under
    /// the migrations' advisory lock (`PostgresSchema.migrate`), since two
    /// concurrent `CREATE OR REPLACE FUNCTION`s of one name may fail.
    static var definition: String { "CREATE OR REPLACE FUNCTION \(name)\(signatureAndBody)" }

    /// The columns of every row: `StoreSQL.movesStatement`'s, the move's
    /// number, and what it reached.
    static let resultColumns: [(name: String, type: String)] =
        [
            // The channel (0–12).
            "BIGINT", "TEXT", "TEXT", "TEXT", "TEXT", "BIGINT", "BIGINT", "BIGINT", "BIGINT", "BIGINT", "TEXT",
            "BIGINT", "BIGINT",
            // The target, the cursors before and after (13–17).
            "BIGINT", "BIGINT", "BIGINT", "BIGINT", "BIGINT",
            // `ReaderRow` (18–32).
            "TEXT", "BIGINT", "TEXT", "BIGINT", "BIGINT", "BIGINT", "BIGINT", "TEXT", "TEXT", "BIGINT", "TEXT", "TEXT",
            "TEXT", "BIGINT", "BIGINT",
            // The audience's ids, the row's staleness (33–35).
            "TEXT", "TEXT", "BOOLEAN",
        ].enumerated().map { ("c\($0.offset)", $0.element) } + [("move", "BIGINT"), ("reached", "TEXT")]

    /// A move that gives the statement its text (its values are bound, never part of it).
    static let sampleMove = BatchedMove(
        kind: .read, userID: "u", channel: ChannelID(type: "t", id: "i"), messageID: "m",
        at: Timestamp(microseconds: 0), audience: ShapeOnlyAudience())

    /// 64-bit FNV-1a: a short stable name for a text (not a secret, not a checksum against tampering).
    static func fnv1a(_ text: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return hash
    }
}

/// The audience of the sample move that gives `StoreSQL.moves` its shape:
/// the statement's text and types do not depend on it, and it never runs.
struct ShapeOnlyAudience: MoveAudience {
    var fullChannelLimit: Int { 0 }
    func source(of update: CursorUpdate, in channel: ChannelRecord) -> AudienceSource? { nil }
    func recipients(_ ids: [String], from source: AudienceSource, reader: String) -> [String] { [] }
}
