"""Several `ticks serve --postgres-url` processes over one PostgreSQL database,
as a team would run them behind a load balancer.

Needs TICKS_TEST_POSTGRES_URL (scripts/test starts a throwaway cluster and
sets it). Each test gets a schema of its own.
"""

import contextlib
import json
import os
import secrets
import signal
import subprocess
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import POSTGRES_URL, TICKS_BIN, TicksProcess, psql
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect
from wire import Ticks

pytestmark = pytest.mark.skipif(
    POSTGRES_URL is None and not os.environ.get("CI"),
    reason="TICKS_TEST_POSTGRES_URL is not set (scripts/test sets it when PostgreSQL is installed)")


@pytest.fixture
def cluster(tmp_path):
    """Starts nodes on one database schema; stops them (and drops the schema) afterwards."""
    assert POSTGRES_URL, "CI must run the PostgreSQL tests: TICKS_TEST_POSTGRES_URL is not set"
    schema = "n_" + secrets.token_hex(6)
    psql(f"CREATE SCHEMA {schema}")
    credentials = {"api_key": "nodeskey", "api_secret": secrets.token_urlsafe(48)}
    nodes = []

    def start(name):
        node = TicksProcess(
            tmp_path / name, extra_args=["--postgres-url", f"{POSTGRES_URL}?schema={schema}"], **credentials)
        nodes.append(node)
        return node

    start.schema = schema
    yield start
    for node in nodes:
        if node.process.poll() is None:
            assert node.stop() == 0, node.output()
    psql(f"DROP SCHEMA {schema} CASCADE")


def stream(node):
    return Ticks(node.base_url, node.api_key, node.api_secret)


