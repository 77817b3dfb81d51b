// The physical floor of a durable mark read on PostgreSQL on this machine, for
// bench/floors --postgres: the least any server must have PostgreSQL do to
// record a receipt in Ticks' tables, with none of Ticks' own logic (not its
// moves function, which is what the floor is measured against). Per receipt:
//
//   - one UPDATE of the reader's `member` row, found by channel type and id
//     and user, its read cursor set to the message the receipt names (found
//     by its id, as every mark read names one) and its delivered cursor
//     brought up with it (R1);
//   - one INSERT of that move into the append-only `cursor_move` log;
//
// in one prepared statement, `batch` receipts per transaction, sent in
// libpq's pipeline mode (one round trip per commit), with
// `synchronous_commit = on` (what Ticks runs: a 2xx means durable, R12);
// with NOTIFY set, also one `pg_notify` per commit (Ticks' event bus tells
// other nodes once per batch). No unread counters, no "read by all", no
// hearers: those are Ticks' design, which the floor is there to judge.
//
//   floor-postgres CONNINFO SCHEMA RATE SECONDS CHANNELS BATCH FIRST NOTIFY
//
// The database is one a Ticks server prepared (bench/floors): channels wc0…,
// readers wr0…, messages wc<i>m<j>. Reader i reads its channel's messages
// FIRST, FIRST + 1, … in order, so every receipt moves a cursor, which the
// program checks (each UPDATE must change one row). Prints one JSON object;
// the CPU is this client's (PostgreSQL's is read by bench/floors from /proc).
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "floor-clock.h"
#include "floor-libpq.h"

// The receipt: the reader's cursors moved to the named message, and the move logged.
static const char *receipt =
    "WITH target AS (SELECT seq FROM message WHERE id = $3), "
    "moved AS ("
    "  UPDATE member m SET read_seq = t.seq, read_at = $4, "
    "    delivered_seq = GREATEST(m.delivered_seq, t.seq), delivered_at = GREATEST(m.delivered_at, $4) "
    "  FROM channel c, target t "
    "  WHERE c.type = 'messaging' AND c.id = $1 AND m.channel_pk = c.pk AND m.user_id = $2 AND m.read_seq < t.seq "
    "  RETURNING m.channel_pk, t.seq) "
    "INSERT INTO cursor_move (channel_pk, user_id, kind, seq, at) SELECT channel_pk, $2, 1, seq, $4 FROM moved";

int main(int argc, char **argv) {
    floor_name = "floor-postgres";
    if (argc != 9) {
        fprintf(stderr, "usage: floor-postgres CONNINFO SCHEMA RATE SECONDS CHANNELS BATCH FIRST NOTIFY\n");
        return 2;
    }
    double rate = atof(argv[3]);
    int seconds = atoi(argv[4]), channels = atoi(argv[5]), batch = atoi(argv[6]), first = atoi(argv[7]);
    int notify = atoi(argv[8]);
    if (batch < 1 || batch > 64 || channels < batch) {
        fprintf(stderr, "floor-postgres: BATCH must be 1…64 and at most CHANNELS\n");
        return 2;
    }
    open_floor_session(argv[1], argv[2]);
    PQclear(expect(PQprepare(connection, "receipt", receipt, 4, NULL), PGRES_COMMAND_OK, "prepare the receipt"));
    PQclear(expect(PQprepare(connection, "notify", "SELECT pg_notify('ticks_floor', $1)", 1, NULL),
                   PGRES_COMMAND_OK, "prepare the notification"));
    if (!PQenterPipelineMode(connection)) fail("pipeline mode", NULL);

    // A payload of the size of a small event batch on Ticks' bus.
    char payload[257];
    memset(payload, 'e', sizeof payload - 1);
    payload[sizeof payload - 1] = '\0';
    long receipts = 0, commits = 0, moved = 0;
    double started = now(), cpu_started = cpu_seconds();
    while (now() - started < seconds) {
        pace(started, commits, batch, rate);
        char at[24];
        snprintf(at, sizeof at, "%lld", (long long)(now() * 1e6));
        if (!PQsendQueryPrepared(connection, "begin", 0, NULL, NULL, NULL, 0)) fail("send BEGIN", NULL);
        for (int i = 0; i < batch; i++) {
            // Distinct members in a transaction, as the server's batches are.
            long index = (receipts + i) % channels, position = first + (receipts + i) / channels;
            char channel[24], user[24], message[48];
            snprintf(channel, sizeof channel, "wc%ld", index);
            snprintf(user, sizeof user, "wr%ld", index);
            snprintf(message, sizeof message, "wc%ldm%ld", index, position);
            const char *values[] = {channel, user, message, at};
            if (!PQsendQueryPrepared(connection, "receipt", 4, values, NULL, NULL, 0)) fail("send a receipt", NULL);
        }
        if (notify) {
            const char *values[] = {payload};
            if (!PQsendQueryPrepared(connection, "notify", 1, values, NULL, NULL, 0)) fail("send NOTIFY", NULL);
        }
        if (!PQsendQueryPrepared(connection, "commit", 0, NULL, NULL, NULL, 0)) fail("send COMMIT", NULL);
        if (!PQpipelineSync(connection)) fail("pipeline sync", NULL);
        moved += drain(batch + 2 + (notify ? 1 : 0), batch);
        receipts += batch;
        commits++;
    }
    double wall = now() - started, cpu = cpu_seconds() - cpu_started;
    if (moved != receipts) {
        fprintf(stderr, "floor-postgres: %ld of %ld receipts moved a cursor\n", moved, receipts);
        return 1;
    }
    // The backend's pid: bench/floors waits until it has ended and the postmaster has counted its CPU.
    printf("{\"batch\": %d, \"notify\": %s, \"rate\": %.0f, \"achieved\": %.1f, \"commits\": %ld, "
           "\"client_cpu_us_per_receipt\": %.1f, \"backend_pid\": %d}\n",
           batch, notify ? "true" : "false", rate, receipts / wall, commits, cpu / receipts * 1e6,
           PQbackendPID(connection));
    PQfinish(connection);
    return 0;
}
