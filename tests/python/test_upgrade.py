"""A rolling upgrade of two PostgreSQL nodes under receipt load
(docs/operations.md, "Upgrade a cluster"): each node in turn is stopped,
replaced by the new release and started, the new release carrying one more
additive migration. Nothing acknowledged is lost, the node still on the old
release keeps working against the migrated schema, clients reconnect and
catch up, and each migration runs once however the nodes start.

The old release is played by the same binary with `--migrations-up-to
PREVIOUS_RELEASE_MIGRATION` (its schema, and code that never needs more);
set TICKS_OLD_BIN to a real build of the previous release to use it instead.
"""

import os
import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from conftest import POSTGRES_URL, TicksProcess, psql
from receipt_load import MarkLoad
from test_nodes import Socket
from wire import APIError, Ticks

pytestmark = pytest.mark.skipif(
    POSTGRES_URL is None and not os.environ.get("CI"),
    reason="TICKS_TEST_POSTGRES_URL is not set (scripts/test sets it when PostgreSQL is installed)")

# The newest migration of the previous release: raise it when a release adds one.
PREVIOUS_RELEASE_MIGRATION = "v9-webhooks"
OLD_BIN = os.environ.get("TICKS_OLD_BIN")
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
        # The previous release had no receipt-log pruner (it came with v10-receipt-log-retention).
        arguments += ["--migrations-up-to", PREVIOUS_RELEASE_MIGRATION, "--receipt-log-retention", "off"]
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
        # The old release answers receipts on its own schema, which has no `receipt_log_pruned`
        # (v10): a node held before it reads the log as never pruned (it answered 500 until
        # SchemaLevel).
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
