// What both PostgreSQL floor programs (floor-postgres.c, floor-postgres-sends.c)
// share: the connection, failing with the server's message, and the session
// every floor runs in (the schema a Ticks server prepared, `synchronous_commit
// = on` as Ticks runs, BEGIN and COMMIT prepared for pipeline mode).
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>

static PGconn *connection;
// The program's name, for its errors.
static const char *floor_name;

static void fail(const char *what, PGresult *result) {
    fprintf(stderr, "%s: %s: %s\n", floor_name, what,
            result ? PQresultErrorMessage(result) : PQerrorMessage(connection));
    exit(1);
}

static PGresult *expect(PGresult *result, ExecStatusType status, const char *what) {
    if (PQresultStatus(result) != status) fail(what, result);
    return result;
}

// Connects to `conninfo`, in `schema`, with synchronous commits and BEGIN and COMMIT prepared.
static void open_floor_session(const char *conninfo, const char *schema) {
    connection = PQconnectdb(conninfo);
    if (PQstatus(connection) != CONNECTION_OK) fail("connect", NULL);
    const char *values[] = {schema};
    PQclear(expect(PQexecParams(connection, "SELECT set_config('search_path', $1, false)", 1, NULL, values, NULL, NULL, 0),
                   PGRES_TUPLES_OK, "search_path"));
    PQclear(expect(PQexec(connection, "SET synchronous_commit = on"), PGRES_COMMAND_OK, "synchronous_commit"));
    PQclear(expect(PQprepare(connection, "begin", "BEGIN", 0, NULL), PGRES_COMMAND_OK, "prepare BEGIN"));
    PQclear(expect(PQprepare(connection, "commit", "COMMIT", 0, NULL), PGRES_COMMAND_OK, "prepare COMMIT"));
}

// Reads every result of one pipeline of `statements` (BEGIN, the work, COMMIT) up to its sync;
// returns the rows the statements after BEGIN, `counted` of them, changed.
static long drain(int statements, int counted) {
    long changed = 0;
    for (int i = 0; i < statements; i++) {  // each a result and a NULL
        PGresult *result = PQgetResult(connection);
        if (result == NULL) fail("pipeline: a result is missing", NULL);
        ExecStatusType status = PQresultStatus(result);
        if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) fail("pipeline", result);
        if (i >= 1 && i <= counted) changed += atol(PQcmdTuples(result));
        PQclear(result);
        if (PQgetResult(connection) != NULL) fail("pipeline: more than one result for a statement", NULL);
    }
    PGresult *sync = PQgetResult(connection);
    if (sync == NULL || PQresultStatus(sync) != PGRES_PIPELINE_SYNC) fail("pipeline sync", sync);
    PQclear(sync);
    return changed;
}