class Socket:
    """A user's WebSocket to one node, collecting the events it receives."""

    def __init__(self, node, client, user):
        query = urllib.parse.urlencode({
            "api_key": node.api_key, "json": json.dumps({"user_id": user}),
            "authorization": client.user_token(user)})
        # Entered as a context manager (websockets ≥ 17.1 warns otherwise) and left in close().
        self.exit_stack = contextlib.ExitStack()
        self.socket = self.exit_stack.enter_context(
            connect(f"ws://{getattr(node, 'host', '127.0.0.1')}:{node.port}/connect?{query}", open_timeout=10, max_size=2**22))
        self.events = []
        self.closed = threading.Event()
        self.lock = threading.Lock()
        hello = json.loads(self.socket.recv(timeout=10))
        assert hello["type"] == "health.check", hello
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        try:
            while True:
                event = json.loads(self.socket.recv())
                with self.lock:
                    self.events.append(event)
        except (ConnectionClosed, OSError, TimeoutError):
            self.closed.set()

    def wait_for(self, predicate, timeout=10.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                found = [e for e in self.events if predicate(e)]
            if found:
                return found[0]
            time.sleep(0.02)
        with self.lock:
            raise AssertionError(f"no matching event within {timeout}s; got {[e['type'] for e in self.events]}")

    def close(self):
        self.exit_stack.close()


def group(client, channel_id, members, creator):
    """Creates messaging:channel_id; its cid."""
    cid = f"messaging:{channel_id}"
    client.create_channel(cid, members, created_by=creator)
    return cid


def two_nodes_and_a_pair(cluster, channel_id):
    """Nodes A and B, each listening to the other, a client of each, and a channel of alice and
    bob made through A."""
    a, b = cluster("a"), cluster("b")
    wait_listening(a, b)
    via_a, via_b = stream(a), stream(b)
    via_a.upsert_users("alice", "bob")
    return a, b, via_a, via_b, group(via_a, channel_id, ["alice", "bob"], "alice")


def wait_listening(*nodes):
    """Returns once every node's event bus listens. The listener connects beside the server's start,
    after /health answers: an event another node published before that never reaches it (a test
    that sent at once failed so, 2026-12-05, with the fuzzer beside it)."""
    deadline = time.monotonic() + 60
    while not all(status_of(node)["bus"]["listening"] for node in nodes):
        assert time.monotonic() < deadline, "a node's event bus did not listen within 60 s"
        time.sleep(0.1)


def test_a_receipt_made_through_one_node_reaches_the_sender_on_the_other(cluster):
    a, b, via_a, via_b, channel = two_nodes_and_a_pair(cluster, "trip")
    alice_on_b = Socket(b, via_b, "alice")

    via_a.send_message(channel, "alice", "who is in?", message_id="m1")
    new = alice_on_b.wait_for(lambda e: e["type"] == "message.new")
    assert new["message"]["id"] == "m1"

    via_a.mark_delivered("bob", ("messaging:trip", "m1"))
    delivered = alice_on_b.wait_for(lambda e: e["type"] == "message.delivered")
    assert delivered["user"]["id"] == "bob" and delivered["last_delivered_message_id"] == "m1"

    via_a.mark_read(channel, "bob", message_id="m1")
    read = alice_on_b.wait_for(lambda e: e["type"] == "message.read")
    assert read["user"]["id"] == "bob" and read["last_read_message_id"] == "m1"
    # Node B answers with what node A wrote.
    receipts = via_b.receipts("m1")
    assert receipts["read_count"] == 1 and receipts["receipts"][0]["user"]["id"] == "bob"
    alice_on_b.close()


def test_concurrent_marks_on_two_nodes_never_move_a_cursor_back(cluster):
    a, b = cluster("a"), cluster("b")
    clients = [stream(a), stream(b)]
    clients[0].upsert_users("alice", "bob")
    channel = group(clients[0], "race", ["alice", "bob"], "alice")
    for n in range(1, 31):
        clients[0].send_message(channel, "alice", f"{n}", message_id=f"r{n}")

    def mark(n):
        client = clients[n % 2]
        client.mark_read("messaging:race", "bob", message_id=f"r{n}")
        client.mark_delivered("bob", ("messaging:race", f"r{31 - n}"))

    order = list(range(1, 31))
    secrets.SystemRandom().shuffle(order)
    with ThreadPoolExecutor(12) as pool:
        list(pool.map(mark, order))

    for client in clients:
        state = client.query_channel("messaging:race", messages_limit=0)
        bob = next(r for r in state["read"] if r["user"]["id"] == "bob")
        assert bob["last_read_message_id"] == "r30"
        assert bob["unread_messages"] == 0
    # Every message is read by bob exactly once in the receipt log's view.
    for n in (1, 15, 30):
        receipts = clients[1].receipts(f"r{n}")
        assert receipts["read_count"] == 1 and receipts["delivered_count"] == 1


def test_events_too_large_for_a_notification_arrive_whole(cluster):
    a, b = cluster("a"), cluster("b")
    wait_listening(a, b)
    via_a, via_b = stream(a), stream(b)
    members = [f"u{i}" for i in range(60)]
    via_a.upsert_users(*members)
    channel = group(via_a, "big", members, "u0")
    listener = Socket(b, via_b, "u59")
    # A frame over 8,000 bytes (✓ is three bytes of UTF-8; the limit of 5,000
    # counts characters): more than one notification can carry.
    text = "✓" * 2900 + " ünïcode"
    assert len(text.encode()) > 8000
    via_a.send_message(channel, "u0", text, message_id="big1")
    new = listener.wait_for(lambda e: e["type"] == "message.new" and e["message"]["id"] == "big1")
    assert new["message"]["text"] == text
    assert new["unread_count"] == 1
    listener.close()


def test_a_message_into_a_large_channel_reaches_the_members_on_every_node_and_no_one_else(cluster):
    """Past 100 members a send lists no one (`SendOutcome.everyMember`): each node finds its
    connected members as it reads their counts, and the bus's entry is small, whatever the size."""
    a, b = cluster("a"), cluster("b")
    wait_listening(a, b)
    via_a, via_b = stream(a), stream(b)
    members = [f"u{i}" for i in range(150)]
    for start in range(0, len(members), 100):  # at most 100 a call
        via_a.upsert_users(*members[start:start + 100])
    via_a.upsert_users("outsider")
    channel = group(via_a, "large", members[:100], "u0")  # at most 100 at creation
    via_a.update_members(channel, add=members[100:])
    pair = group(via_a, "pair", ["u0", "outsider"], "u0")
    on_b, on_a, outsider = Socket(b, via_b, "u149"), Socket(a, via_a, "u7"), Socket(b, via_b, "outsider")
    via_a.send_message(channel, "u1", "earlier", message_id="l0")
    via_a.send_message(channel, "u0", "to all", message_id="l1")
    for socket in (on_b, on_a):
        new = socket.wait_for(lambda e: e["type"] == "message.new" and e["message"]["id"] == "l1")
        assert new["unread_count"] == 2 and new["total_unread_count"] == 2 and new["unread_channels"] == 1, new
    # The outsider hears the pair's message, sent after: the large channel's came before it, to no one of theirs.
    via_a.send_message(pair, "u0", "just you", message_id="p1")
    outsider.wait_for(lambda e: e["type"] == "message.new" and e["message"]["id"] == "p1")
    with outsider.lock:
        assert not [e for e in outsider.events if e.get("cid") == channel], outsider.events
    assert psql(f"SELECT count(*) FROM {cluster.schema}.event_batch") == "0"
    for socket in (on_b, on_a, outsider):
        socket.close()


def test_a_burst_of_ordinary_events_fits_in_notifications(cluster):
    """Frames queued together are split so that each notification carries as
    many as fit; only a frame too large on its own goes through event_batch."""
    a, b = cluster("a"), cluster("b")
    wait_listening(a, b)
    via_a, via_b = stream(a), stream(b)
    members = [f"u{i}" for i in range(30)]  # 30 frames per message, together far over one notification
    via_a.upsert_users(*({"id": m, "name": f'User "{m}"'} for m in members))
    channel = group(via_a, "burst", members, "u0")
    listener = Socket(b, via_b, "u29")
    count = 100
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: via_a.send_message(
            channel, "u0", f'"quoted" \\ text {i}', message_id=f"m{i}"), range(count)))
    for i in range(count):
        listener.wait_for(lambda e, i=i: e["type"] == "message.new" and e["message"]["id"] == f"m{i}")
    assert psql(f"SELECT count(*) FROM {cluster.schema}.event_batch") == "0"
    listener.close()


