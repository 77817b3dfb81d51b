// The floor of a durable mark read on this machine, for bench/floors: the
// statements Ticks runs on SQLite for one mark read (read and delivered move
// together), from C, on one thread, with prepared statements kept, paced at a
// rate, `batch` receipts per transaction. Nothing else: no HTTP, no Swift, no
// events. What it costs is what no server built on SQLite with an fsync per
// commit can go below for the same work.
//
//   floor-sqlite DB RATE SECONDS SYNC CHANNELS BATCH
//
// DB is a copy of a Ticks database prepared by bench/floors: channels wc0…,
// readers wr0…, messages wc<i>m<j>. SYNC is FULL (what Ticks runs) or NORMAL
// (no fsync per commit, for the difference). Prints one JSON object.
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>

#include "floor-clock.h"

static sqlite3 *db;

static void fail(const char *what) {
    fprintf(stderr, "floor-sqlite: %s: %s\n", what, sqlite3_errmsg(db));
    exit(1);
}

static sqlite3_stmt *prepare(const char *sql) {
    sqlite3_stmt *statement;
    if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &statement, NULL) != SQLITE_OK) fail(sql);
    return statement;
}

// Runs a statement to its end, keeping columns `a` and `b` of its first row
// (-1 where NULL, or where there is no row).
static void run_keeping(sqlite3_stmt *statement, int a, long long *first, int b, long long *second) {
    int rc, row = 0;
    *first = *second = -1;
    while ((rc = sqlite3_step(statement)) == SQLITE_ROW) {
        if (row++ > 0) continue;
        if (sqlite3_column_type(statement, a) != SQLITE_NULL) *first = sqlite3_column_int64(statement, a);
        if (sqlite3_column_type(statement, b) != SQLITE_NULL) *second = sqlite3_column_int64(statement, b);
    }
    if (rc != SQLITE_DONE) fail(sqlite3_sql(statement));
    sqlite3_reset(statement);
}

