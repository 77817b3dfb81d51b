"""Upgrades (docs/operations.md, "Upgrade a cluster"; packaging/INSTALL.md).

A rolling upgrade of two PostgreSQL nodes under receipt load: each node in
turn is stopped, replaced by the new release and started, the new release
carrying one more additive migration. Nothing acknowledged is lost, the node
still on the old release keeps working against the migrated schema, clients
reconnect and catch up, and each migration runs once however the nodes start.

SQLite upgraded in place and rolled back: the old release's backup, the new
release on the same folder, then the old binary and the backup back.

The old release is the previous tag (Tests/Fixtures/previous-release.json).
`scripts/check-upgrade` builds it and sets TICKS_OLD_BIN to it. Without
TICKS_OLD_BIN (`scripts/test`), the same binary plays it: on PostgreSQL with
`--migrations-up-to` the previous release's newest migration (its schema, and
code that never needs more); on SQLite, the current binary both times.
"""

import json
import os
import secrets
import sqlite3
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from conftest import POSTGRES_URL, TICKS_BIN, TicksProcess, psql
from receipt_load import MarkLoad
from test_nodes import Socket
from wire import APIError, Ticks

# The previous release: its tag and newest migration, raised at each release (CHANGELOG.md).
PREVIOUS_RELEASE = json.loads(
    (Path(__file__).resolve().parents[2] / "Tests" / "Fixtures" / "previous-release.json").read_text())
PREVIOUS_RELEASE_MIGRATION = PREVIOUS_RELEASE["newest_migration"]
OLD_BIN = os.environ.get("TICKS_OLD_BIN")
needs_postgres = pytest.mark.skipif(
    POSTGRES_URL is None and not os.environ.get("CI"),
    reason="TICKS_TEST_POSTGRES_URL is not set (scripts/test sets it when PostgreSQL is installed)")
# Readers, and the writer of every message (a reader's own message would move their read cursor, R4).
MEMBERS = ["up0", "up1", "up2", "up3"]
WRITER = "upwriter"


@pytest.fixture
def schema():
    assert POSTGRES_URL, "CI must run the PostgreSQL tests: TICKS_TEST_POSTGRES_URL is not set"
    name = "up_" + secrets.token_hex(6)
    psql(f"CREATE SCHEMA {name}")
    yield name
    psql(f"DROP SCHEMA {name} CASCADE")


def node(tmp_path, name, schema, keys, old=False):
    arguments = ["--postgres-url", f"{POSTGRES_URL}?schema={schema}", "--log-level", "info"]
    if old and OLD_BIN is None:
        arguments += ["--migrations-up-to", PREVIOUS_RELEASE_MIGRATION]
    process = TicksProcess(tmp_path / name, extra_args=arguments, **keys, **({"binary": OLD_BIN} if old and OLD_BIN else {}))
    process.release = "old" if old else "new"
    return process


def migrations(schema):
    return set(psql(f"SELECT name FROM {schema}.ticks_migration").split())


class Balancer:
    """What a load balancer does: each call to the next live node; a node that
    refuses the connection (it is being replaced) is skipped."""

    def __init__(self, keys):
        self.keys = keys
        self.nodes = []
        self.lock = threading.Lock()
        self.turn = 0

    def set_nodes(self, nodes):
        with self.lock:
            self.nodes = list(nodes)

    def call(self, action):
        """Runs `action(client)` on the nodes in turn until one answers; the node that did."""
        for _ in range(200):
            with self.lock:
                nodes = list(self.nodes)
                self.turn += 1
                turn = self.turn
            for offset in range(len(nodes)):
                target = nodes[(turn + offset) % len(nodes)]
                client = Ticks(target.base_url, self.keys["api_key"], self.keys["api_secret"], timeout=30)
                try:
                    action(client)
                    return target
                except requests.ConnectionError:
                    continue
                except APIError as error:
                    # A node stopping answers 503 while it drains; anything else is a failure.
                    if error.status != 503:
                        raise
            time.sleep(0.05)
        raise AssertionError("no node answered")


def receipt_load(balancer, order):
    """Marks going on through the balancer; each ack tagged with the release that answered it."""
    def mark(cid, user, message_id):
        return balancer.call(lambda client: client.mark_read(cid, user, message_id)).release

    return MarkLoad(mark, order, MEMBERS, pause=0.01)