def test_a_killed_node_loses_nothing_acknowledged(cluster):
    a, b, via_a, via_b, channel = two_nodes_and_a_pair(cluster, "crash")
    for n in range(1, 6):
        via_a.send_message(channel, "alice", f"{n}", message_id=f"k{n}")
    via_a.mark_read(channel, "bob", message_id="k4")
    via_a.mark_delivered("bob", ("messaging:crash", "k5"))

    a.process.send_signal(signal.SIGKILL)
    a.process.wait(timeout=10)

    # Bob's device reconnects to node B and refreshes: every acknowledged receipt is there.
    state = via_b.query_channel("messaging:crash", messages_limit=10)
    bob = next(r for r in state["read"] if r["user"]["id"] == "bob")
    assert bob["last_read_message_id"] == "k4"
    assert bob["last_delivered_message_id"] == "k5"
    assert bob["unread_messages"] == 1
    assert via_b.receipts("k5")["delivered_count"] == 1


def test_a_lost_listener_makes_clients_reconnect_and_events_flow_again(cluster):
    a, b, via_a, via_b, channel = two_nodes_and_a_pair(cluster, "drop")
    alice_on_b = Socket(b, via_b, "alice")

    # Cut every node's listening and publishing connections, as a database
    # restart or a network blip would. Node A's publishing connection is in
    # use by then (creating the channel told alice and bob through it): a
    # query on the dropped connection was never answered, and A published
    # nothing again, nor could it stop.
    psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
         "WHERE query LIKE 'LISTEN%' OR query LIKE 'SELECT pg_notify%'")
    # Node B cannot know what it missed: it closes its sockets so clients refresh.
    assert alice_on_b.closed.wait(60), "node B kept a socket that may have missed events"

    alice_again = Socket(b, via_b, "alice")
    deadline = time.monotonic() + 60
    while True:
        via_a.send_message(channel, "alice", "again", message_id=f"d{secrets.token_hex(3)}")
        via_a.mark_read(channel, "bob")
        try:
            alice_again.wait_for(lambda e: e["type"] == "message.read" and e["user"]["id"] == "bob", timeout=1)
            break
        except AssertionError:
            assert time.monotonic() < deadline, "events never flowed again after the listener came back"
    alice_again.close()


