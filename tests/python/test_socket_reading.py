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
        with connect(client.socket_url("bob"), open_timeout=30) as socket:
            assert json.loads(socket.recv(timeout=30))["type"] == "health.check"
            lock = sqlite3.connect(tmp_path / "node" / "ticks.sqlite", timeout=30, isolation_level=None)
            try:
                lock.execute("BEGIN IMMEDIATE")
                socket.send(json.dumps({"type": "mark_read", "request_id": "q1", "cid": "messaging:r"}))
                socket.send(json.dumps({"type": "health.check"}))
                frames = []
                while True:
                    frame = json.loads(socket.recv(timeout=60))
                    frames.append(frame)
                    if frame.get("type") in ("health.check", "ack"):
                        break
                assert frames[-1]["type"] == "health.check", \
                    f"the receipt's ack came before the health check's answer: {frames}"
            finally:
                lock.execute("ROLLBACK")
                lock.close()
            # Once the store is free the receipt is written and acknowledged, in order.
            while True:
                frame = json.loads(socket.recv(timeout=60))
                if frame.get("type") == "ack":
                    break
            assert frame["request_id"] == "q1" and "error" not in frame, frame
            assert frame["event"]["type"] == "message.read"
    finally:
        assert server.stop() == 0, server.output()
