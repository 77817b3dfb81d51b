"""Faults against the real binary: a node killed under receipt load, and
clients that stop reading while large frames are sent to them.

Each test runs on SQLite and, when TICKS_TEST_POSTGRES_URL is set (scripts/test
starts a throwaway cluster), on PostgreSQL in a schema of its own.
"""

import json
import secrets
import signal
import socket
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from conftest import TicksProcess, store_arguments
from test_nodes import Socket
from wire import APIError, Ticks

@pytest.fixture(params=["sqlite", "postgres"])
def store(request, tmp_path):
    """Starts servers (`store.start()`, again on the same data) on the store asked for; stops them afterwards."""
    with store_arguments(request.param, "f") as store_args:
        servers = Servers(tmp_path / "data", ["--rate-limits", "off", *store_args])
        yield servers
        for server in servers.started:
            if server.process.poll() is None:
                assert server.stop() == 0, server.output()


class Servers:
    """Servers on one store: every start uses the same data (SQLite's folder, PostgreSQL's schema)."""

    def __init__(self, data_dir, extra_args):
        self.data_dir = data_dir
        self.extra_args = extra_args
        self.credentials = {"api_key": "faultkey", "api_secret": secrets.token_urlsafe(48)}
        self.started = []

    def start(self, *extra_args):
        server = TicksProcess(self.data_dir, extra_args=[*self.extra_args, *extra_args], **self.credentials)
        self.started.append(server)
        return server


# kill -9 under receipt load

PAIRS = 12
MESSAGES = 60


class Reader(threading.Thread):
    """One member marking their channel delivered and read, message after
    message, one request at a time, remembering what was acknowledged and
    what was in flight when the server died."""

    def __init__(self, base_url, api_key, api_secret, index):
        super().__init__(daemon=True)
        self.client = Ticks(base_url, api_key, api_secret, timeout=10)
        self.cid = f"messaging:kill{index}"
        self.user = f"reader{index}"
        self.index = index
        self.acked = {"delivered": 0, "read": 0}  # the highest message number answered 2xx
        self.in_flight = {"delivered": 0, "read": 0}  # a request that got no answer
        self.answered = 0
        self.failure = None

    def message(self, number):
        return f"k{self.index}-{number}"

    def run(self):
        token = self.client.user_token(self.user)
        for number in range(1, MESSAGES + 1):
            # Delivered up to this message, read up to two before it: both cursors move on every step.
            steps = [("delivered", number)] + ([("read", number - 2)] if number > 2 else [])
            for kind, target in steps:
                self.in_flight[kind] = target
                try:
                    if kind == "delivered":
                        self.client.mark_delivered(self.user, (self.cid, self.message(target)), token=token)
                    else:
                        self.client.mark_read(self.cid, self.user, message_id=self.message(target), token=token)
                except (requests.ConnectionError, requests.Timeout):
                    return  # the server is gone: this request may or may not have been committed
                except APIError as error:
                    self.failure = error
                    return
                self.acked[kind] = target
                self.in_flight[kind] = 0
                self.answered += 1


def test_a_killed_server_loses_no_acknowledged_receipt(store):
    server = store.start()
    client = Ticks(server.base_url, server.api_key, server.api_secret)
    client.upsert_users("author", *(f"reader{i}" for i in range(PAIRS)))
    for i in range(PAIRS):
        client.create_channel(f"messaging:kill{i}", ["author", f"reader{i}"], created_by="author")

    def send_all(i):
        sender = Ticks(server.base_url, server.api_key, server.api_secret)
        for number in range(1, MESSAGES + 1):
            sender.send_message(f"messaging:kill{i}", "author", f"{number}", message_id=f"k{i}-{number}")

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(send_all, range(PAIRS)))

    readers = [Reader(server.base_url, server.api_key, server.api_secret, i) for i in range(PAIRS)]
    for reader in readers:
        reader.start()
    # Kill it in the middle of the load: a third of the receipts answered, many in flight.
    total = PAIRS * (2 * MESSAGES - 2)
    deadline = time.monotonic() + 120
    while sum(r.answered for r in readers) < total // 3:
        assert time.monotonic() < deadline, "the receipts never reached a third of the load"
        assert all(r.failure is None for r in readers), [r.failure for r in readers if r.failure]
        time.sleep(0.005)
    server.process.send_signal(signal.SIGKILL)
    server.process.wait(timeout=10)
    for reader in readers:
        reader.join(timeout=30)
        assert not reader.is_alive()
        assert reader.failure is None, reader.failure
    answered = sum(r.answered for r in readers)
    assert answered < total, "the server was killed after the load ended: nothing was in flight"

    restarted = store.start()
    client = Ticks(restarted.base_url, restarted.api_key, restarted.api_secret)
    for reader in readers:
        state = client.query_channel(reader.cid, messages_limit=0)
        read_state = next(r for r in state["read"] if r["user"]["id"] == reader.user)
        for kind, field in (("delivered", "last_delivered_message_id"), ("read", "last_read_message_id")):
            # The last acknowledged target, or the one in flight if the kill came after its commit.
            expected = {reader.acked[kind], reader.in_flight[kind]} - {0}
            if not expected:
                continue
            got = read_state.get(field)
            assert got in {reader.message(n) for n in expected}, \
                f"{reader.user}'s {kind} cursor is at {got}, acknowledged {reader.acked[kind]}, " \
                f"in flight {reader.in_flight[kind]}"
        # The receipt log has every acknowledged move: exact times per message.
        for number in (1, reader.acked["delivered"], reader.acked["read"]):
            if number == 0:
                continue
            receipts = client.receipts(reader.message(number))["receipts"]
            mine = next((r for r in receipts if r["user"]["id"] == reader.user), None)
            assert mine is not None and mine.get("delivered_at"), (reader.user, number, receipts)
            if number <= reader.acked["read"]:
                assert mine.get("read_at"), (reader.user, number, receipts)

    # The restarted server keeps serving receipts.
    reader = readers[0]
    client.mark_read(reader.cid, reader.user)
    state = client.query_channel(reader.cid, messages_limit=0)
    assert next(r for r in state["read"] if r["user"]["id"] == reader.user)["unread_messages"] == 0