def status_of(node):
    """The node's `ticks status --json` (GET /admin/status), through the command an operator runs."""
    env = dict(os.environ, TICKS_API_KEY=node.api_key, TICKS_API_SECRET=node.api_secret)
    result = subprocess.run(
        [TICKS_BIN, "status", "--url", node.base_url, "--json"], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_each_node_shows_its_own_sockets_and_a_listening_bus(cluster):
    a, b, via_a, via_b, channel = two_nodes_and_a_pair(cluster, "watch")
    alice_on_b = Socket(b, via_b, "alice")
    bob_on_b = Socket(b, via_b, "bob")
    try:
        status_a, status_b = status_of(a), status_of(b)
        assert (status_a["connections"]["open"], status_b["connections"]["open"]) == (0, 2)
        assert status_b["connections"]["users"] == 2
        for status in (status_a, status_b):
            assert status["store"]["kind"] == "postgres" and status["store"]["size_bytes"] > 0
            assert status["bus"]["listening"] is True and status["bus"]["events_lost"] == 0
        assert status_a["bus"]["node"] != status_b["bus"]["node"]
        # For a person: the same facts, in lines.
        env = dict(os.environ, TICKS_API_KEY=b.api_key, TICKS_API_SECRET=b.api_secret)
        shown = subprocess.run(
            [TICKS_BIN, "status", "--url", b.base_url], capture_output=True, text=True, env=env, timeout=60)
        assert shown.returncode == 0, shown.stderr
        assert "connections  2 open (2 users)" in shown.stdout and "listening" in shown.stdout, shown.stdout
    finally:
        alice_on_b.close()
        bob_on_b.close()
    # A user's token is refused.
    refused = via_a.raw("GET", "/admin/status", token=via_a.user_token("alice"))
    assert refused.status_code == 403 and refused.json()["code"] == 17


def test_an_app_setting_changed_on_one_node_applies_on_the_other_within_a_second(cluster):
    """`PATCH /app` on A: B, which read the settings before, serves R15 once its
    second is up (`AppOptionsCache`), without a restart."""
    a, b, via_a, via_b, channel = two_nodes_and_a_pair(cluster, "recip")
    via_a.upsert_users({"id": "bob", "privacy_settings": {"read_receipts": {"enabled": False}}})
    via_a.send_message(channel, "bob", "hi", message_id="r1")
    via_a.mark_read(channel, "alice")
    assert via_b.call("GET", "/app")["app"]["reciprocal_read_receipts"] is False
    bob_token = via_b.user_token("bob")
    seen = lambda: next(r for r in via_b.receipts("r1", token=bob_token)["receipts"] if r["user"]["id"] == "alice")
    assert "read_at" in seen(), "before: bob sees alice's read"
    started = time.monotonic()
    via_a.call("PATCH", "/app", {"reciprocal_read_receipts": True})
    while "read_at" in seen():
        assert time.monotonic() - started < 10, "node B never applied node A's change"
        time.sleep(0.05)
    assert via_b.call("GET", "/app")["app"]["reciprocal_read_receipts"] is True
