"""Round trips per operation, counted (docs/storage.md, "Round trips per
operation"): on a PostgreSQL cluster of this test's own, with
pg_stat_statements counting every statement a client sends (`track = top`:
those of a function's body are not round trips), a node connects as a role
of its own, so only its statements are counted. Each operation runs ROUNDS
times after a first run of each; the statements and the bus's notifications
it took must be exactly what the table in docs/storage.md states. A change
that adds a round trip fails here until it updates the table on purpose.

Statements that run on timers rather than for a request (the bus
listener's heartbeat) or at most once a second whatever the traffic (the
app's settings, `AppOptionsCache`) are left out by their text, named below."""

import re
import secrets
from pathlib import Path

import pytest
from dbfaults import Node, OwnPostgres, postgres_installed

ROOT = Path(__file__).resolve().parents[2]
ROUNDS = 5
ROLE = "ticks_node"
# The bus listener's heartbeat (docs/operations.md): once per store deadline, whatever the traffic.
TIMERS = {"SELECT 1"}
# The app's settings (PATCH /app) as a node keeps them, read again when the last read is a second
# old: not per request. (A change reads R15's setting in its own transaction too: counted.)
AMORTISED = ("SELECT name, value FROM app_setting",)
VOICE = [{"type": "voiceRecording", "asset_url": "https://example.com/a.m4a", "duration": 3.2}]


def documented(column):
    """The table of docs/storage.md's "Round trips per operation": {operation: count} of `column`."""
    text = (ROOT / "docs/storage.md").read_text()
    section = text.split("### Round trips per operation", 1)[1].split("\n#", 1)[0]
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in section.splitlines() if line.startswith("|")]
    header, body = rows[0], rows[2:]
    index = header.index(column)
    return {row[0]: int(row[index]) for row in body}


@pytest.fixture
def postgres():
    if not postgres_installed():
        pytest.skip("PostgreSQL is not installed")
    cluster = OwnPostgres(options="-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=top "
                                  "-c pg_stat_statements.track_utility=on -c pg_stat_statements.max=10000")
    yield cluster
    cluster.close()


def test_postgres_statements_per_operation_are_the_documented_ones(postgres, tmp_path):
    schema = "r_" + secrets.token_hex(4)
    postgres.psql(f"CREATE EXTENSION pg_stat_statements; CREATE ROLE {ROLE} LOGIN; "
                  f"CREATE SCHEMA {schema} AUTHORIZATION {ROLE}")
    credentials = {"api_key": "tripkey", "api_secret": secrets.token_urlsafe(48)}
    url = postgres.url.replace("postgres@", f"{ROLE}@") + f"?schema={schema}"
    node = Node("a", tmp_path / "a", url, credentials, None)
    try:
        api = node.client()
        api.upsert_users("author", "reader", "other")
        cid = "messaging:trips"
        # Three members: a move reads the channel's lowest cursors for R13 (two would not).
        api.create_channel(cid, ["author", "reader", "other"], "author")
        counts = {}

        def count(operation, calls):
            postgres.psql("SELECT pg_stat_statements_reset()")
            for call in calls:
                call()
            rows = postgres.psql(
                "SELECT calls, regexp_replace(query, '\\s+', ' ', 'g') FROM pg_stat_statements "
                f" WHERE userid = '{ROLE}'::regrole ORDER BY calls DESC")
            statements, notifications, seen = 0, 0, []
            for line in rows.splitlines():
                made, query = line.split("|", 1)
                if query.strip() in TIMERS or any(text in query for text in AMORTISED):
                    continue
                seen.append(f"{made:>4} {query[:110]}")
                if "pg_notify" in query:
                    notifications += int(made)
                else:
                    statements += int(made)
            counts[operation] = (statements / len(calls), notifications / len(calls), seen)

        ids = [f"trip{round}" for round in range(ROUNDS + 1)]
        # A first run of each, then ROUNDS counted: every one moves a cursor (or plays a new message).
        api.send_message(cid, "author", "first", message_id=ids[0], attachments=VOICE)
        api.mark_delivered("reader", (cid, ids[0]))
        api.mark_read(cid, "reader", ids[0])
        api.raw("POST", f"/messages/{ids[0]}/played", {"user_id": "reader"})
        count("send", [lambda i=i: api.send_message(cid, "author", "voice", message_id=i, attachments=VOICE)
                       for i in ids[1:]])
        count("mark delivered", [lambda i=i: api.mark_delivered("reader", (cid, i)) for i in ids[1:]])
        count("mark read", [lambda i=i: api.mark_read(cid, "reader", i) for i in ids[1:]])
        count("played", [lambda i=i: api.raw("POST", f"/messages/{i}/played", {"user_id": "reader"}).raise_for_status()
                         for i in ids[1:]])
        report = "\n".join(f"{operation}: {s:g} statements, {n:g} notifications per call\n    " + "\n    ".join(seen)
                           for operation, (s, n, seen) in counts.items())
        print(report)
        statements, notifications = documented("PostgreSQL statements"), documented("bus notifications")
        for operation, (s, n, _) in counts.items():
            assert (s, n) == (statements[operation], notifications[operation]), \
                f"{operation} documented as {statements[operation]} statements and {notifications[operation]} " \
                f"notifications:\n{report}"
    finally:
        node.stop()