# Slow consumers of large frames

SLOW_CONSUMERS = 3
LARGE_MESSAGES = 600
BUFFER_BYTES = 4 << 20  # the default --connection-buffer-bytes


class NonReadingSocket:
    """A WebSocket client that completes the handshake, reads the first frame,
    and never reads again, with a tiny receive buffer: the slowest client there is."""

    def __init__(self, server, client, user):
        self.socket = socket.socket()
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.socket.connect(("127.0.0.1", server.port))
        query = urllib.parse.urlencode({
            "api_key": server.api_key, "json": json.dumps({"user_id": user}),
            "authorization": client.user_token(user)})
        self.socket.sendall((
            f"GET /connect?{query} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
            "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        self.socket.settimeout(10)
        answer = self.socket.recv(1024)
        assert answer.startswith(b"HTTP/1.1 101"), answer

    def close(self):
        self.socket.close()


def memory_kib(pid, field):
    """A memory figure of a process from /proc (VmRSS, RssAnon, ...), in KiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} for {pid}")


def metric(server, name):
    text = requests.get(server.base_url + "/metrics", timeout=10).text
    values = [float(line.split()[-1]) for line in text.splitlines() if line.startswith(name) and " " in line]
    return sum(values)


def test_slow_consumers_of_large_frames_leave_memory_bounded_and_others_on_time(store):
    # The slow clients never read, so they never answer a ping either: at the default 30 s the
    # server closed them for that before their buffers filled on a loaded machine, where the
    # sends take minutes (2026-12-03: "0 slow connections closed"). This test is about the buffer.
    server = store.start("--ping-interval", "3600")
    client = Ticks(server.base_url, server.api_key, server.api_secret)
    slow = [f"sloth{i}" for i in range(SLOW_CONSUMERS)]
    client.upsert_users("author", "reader", *slow)
    cid = "messaging:large"
    client.create_channel(cid, ["author", "reader", *slow], created_by="author")
    # As large as a message may be: 5,000 four-byte characters and 5 KB of custom data.
    text = "𝒳" * 5000
    custom = {"note": "n" * 5000}
    reader = Socket(server, client, "reader")
    try:
        # Warm up (allocator arenas, caches) before the baseline.
        # Their latencies are the baseline of this run, on this machine as loaded as it is now.
        alone = []
        for n in range(50):
            client.send_message(cid, "author", text, message_id=f"warm{n}", **custom)
            acknowledged = time.monotonic()
            reader.wait_for(lambda e, n=n: e["type"] == "message.new" and e["message"]["id"] == f"warm{n}")
            alone.append(time.monotonic() - acknowledged)
        # Anonymous memory: SQLite's database is mapped into the process, and
        # the pages of the messages stored would count in the resident set.
        baseline = peak = memory_kib(server.process.pid, "RssAnon")

        sloths = [NonReadingSocket(server, client, user) for user in slow]
        latencies = []
        try:
            for n in range(LARGE_MESSAGES):
                client.send_message(cid, "author", text, message_id=f"big{n}", **custom)
                acknowledged = time.monotonic()
                reader.wait_for(lambda e, n=n: e["type"] == "message.new" and e["message"]["id"] == f"big{n}")
                latencies.append(time.monotonic() - acknowledged)
                peak = max(peak, memory_kib(server.process.pid, "RssAnon"))
            closed = metric(server, "ticks_ws_slow_connections_closed_total")
        finally:
            for sloth in sloths:
                sloth.close()
    finally:
        reader.close()

    frame_bytes = len(json.dumps({"text": text, **custom}, ensure_ascii=False).encode())
    sent_per_sloth = LARGE_MESSAGES * frame_bytes
    assert sent_per_sloth > 3 * BUFFER_BYTES, "the test must send each slow client far more than its buffer"
    # Each slow client is closed once its buffer is full, instead of holding all it was sent.
    assert closed >= SLOW_CONSUMERS, f"{closed} slow connections closed"
    growth_mib = (peak - baseline) / 1024
    bound_mib = SLOW_CONSUMERS * BUFFER_BYTES / 2**20 + 24
    assert growth_mib < bound_mib, \
        f"the server grew by {growth_mib:.0f} MiB (bound {bound_mib:.0f} MiB; " \
        f"{SLOW_CONSUMERS * sent_per_sloth / 2**20:.0f} MiB were sent to the slow clients)"
    # The reading client got every event, none held up behind the slow ones: measured against the
    # same events with no slow client, in this run (a fixed bound in seconds failed on a machine
    # saturated beside the tests, where the baseline itself is slow). A fan-out that waited for the
    # slow clients would hold the reader until each was closed.
    latencies.sort()
    alone.sort()
    bound = max(2.0, 10 * alone[-1])
    assert latencies[-1] < bound, \
        f"slowest event took {latencies[-1]:.2f}s (bound {bound:.2f}s: 10x the slowest of {len(alone)} " \
        f"alone, {alone[-1]:.3f}s); median {latencies[len(latencies) // 2]:.3f}s"