@needs_postgres
def test_a_rolling_upgrade_loses_no_receipt_and_the_old_node_works_on_the_new_schema(tmp_path, schema):
    keys = {"api_key": "upkey", "api_secret": secrets.token_urlsafe(48)}
    a, b = node(tmp_path, "a-old", schema, keys, old=True), node(tmp_path, "b-old", schema, keys, old=True)
    running = [a, b]
    try:
        old_schema = migrations(schema)
        assert PREVIOUS_RELEASE_MIGRATION in old_schema
        api = Ticks(a.base_url, keys["api_key"], keys["api_secret"])
        api.upsert_users(*MEMBERS, WRITER)
        order = {}
        for index in range(3):
            cid = f"messaging:up{index}"
            api.create_channel(cid, [*MEMBERS, WRITER], WRITER)
            order[cid] = [api.send_message(cid, WRITER, f"m{n}", message_id=f"up{index}-{n}")["id"]
                          for n in range(150)]
        # The old release answers receipts on its own schema.
        api.mark_read("messaging:up0", "up1", "up0-0")
        receipts = api.receipts("up0-0")["receipts"]
        assert [r["user"]["id"] for r in receipts if "read_at" in r] == ["up1"], receipts
        balancer = Balancer(keys)
        balancer.set_nodes([a, b])
        # up0 reads on node A: its socket goes down with A and comes back on the new A.
        watcher = Socket(a, api, "up0")
        with receipt_load(balancer, order) as load:
            load.wait_for(40)

            # Node A: stopped, replaced by the new release, started. It migrates.
            balancer.set_nodes([b])
            assert a.stop() == 0, a.output()
            running.remove(a)
            watcher.closed.wait(timeout=30)
            assert watcher.closed.is_set(), "the socket of a stopped node closes"
            last_seen = max(e["created_at"] for e in watcher.events if "created_at" in e)
            a2 = node(tmp_path, "a-new", schema, keys)
            running.append(a2)
            new_schema = migrations(schema)
            added = new_schema - old_schema
            assert added, "the new release carries one more migration"
            balancer.set_nodes([a2, b])

            # The old node B works against the migrated schema: marks it answers are acknowledged.
            load.wait_for(30, tag="old")
            load.wait_for(30, tag="new")

            # Node B in turn.
            balancer.set_nodes([a2])
            assert b.stop() == 0, b.output()
            running.remove(b)
            b2 = node(tmp_path, "b-new", schema, keys)
            running.append(b2)
            balancer.set_nodes([a2, b2])
            load.wait_for(40)
        assert not load.errors, load.errors

        # The client reconnects to the new node A and catches up on what it missed.
        watcher.close()
        api = Ticks(a2.base_url, keys["api_key"], keys["api_secret"])
        watcher = Socket(a2, api, "up0")
        missed = api.call(
            "POST", "/sync", {"channel_cids": list(order), "last_sync_at": last_seen}, token=api.user_token("up0"))
        reads = [e for e in missed["events"] if e["type"] == "message.read"]
        assert {e["user"]["id"] for e in reads} >= {"up1", "up2", "up3"}, [e["type"] for e in missed["events"]]
        watcher.close()

        # Every acknowledged mark is there, whichever node and release answered it.
        for cid in order:
            reads = {r["user"]["id"]: r for r in api.query_channel(cid)["read"]}
            for user in MEMBERS:
                acked = [ack.index for ack in load.acks() if (ack.cid, ack.user) == (cid, user)]
                if acked:
                    position = order[cid].index(reads[user]["last_read_message_id"])
                    assert position >= max(acked), (cid, user, reads[user])

        # Each migration ran once: one node applied it, the others found it applied.
        outputs = "".join(process.output() for process in (a, b, a2, b2))
        for name in added:
            assert outputs.count(f"migration={name}") == 1, outputs
    finally:
        for process in running:
            assert process.stop() == 0, process.output()


@needs_postgres
def test_nodes_starting_together_apply_each_migration_once(tmp_path, schema):
    keys = {"api_key": "upkey", "api_secret": secrets.token_urlsafe(48)}
    with ThreadPoolExecutor(3) as pool:
        starts = [pool.submit(node, tmp_path, name, schema, keys) for name in ["n1", "n2", "n3"]]
    nodes = [start.result() for start in starts if start.exception() is None]
    try:
        for start in starts:
            assert start.exception() is None, start.exception()
        applied = migrations(schema)
        outputs = "".join(n.output() for n in nodes)
        assert outputs.count("applied migration") == len(applied), outputs
        for name in applied:
            assert outputs.count(f"migration={name}") == 1
        Ticks(nodes[2].base_url, keys["api_key"], keys["api_secret"]).upsert_users("together")
    finally:
        for n in nodes:
            assert n.stop() == 0, n.output()


def sqlite_migrations(data_dir):
    with sqlite3.connect(Path(data_dir) / "ticks.sqlite") as db:
        return {row[0] for row in db.execute("SELECT identifier FROM grdb_migrations")}


