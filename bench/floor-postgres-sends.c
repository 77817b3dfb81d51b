// The physical floor of a durable send into one channel on PostgreSQL on this
// machine, for bench/sends --floor: the least any server must have PostgreSQL
// do to store a message in Ticks' tables, with none of Ticks' own logic. Per
// send, one prepared statement:
//
//   - the channel's row, found by type and id, numbers the message (its
//     `last_seq` and times move, and `counted`: a member's unread count is
//     read from positions, so no other member's row is written);
//   - the message's row is inserted;
//   - the author's member row has read their own message (R4): both cursors
//     and its kept count as of the channel's new position.
//
// `batch` sends a transaction, sent in libpq's pipeline mode (one round trip a
// commit), with `synchronous_commit = on` (R12), from `clients` processes at
// once, each on a connection of its own, into the same channel: the channel's
// row lock, held until each commit, puts them in a line, as it does Ticks'
// sends from any node. No receipt log, no "read by all", no hearers, no
// events, no bus: those are Ticks' design, which the floor is there to judge.
//
//   floor-postgres-sends CONNINFO SCHEMA CHANNEL AUTHOR PREFIX CLIENTS SENDS BATCH
//
// CHANNEL is the id of a `messaging` channel that AUTHOR is a member of (a
// database a Ticks server prepared: bench/sends runs the floor on the schema
// of the case it has just measured); message ids are PREFIX<client>-<n>. Each
// statement must update the author's row once (the program checks). Prints
// one JSON object; the CPU is the clients' (PostgreSQL's is read by
// bench/sends from /proc).
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "floor-clock.h"
#include "floor-libpq.h"

// $1 the channel's id, $2 the author, $3 the time (µs), $4 the message's id.
static const char *send_statement =
    "WITH numbered AS ("
    "  UPDATE channel SET last_seq = last_seq + 1, last_message_at = $3, updated_at = $3, counted = counted + 1 "
    "  WHERE type = 'messaging' AND id = $1 RETURNING pk, last_seq, counted), "
    "stored AS ("
    "  INSERT INTO message (channel_pk, seq, id, user_id, text, custom, created_at, parent_id, show_in_channel, hidden) "
    "  SELECT pk, last_seq, $4, $2, 'a message to everyone', '{}', $3, NULL, 0, 0 FROM numbered) "
    "UPDATE member m SET read_seq = n.last_seq, read_at = $3, delivered_seq = n.last_seq, delivered_at = $3, "
    "  unread = 0, counted_at = n.counted "
    "FROM numbered n WHERE m.channel_pk = n.pk AND m.user_id = $2";

// One client: connects and prepares, says so on `ready`, waits for a byte on `go`, then sends
// `sends` messages, `batch` a commit. Exits 0 when every send updated the author's row.
static int client(char **argv, int index, long sends, int batch, int ready, int go) {
    open_floor_session(argv[1], argv[2]);
    PQclear(expect(PQprepare(connection, "send", send_statement, 4, NULL), PGRES_COMMAND_OK, "prepare the send"));
    if (!PQenterPipelineMode(connection)) fail("pipeline mode", NULL);
    char byte = 'r';
    if (write(ready, &byte, 1) != 1 || read(go, &byte, 1) != 1) fail("waiting for the start", NULL);
    long sent = 0;
    for (long done = 0; done < sends; done += batch) {
        int now_batch = sends - done < batch ? (int)(sends - done) : batch;
        char at[24];
        snprintf(at, sizeof at, "%lld", (long long)(now() * 1e6));
        if (!PQsendQueryPrepared(connection, "begin", 0, NULL, NULL, NULL, 0)) fail("send BEGIN", NULL);
        for (int i = 0; i < now_batch; i++) {
            char id[96];
            snprintf(id, sizeof id, "%s%d-%ld", argv[5], index, done + i);
            const char *values[] = {argv[3], argv[4], at, id};
            if (!PQsendQueryPrepared(connection, "send", 4, values, NULL, NULL, 0)) fail("send a message", NULL);
        }
        if (!PQsendQueryPrepared(connection, "commit", 0, NULL, NULL, NULL, 0)) fail("send COMMIT", NULL);
        if (!PQpipelineSync(connection)) fail("pipeline sync", NULL);
        sent += drain(now_batch + 2, now_batch);
    }
    PQfinish(connection);
    if (sent != sends) {
        fprintf(stderr, "floor-postgres-sends: client %d: %ld of %ld sends updated the author's row\n", index, sent,
                sends);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    floor_name = "floor-postgres-sends";
    if (argc != 9) {
        fprintf(stderr, "usage: floor-postgres-sends CONNINFO SCHEMA CHANNEL AUTHOR PREFIX CLIENTS SENDS BATCH\n");
        return 2;
    }
    int clients = atoi(argv[6]), batch = atoi(argv[8]);
    long sends = atol(argv[7]);
    if (clients < 1 || clients > 64 || batch < 1 || batch > 64 || sends < clients || sends > 1000000) {
        fprintf(stderr, "floor-postgres-sends: CLIENTS 1…64, BATCH 1…64, SENDS CLIENTS…1,000,000\n");
        return 2;
    }
    int ready[2], go[2];
    if (pipe(ready) != 0 || pipe(go) != 0) {
        perror("pipe");
        return 1;
    }
    for (int index = 0; index < clients; index++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 1;
        }
        if (pid == 0) {
            // The sends are shared out; the first clients take one more when they do not divide.
            long mine = sends / clients + (index < sends % clients ? 1 : 0);
            _exit(client(argv, index, mine, batch, ready[1], go[0]));
        }
    }
    char byte;
    for (int index = 0; index < clients; index++) {
        if (read(ready[0], &byte, 1) != 1) {
            fprintf(stderr, "floor-postgres-sends: a client did not start\n");
            return 1;
        }
    }
    double started = now();
    for (int index = 0; index < clients; index++) {
        if (write(go[1], "g", 1) != 1) {
            perror("write");
            return 1;
        }
    }
    int failed = 0;
    for (int index = 0; index < clients; index++) {
        int status;
        if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
    }
    double wall = now() - started;
    if (failed) return 1;
    struct rusage usage;
    getrusage(RUSAGE_CHILDREN, &usage);
    double cpu = usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + usage.ru_stime.tv_sec +
                 usage.ru_stime.tv_usec / 1e6;
    printf("{\"clients\": %d, \"batch\": %d, \"sends\": %ld, \"seconds\": %.3f, \"achieved\": %.1f, "
           "\"client_cpu_us_per_send\": %.1f}\n",
           clients, batch, sends, wall, sends / wall, cpu / sends * 1e6);
    return 0;
}
