// The floor of a durable mark read on PostgreSQL on this machine, for
// bench/floors --postgres: the one statement Ticks sends for a batch of marks
// read (the call of its moves function, `StoreSQL.moves`, prepared, as the
// server prepares it), from C over libpq, on one connection, paced at a rate,
// `batch` receipts per call and so per commit (autocommit), with
// `synchronous_commit = on` (what Ticks runs: a 2xx means durable, R12).
// Nothing else: no HTTP, no Swift, no events, no bus notification. What it
// costs is what no server sending Ticks' statement can go below.
//
//   floor-postgres CONNINFO SCHEMA RATE SECONDS CHANNELS BATCH FIRST
//
// The database is one a Ticks server prepared (bench/floors): channels wc0…,
// readers wr0…, messages wc<i>m<j>; the function is the one that server
// created in SCHEMA. Reader i reads its channel's messages FIRST, FIRST + 1, …
// in order, so every receipt moves a cursor. Prints one JSON object; the CPU
// is this client's (the server's is read by bench/floors from /proc).
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "floor-clock.h"

static PGconn *connection;

static void fail(const char *what, PGresult *result) {
    fprintf(stderr, "floor-postgres: %s: %s\n", what,
            result ? PQresultErrorMessage(result) : PQerrorMessage(connection));
    exit(1);
}

static PGresult *expect(PGresult *result, ExecStatusType status, const char *what) {
    if (PQresultStatus(result) != status) fail(what, result);
    return result;
}

// Appends `text` to the array literal being built in `out` (`{a,b,…}`).
static void element(char *out, size_t size, int first, const char *text) {
    size_t used = strlen(out);
    snprintf(out + used, size - used, "%s%s", first ? "" : ",", text);
}

int main(int argc, char **argv) {
    if (argc != 8) {
        fprintf(stderr, "usage: floor-postgres CONNINFO SCHEMA RATE SECONDS CHANNELS BATCH FIRST\n");
        return 2;
    }
    double rate = atof(argv[3]);
    int seconds = atoi(argv[4]), channels = atoi(argv[5]), batch = atoi(argv[6]), first = atoi(argv[7]);
    if (batch < 1 || batch > 64 || channels < batch) {
        fprintf(stderr, "floor-postgres: BATCH must be 1…64 and at most CHANNELS\n");
        return 2;
    }
    connection = PQconnectdb(argv[1]);
    if (PQstatus(connection) != CONNECTION_OK) fail("connect", NULL);
    const char *schema[] = {argv[2]};
    PQclear(expect(PQexecParams(connection, "SELECT set_config('search_path', $1, false)", 1, NULL, schema, NULL, NULL, 0),
                   PGRES_TUPLES_OK, "search_path"));
    PQclear(expect(PQexec(connection, "SET synchronous_commit = on"), PGRES_COMMAND_OK, "synchronous_commit"));
    PGresult *found = expect(
        PQexec(connection, "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                           "WHERE n.nspname = current_schema() AND p.proname LIKE 'ticks\\_moves\\_%' "
                           "ORDER BY p.oid DESC LIMIT 1"),
        PGRES_TUPLES_OK, "the moves function");
    if (PQntuples(found) != 1) {
        fprintf(stderr, "floor-postgres: no ticks_moves_ function in schema %s: start a Ticks node on it first\n", argv[2]);
        return 1;
    }
    char call[200];
    snprintf(call, sizeof call, "SELECT * FROM %s($1, $2, $3, $4, $5, $6, $7, $8, $9)", PQgetvalue(found, 0, 0));
    PQclear(found);
    PQclear(expect(PQprepare(connection, "moves", call, 9, NULL), PGRES_COMMAND_OK, "prepare"));

    // The arrays of one call, as `StoreSQL.moves` binds them: kinds (1, read),
    // users, channel types, channel ids, message ids, to-newest flags (0),
    // times, full-channel limits, then whether the schema keeps all members (1).
    enum { size = 64 * 48 };
    char kinds[size], users[size], types[size], ids[size], messages[size], newest[size], times[size], limits[size];
    long receipts = 0, commits = 0, moved = 0;
    double started = now(), cpu_started = cpu_seconds();
    while (now() - started < seconds) {
        pace(started, commits, batch, rate);
        char *arrays[] = {kinds, users, types, ids, messages, newest, times, limits};
        for (int a = 0; a < 8; a++) strcpy(arrays[a], "{");
        long long at = (long long)(now() * 1e6);
        for (int i = 0; i < batch; i++) {
            // Distinct members in a call, as the server's batches are.
            long index = (receipts + i) % channels, position = first + (receipts + i) / channels;
            char text[48];
            element(kinds, size, i == 0, "1");
            snprintf(text, sizeof text, "wr%ld", index);
            element(users, size, i == 0, text);
            element(types, size, i == 0, "messaging");
            snprintf(text, sizeof text, "wc%ld", index);
            element(ids, size, i == 0, text);
            snprintf(text, sizeof text, "wc%ldm%ld", index, position);
            element(messages, size, i == 0, text);
            element(newest, size, i == 0, "0");
            snprintf(text, sizeof text, "%lld", at);
            element(times, size, i == 0, text);
            element(limits, size, i == 0, "100");
        }
        for (int a = 0; a < 8; a++) strcat(arrays[a], "}");
        const char *values[] = {kinds, users, types, ids, messages, newest, times, limits, "1"};
        PGresult *result = expect(PQexecPrepared(connection, "moves", 9, values, NULL, NULL, 0), PGRES_TUPLES_OK, "moves");
        // One row per move, then R13's rows: a move's read cursor before (14) and after (16).
        for (int row = 0; row < PQntuples(result); row++) {
            if (PQgetisnull(result, row, 14) || PQgetisnull(result, row, 16)) continue;
            if (atoll(PQgetvalue(result, row, 16)) > atoll(PQgetvalue(result, row, 14))) moved++;
        }
        PQclear(result);
        receipts += batch;
        commits++;
    }
    double wall = now() - started, cpu = cpu_seconds() - cpu_started;
    if (moved != receipts) {
        fprintf(stderr, "floor-postgres: %ld of %ld receipts moved a cursor\n", moved, receipts);
        return 1;
    }
    printf("{\"batch\": %d, \"rate\": %.0f, \"achieved\": %.1f, \"commits\": %ld, \"client_cpu_us_per_receipt\": %.1f}\n",
           batch, rate, receipts / wall, commits, cpu / receipts * 1e6);
    PQfinish(connection);
    return 0;
}