def test_sqlite_upgraded_in_place_and_rolled_back_from_a_backup(tmp_path):
    """packaging/INSTALL.md's steps: the old release serves a data folder and is backed up (its own
    `ticks backup`); the new release replaces it on the same folder, migrates it in place and serves
    what the old one wrote; rolled back, the old binary and `ticks restore --replace` of the backup
    serve exactly the state of the backup (what the new release wrote after it is gone)."""
    old_bin = OLD_BIN or TICKS_BIN
    keys = {"api_key": "upkey", "api_secret": secrets.token_urlsafe(48)}
    data = tmp_path / "data"
    cid = "messaging:sqliteup"

    def state(server):
        channel = Ticks(server.base_url, keys["api_key"], keys["api_secret"]).query_channel(cid)
        return [m["id"] for m in channel["messages"]], {r["user"]["id"]: r.get("last_read_message_id")
                                                      for r in channel["read"]}

    old = TicksProcess(data, binary=old_bin, **keys)
    try:
        api = Ticks(old.base_url, keys["api_key"], keys["api_secret"])
        api.upsert_users("reader", "writer")
        api.create_channel(cid, ["reader", "writer"], "writer")
        ids = [api.send_message(cid, "writer", f"m{n}", message_id=f"sq{n}")["id"] for n in range(4)]
        api.mark_read(cid, "reader", ids[1])
        backed_up = state(old)
        backup = tmp_path / "before-upgrade.sqlite"
        result = subprocess.run([old_bin, "backup", "--data-dir", str(data), "--to", str(backup), "--quiet"],
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stdout + result.stderr
    finally:
        assert old.stop() == 0, old.output()
    old_migrations = sqlite_migrations(data)
    assert PREVIOUS_RELEASE_MIGRATION in old_migrations

    # Upgraded in place: the new binary on the same folder.
    new = TicksProcess(data, **keys)
    try:
        assert state(new) == backed_up
        assert sqlite_migrations(data) >= old_migrations
        if OLD_BIN:
            assert sqlite_migrations(data) - old_migrations, "the new release carries one more migration"
        api = Ticks(new.base_url, keys["api_key"], keys["api_secret"])
        api.send_message(cid, "writer", "after the upgrade", message_id="sq-new")
        api.mark_read(cid, "reader", "sq-new")
        assert state(new) != backed_up
    finally:
        assert new.stop() == 0, new.output()

    # Rolled back: the kept binary, and the backup taken before the upgrade.
    result = subprocess.run([old_bin, "restore", "--from", str(backup), "--data-dir", str(data), "--replace"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert sqlite_migrations(data) == old_migrations
    old = TicksProcess(data, binary=old_bin, **keys)
    try:
        assert state(old) == backed_up
    finally:
        assert old.stop() == 0, old.output()


def dump(data_dir):
    """The database's schema and rows as SQL (its file's bytes may change on a mere open: GRDB's pool
    makes sure the write-ahead log exists by creating and dropping a table)."""
    db = sqlite3.connect(Path(data_dir) / "ticks.sqlite")
    try:
        return list(db.iterdump())
    finally:
        db.close()


def test_sqlite_refuses_a_schema_newer_than_it_knows_unless_allowed(tmp_path):
    """A downgrade without the backup: a data folder a newer Ticks migrated is refused, in plain words,
    and nothing is written to it; `--allow-newer-schema` serves it."""
    keys = {"api_key": "upkey", "api_secret": secrets.token_urlsafe(48)}
    data = tmp_path / "data"
    server = TicksProcess(data, **keys)
    Ticks(server.base_url, keys["api_key"], keys["api_secret"]).upsert_users("kept")
    assert server.stop() == 0, server.output()
    db = sqlite3.connect(data / "ticks.sqlite")
    with db:
        db.execute("INSERT INTO grdb_migrations (identifier) VALUES ('v99-from-a-newer-release')")
    db.close()
    database = dump(data)
    with pytest.raises(RuntimeError) as refused:
        TicksProcess(data, **keys)
    message = str(refused.value)
    assert "newer Ticks" in message and "v99-from-a-newer-release" in message, message
    assert "--allow-newer-schema" in message, message
    assert dump(data) == database, "a refused database is left as it was"
    server = TicksProcess(data, extra_args=["--allow-newer-schema"], **keys)
    try:
        users = Ticks(server.base_url, keys["api_key"], keys["api_secret"]).query_users({"id": {"$eq": "kept"}})
        assert [user["id"] for user in users["users"]] == ["kept"]
    finally:
        assert server.stop() == 0, server.output()
