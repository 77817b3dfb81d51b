import TicksReceipts

/// The PL/pgSQL function behind PostgreSQL's sends (`StoreSQL.send`): a
/// message stored and its author's read of it (R4) in one round trip, where
/// the step-by-step program (`SQLStore.append`) took about fifteen. Sends into
/// one channel are numbered one at a time under the channel's row lock, which
/// each holds until it commits, so a send's round trips are the channel's
/// rate: at 1,000 members, 8 at once, 67.5 sends a second before
/// (docs/benchmarks-history.md, "Step B").
///
/// The caller has taken the channel's row lock and numbered the message from
/// what it read there (`StoreRules.messageTime`, the next seq). The
/// function, in the caller's transaction:
///
/// 1. returns no row, having written nothing, where the program must run
///    instead: the id is stored already (a retry, R11, or an id of another
///    channel), the author is no member (a server's send names any user), or
///    sends keep every member's count (`unread_counting` `kept`, which writes
///    every member's row);
/// 2. `StoreSQL.appendMessage` with `counted` moved, and
///    `StoreSQL.insertMessage`, for a message shown in the channel (a reply
///    takes the program's road: its thread has counts of its own);
/// 3. the author's read of it (R4) as a mark read of one move through
///    `MovesFunction`: their row locked, their cursors moved and logged, their
///    count kept, the channel's advisory lock, what the read made read by all
///    (R13) and the hearers' privacy (R15), in that function's rows, which
///    `OneStatementMove` checks against `ReceiptRules` and `AllMembers` as it
///    checks every batch of marks.
///
/// Locks in the program's order: the channel's row (the caller's), the
/// author's member row, the channel's advisory lock. Created at start beside
/// `MovesFunction`, under a name carrying a hash of its text (which holds that
/// function's name), and called only where the schema has every migration its
/// statements name (`SQLStore.sendsInOneCall`).
enum SendFunction {
    private static let signatureAndBody: String = {
        let columns = MovesFunction.resultColumns.map { "\($0.name) \($0.type)" }.joined(separator: ", ")
        let byPositions = SQLDialect.postgres.render(StoreSQL.countsByPositions).text
        let read = CursorKind.read.rawValue
        return """
            (BIGINT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, BIGINT, BIGINT)
            RETURNS TABLE (\(columns))
            LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan AS $ticks$
            #variable_conflict use_column
            BEGIN
              -- 1. Where the program sends instead, nothing written: a stored id, an author who is no member,
              -- counts kept by sends.
              IF EXISTS (SELECT 1 FROM message WHERE id = $4) THEN RETURN; END IF;
              IF NOT EXISTS (SELECT 1 FROM member WHERE channel_pk = $1 AND user_id = $5) THEN RETURN; END IF;
              IF NOT (\(byPositions)) THEN RETURN; END IF;
              -- 2. The message, numbered by the caller under the channel's row lock, which it holds.
              UPDATE channel SET last_seq = $8, last_message_at = $9, updated_at = $9, counted = counted + 1,
                updated_by = NULL
              WHERE pk = $1 AND last_seq = $8 - 1;
              IF NOT FOUND THEN RAISE EXCEPTION 'ticks: channel % is not at seq % under its lock', $1, $8 - 1; END IF;
              INSERT INTO message (channel_pk, seq, id, user_id, text, custom, created_at, parent_id, show_in_channel,
                hidden)
              VALUES ($1, $8, $4, $5, $6, $7, $9, NULL, 0, 0);
              -- 3. R4: the author has read it, and everything before it: a mark read, a batch of one.
              RETURN QUERY SELECT * FROM \(MovesFunction.name)(ARRAY[\(read)]::BIGINT[], ARRAY[$5], ARRAY[$2],
                ARRAY[$3], ARRAY[$4], ARRAY[0]::BIGINT[], ARRAY[$9], ARRAY[0]::BIGINT[], 1, 1, 1, 1);
            END
            $ticks$
            """
    }()

    /// The function's name: `ticks_send_` and a hash of its text.
    static let name = "ticks_send_" + String(MovesFunction.fnv1a(signatureAndBody), radix: 16)

    /// Created where `MovesFunction` is, the same way (`PostgresSchema.migrate`).
    static var definition: String { "CREATE OR REPLACE FUNCTION \(name)\(signatureAndBody)" }
}
