"""A socket goes on reading while a receipt it sent waits on the store (issue 55).

Receipts sent as frames are written one at a time, in order; the frames
behind them are still read meanwhile, so a health check (and the WebSocket
pings the server's keepalive sends) is answered while a write is slow. Until
2026-12 the reader waited for each receipt's write: a write slower than the
ping interval closed the socket ("Ping timeout"), and a client lost the
events of the outage.

The store is held with SQLite's own write lock, taken by this test through
a second connection to the node's database (`BEGIN IMMEDIATE`): the node's
write waits for it (its busy timeout is 5 s). The test needs no clock: it
asks for the order of the answers, the pong before the receipt's ack.
"""

import json
import secrets
import sqlite3

from conftest import TicksProcess
from websockets.sync.client import connect
from wire import Ticks


def test_a_health_check_behind_a_waiting_receipt_is_answered_first(tmp_path):
    server = TicksProcess(tmp_path / "node", api_key="readkey", api_secret=secrets.token_urlsafe(48),
                          extra_args=["--rate-limits", "off"])
    try:
        client = Ticks(server.base_url, server.api_key, server.api_secret)
        client.upsert_users({"id": "alice"}, {"id": "bob"})
        client.create_channel("messaging:r", ["alice", "bob"], created_by="alice")
        client.send_message("messaging:r", "alice", "hello", message_id="r1")
        # SQLite gives up on its lock after 5 s: on a machine too busy to get through the
        # exchange below within that, the receipt fails with a 503 (the store is away) instead of
        # waiting; that try proves nothing either way, and the test tries again.
        for attempt in range(5):
            with connect(client.socket_url("bob"), open_timeout=60) as socket:
                assert json.loads(socket.recv(timeout=60))["type"] == "health.check"
                lock = sqlite3.connect(tmp_path / "node" / "ticks.sqlite", timeout=60, isolation_level=None)
                try:
                    lock.execute("BEGIN IMMEDIATE")
                    request_id = f"q{attempt}"
                    socket.send(json.dumps({"type": "mark_read", "request_id": request_id, "cid": "messaging:r"}))
                    socket.send(json.dumps({"type": "health.check"}))
                    frames = []
                    while True:
                        frame = json.loads(socket.recv(timeout=60))
                        frames.append(frame)
                        if frame.get("type") in ("health.check", "ack"):
                            break
                finally:
                    lock.execute("ROLLBACK")
                    lock.close()
                if frames[-1].get("type") == "ack" and frames[-1].get("error", {}).get("StatusCode") == 503:
                    continue  # the lock outlasted SQLite's patience: try again
                assert frames[-1]["type"] == "health.check", \
                    f"the receipt's ack came before the health check's answer: {frames}"
                # Once the store is free the receipt is written and acknowledged, in order.
                while True:
                    frame = json.loads(socket.recv(timeout=60))
                    if frame.get("type") == "ack":
                        break
                if frame.get("error", {}).get("StatusCode") == 503:
                    continue
                assert frame["request_id"] == request_id and "error" not in frame, frame
                assert frame["event"]["type"] == "message.read"
                return
        raise AssertionError("in 5 tries, SQLite gave up on its lock each time before the exchange was done")
    finally:
        assert server.stop() == 0, server.output()



def test_a_new_socket_reads_its_frames_while_its_hello_waits_on_the_store(tmp_path):
    """The first `health.check` of a user's first connect waits on the store
    (connecting creates the user). The socket's frames are read meanwhile:
    until 2026-12 the reader started only after the hello was written, so a
    look-up slower than two ping intervals closed the new socket ("Ping
    timeout") before its hello, and a test client waited for ever.

    A receipt with a malformed cid is refused without the store; the refusal
    is counted (`ticks_socket_receipts_total`) as soon as the frame is read.
    The test holds SQLite's write lock until it is counted, so the hello is
    still waiting then. SQLite gives up on the lock after 5 s and the server
    then closes the socket: on a machine too busy to read the frame within
    those 5 s, the test tries again as another new user. On the old code
    the frame was never read before the hello, and every try ends closed.
    """
    import requests
    from websockets.exceptions import ConnectionClosed

    server = TicksProcess(tmp_path / "node", api_key="hellokey", api_secret=secrets.token_urlsafe(48),
                          extra_args=["--rate-limits", "off"])
    try:
        client = Ticks(server.base_url, server.api_key, server.api_secret)
        client.upsert_users({"id": "alice"})  # the database exists, with its tables

        def refused() -> bool:
            text = requests.get(f"{server.base_url}/metrics", timeout=60).text
            return 'ticks_socket_receipts_total{type="mark_read",outcome="refused"}' in text

        for attempt in range(5):
            lock = sqlite3.connect(tmp_path / "node" / "ticks.sqlite", timeout=60, isolation_level=None)
            lock.execute("BEGIN IMMEDIATE")
            try:
                # A user who does not exist yet: her hello waits for the write that creates her.
                with connect(client.socket_url(f"carol-{attempt}"), open_timeout=60) as socket:
                    socket.send(json.dumps({"type": "mark_read", "request_id": "q1", "cid": "not a cid"}))
                    closed = False
                    while not refused():
                        try:
                            frame = json.loads(socket.recv(timeout=0.05))
                        except TimeoutError:
                            continue
                        except ConnectionClosed:
                            closed = True  # SQLite gave up on the lock first: try again
                            break
                        assert frame.get("type") != "health.check", "the hello came while the store was locked"
                    lock.execute("ROLLBACK")
                    if closed:
                        continue
                    first = json.loads(socket.recv(timeout=60))
                    # The hello comes first (or, past SQLite's 5 s busy timeout, the store's refusal).
                    assert first["type"] == "health.check" or "error" in first, first
                    return
            finally:
                if lock.in_transaction:
                    lock.execute("ROLLBACK")
                lock.close()
        raise AssertionError("in 5 tries, no socket's frame was read while its hello waited on the store")
    finally:
        assert server.stop() == 0, server.output()