static void run(sqlite3_stmt *statement) {
    long long ignored, too;
    run_keeping(statement, 0, &ignored, 0, &too);
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: floor-sqlite DB RATE SECONDS FULL|NORMAL CHANNELS BATCH\n");
        return 2;
    }
    double rate = atof(argv[2]);
    int seconds = atoi(argv[3]), channels = atoi(argv[5]), batch = atoi(argv[6]);
    if (sqlite3_open(argv[1], &db) != SQLITE_OK) fail("open");
    // Ticks' own settings (SQLiteEngine), except that this program checkpoints
    // as SQLite does by default instead of from a thread of its own.
    char pragmas[200];
    snprintf(pragmas, sizeof pragmas,
             "PRAGMA journal_mode = WAL; PRAGMA synchronous = %s; PRAGMA mmap_size = 268435456", argv[4]);
    if (sqlite3_exec(db, pragmas, NULL, NULL, NULL) != SQLITE_OK) fail(pragmas);

    // The ten statements a Ticks mark read runs on SQLite's writer, in its
    // order (traced: `perf probe` on sqlite3_step, one mark read): BEGIN,
    // StoreSQL.readStart, moveCursors, logMoves, recountUnread, the unread
    // totals, readerState, the audience, newlyReached, COMMIT. (Ticks also
    // reads twice on a reader connection before; left out.)
    sqlite3_stmt *begin = prepare("BEGIN IMMEDIATE"), *commit = prepare("COMMIT");
    sqlite3_stmt *start = prepare(
        "SELECT c.pk, c.type, c.id, c.created_by, c.custom, c.last_seq, c.last_message_at, c.member_count, "
        "c.created_at, c.updated_at, t.config, c.truncated_at, c.truncated_seq, m.read_seq, m.delivered_seq, m.unread, "
        "(SELECT g.seq FROM message g WHERE g.id = ?1 AND g.channel_pk = c.pk AND g.hard_deleted = 0 "
        "AND g.seq > c.truncated_seq AND c.deleted_at IS NULL) "
        "FROM channel c LEFT JOIN channel_type t ON t.name = c.type "
        "LEFT JOIN member m ON m.channel_pk = c.pk AND m.user_id = ?2 "
        "WHERE c.type = 'messaging' AND c.id = ?3 AND c.deleted_at IS NULL");
    sqlite3_stmt *move = prepare(
        "UPDATE member SET "
        "read_seq = CASE WHEN read_seq < ?1 THEN ?1 ELSE read_seq END, "
        "read_at = CASE WHEN read_seq < ?1 THEN ?2 ELSE read_at END, "
        "delivered_seq = CASE WHEN delivered_seq < ?1 THEN ?1 ELSE delivered_seq END, "
        "delivered_at = CASE WHEN delivered_seq < ?1 THEN ?2 ELSE delivered_at END "
        "WHERE channel_pk = ?3 AND user_id = ?4 AND (read_seq < ?1 OR delivered_seq < ?1)");
    sqlite3_stmt *log = prepare(
        "INSERT INTO cursor_move (channel_pk, user_id, kind, seq, at) VALUES (?1, ?2, 0, ?3, ?4), (?1, ?2, 1, ?3, ?4)");
    sqlite3_stmt *recount = prepare(
        "UPDATE member SET unread = ((SELECT lc.last_seq FROM channel lc WHERE lc.pk = member.channel_pk) - member.read_seq "
        "- (SELECT COUNT(*) FROM message lg WHERE lg.channel_pk = member.channel_pk AND lg.seq > member.read_seq "
        "AND (lg.user_id = member.user_id OR lg.hidden <> 0))) "
        "WHERE channel_pk = ?1 AND user_id = ?2 RETURNING unread");
    sqlite3_stmt *totals = prepare(
        "UPDATE app_user SET unread_messages = unread_messages + 0, unread_channels = unread_channels + 0 WHERE id = ?1");
    sqlite3_stmt *state = prepare(
        "SELECT m.user_id, m.created_at, m.channel_role, m.read_seq, m.read_at, m.delivered_seq, m.delivered_at, "
        "(SELECT id FROM message WHERE channel_pk = m.channel_pk AND seq = m.read_seq), "
        "(SELECT id FROM message WHERE channel_pk = m.channel_pk AND seq = m.delivered_seq), m.unread, "
        "(SELECT id FROM message g WHERE g.channel_pk = m.channel_pk AND g.seq > m.read_seq "
        "AND g.user_id <> m.user_id AND g.hidden = 0 ORDER BY g.seq LIMIT 1), "
        "m.custom, u.body, u.unread_messages, u.unread_channels "
        "FROM member m LEFT JOIN app_user u ON u.id = m.user_id WHERE m.channel_pk = ?1 AND m.user_id = ?2");
    sqlite3_stmt *audience = prepare("SELECT user_id FROM member WHERE channel_pk = ?1");
    // R13 in a channel of two: the messages the move made read by all (StoreSQL.newlyReached).
    sqlite3_stmt *reached = prepare(
        "SELECT user_id, id, seq FROM (SELECT g.user_id, g.id, g.seq, "
        "ROW_NUMBER() OVER (PARTITION BY g.user_id ORDER BY g.seq DESC) AS r FROM message g "
        "WHERE g.channel_pk = ?1 AND g.seq > ?2 AND g.seq <= ?3 AND g.hidden = 0 AND g.user_id <> ?4 "
        "AND (g.seq <= ?3 OR g.user_id = '') AND (g.seq <= ?3 OR g.user_id <> '') "
        "AND EXISTS (SELECT 1 FROM member b WHERE b.channel_pk = g.channel_pk AND b.user_id = g.user_id)"
        ") newest WHERE r = 1");

    char user[32], channel[32], message[48];
    long receipts = 0, commits = 0, moved = 0;
    double started = now(), cpu_started = cpu_seconds();
    while (now() - started < seconds) {
        pace(started, commits, batch, rate);
        run(begin);
        for (int i = 0; i < batch; i++, receipts++) {
            long index = receipts % channels, position = receipts / channels;
            long long at = (long long)(now() * 1e6);
            snprintf(user, sizeof user, "wr%ld", index);
            snprintf(channel, sizeof channel, "wc%ld", index);
            snprintf(message, sizeof message, "wc%ldm%ld", index, position);
            sqlite3_bind_text(start, 1, message, -1, SQLITE_STATIC);
            sqlite3_bind_text(start, 2, user, -1, SQLITE_STATIC);
            sqlite3_bind_text(start, 3, channel, -1, SQLITE_STATIC);
            long long pk, seq;
            run_keeping(start, 0, &pk, 16, &seq);
            if (pk < 0 || seq < 0) {
                fprintf(stderr, "floor-sqlite: no message %s in %s: prepare more messages\n", message, channel);
                return 1;
            }
            sqlite3_bind_int64(move, 1, seq);
            sqlite3_bind_int64(move, 2, at);
            sqlite3_bind_int64(move, 3, pk);
            sqlite3_bind_text(move, 4, user, -1, SQLITE_STATIC);
            run(move);
            moved += sqlite3_changes(db);
            sqlite3_bind_int64(log, 1, pk);
            sqlite3_bind_text(log, 2, user, -1, SQLITE_STATIC);
            sqlite3_bind_int64(log, 3, seq);
            sqlite3_bind_int64(log, 4, at);
            run(log);
            sqlite3_bind_int64(recount, 1, pk);
            sqlite3_bind_text(recount, 2, user, -1, SQLITE_STATIC);
            run(recount);
            sqlite3_bind_text(totals, 1, user, -1, SQLITE_STATIC);
            run(totals);
            sqlite3_bind_int64(state, 1, pk);
            sqlite3_bind_text(state, 2, user, -1, SQLITE_STATIC);
            run(state);
            sqlite3_bind_int64(audience, 1, pk);
            run(audience);
            sqlite3_bind_int64(reached, 1, pk);
            sqlite3_bind_int64(reached, 2, seq - 1);  // each reader reads its channel's messages in order
            sqlite3_bind_int64(reached, 3, seq);
            sqlite3_bind_text(reached, 4, user, -1, SQLITE_STATIC);
            run(reached);
        }
        run(commit);
        commits++;
    }
    double wall = now() - started, cpu = cpu_seconds() - cpu_started;
    if (moved != receipts) {
        fprintf(stderr, "floor-sqlite: %ld of %ld receipts moved a cursor\n", moved, receipts);
        return 1;
    }
    printf("{\"sync\": \"%s\", \"batch\": %d, \"rate\": %.0f, \"achieved\": %.1f, \"commits\": %ld, "
           "\"cpu_us_per_receipt\": %.1f}\n", argv[4], batch, rate, receipts / wall, commits, cpu / receipts * 1e6);
    return 0;
}
