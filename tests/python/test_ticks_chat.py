"""ticks-chat, the terminal client, driven through its standard input.

Without a terminal it prints each message line again whenever it changes,
which is what this test reads.
"""

import os
import queue
import subprocess
import threading
import time

import pytest
from conftest import TICKS_BIN

CHAT_BIN = os.environ.get("TICKS_CHAT_BIN", os.path.join(os.path.dirname(TICKS_BIN), "ticks-chat"))
BLUE_TICKS = "\x1b[94m✓✓\x1b[0m"


class Chat:
    def __init__(self, ticks, user, cid, outbox):
        env = dict(os.environ, TICKS_API_KEY=ticks.api_key, TICKS_API_SECRET=ticks.api_secret)
        token = subprocess.run([TICKS_BIN, "token", user], capture_output=True, text=True, env=env, check=True)
        self.lines = queue.Queue()
        self.process = subprocess.Popen(
            [CHAT_BIN, "--url", ticks.base_url, "--api-key", ticks.api_key, "--token", token.stdout.strip(),
             "--channel", cid, "--outbox", str(outbox)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
        )
        threading.Thread(target=self._read, daemon=True).start()
        self.seen = []

    def _read(self):
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def type(self, text):
        self.process.stdin.write(text + "\n")
        self.process.stdin.flush()

    def wait_for(self, predicate, timeout=15):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.1)
            except queue.Empty:
                continue
            self.seen.append(line)
            if predicate(line):
                return line
        pytest.fail(f"no such line within {timeout}s; saw: {self.seen}")


def test_ticks_chat_shows_sent_delivered_read_and_the_count(ticks, client, unique, tmp_path):
    alice, bob, carol = (f"{unique}-{name}" for name in ("alice", "bob", "carol"))
    client.upsert_users({"id": alice, "name": "Alice"}, {"id": bob, "name": "Bob"}, {"id": carol, "name": "Carol"})
    cid = f"messaging:{unique}-g"
    client.create_channel(cid, [alice, bob, carol], created_by=alice)

    chat = Chat(ticks, alice, cid, tmp_path / "outbox.sqlite")
    chat.wait_for(lambda line: "connected" in line)
    chat.type("hello group")
    chat.wait_for(lambda line: "hello group" in line and line.endswith("  ✓"))
    message_id = client.query_channel(cid, user=alice)["messages"][-1]["id"]

    client.mark_delivered(bob, (cid, message_id))
    chat.wait_for(lambda line: "hello group" in line and line.endswith("  ✓✓"))
    client.mark_read(cid, bob)
    chat.wait_for(lambda line: "hello group" in line and line.endswith(BLUE_TICKS + " 1"))
    client.mark_read(cid, carol)
    chat.wait_for(lambda line: "hello group" in line and line.endswith(BLUE_TICKS + " 2"))

    chat.type("/receipts 1")
    chat.wait_for(lambda line: "read by Carol at" in line)
    chat.wait_for(lambda line: "read by Bob at" in line)

    # A message from bob is shown, and read because it is on the screen.
    client.send_message(cid, bob, "count me in", message_id=f"{unique}-from-bob")
    chat.wait_for(lambda line: "Bob: count me in" in line)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        reads = {r["user"]["id"]: r for r in client.query_channel(cid, user=alice)["read"]}
        if reads[alice]["unread_messages"] == 0:
            break
        time.sleep(0.1)
    assert reads[alice]["unread_messages"] == 0
    assert reads[alice]["last_read_message_id"] == f"{unique}-from-bob"

    chat.type("/quit")
    assert chat.process.wait(timeout=10) == 0
