"""ticks-chat, the terminal client: driven through its standard input
(without a terminal it prints each line again whenever it changes), and on a
real terminal in tmux (the full screen, read with capture-pane).
"""

import os
import queue
import re
import secrets
import shutil
import subprocess
import threading
import time

import pytest
from conftest import TICKS_BIN, TicksProcess, free_port
from wire import Ticks

CHAT_BIN = os.environ.get("TICKS_CHAT_BIN", os.path.join(os.path.dirname(TICKS_BIN), "ticks-chat"))
BLUE_TICKS = "\x1b[94m✓✓\x1b[0m"
# tmux redraws colours its own way: the blue starts the same, the reset differs.
BLUE_ON_SCREEN = "\x1b[94m✓✓"


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
    # Every other member has read it: the server says so (R13), and the line shows it.
    chat.wait_for(lambda line: "hello group" in line and line.endswith(BLUE_TICKS + " 2 \x1b[94meveryone\x1b[0m"))

    chat.type("/receipts 1")
    chat.wait_for(lambda line: "receipts of [1]: read by 2, delivered to 2, read by everyone" in line)
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


def test_ticks_chat_explains_the_unread_count_and_marks_every_thread_read(ticks, client, unique, tmp_path):
    alice, bob = (f"{unique}-{name}" for name in ("alice", "bob"))
    client.upsert_users({"id": alice, "name": "Alice"}, {"id": bob, "name": "Bob"})
    cid = f"messaging:{unique}-t"
    client.create_channel(cid, [alice, bob], created_by=alice)
    client.send_message(cid, alice, "lunch?", message_id=f"{unique}-parent")

    chat = Chat(ticks, alice, cid, tmp_path / "outbox.sqlite")
    chat.wait_for(lambda line: "connected" in line)
    # bob answers in the thread only: after alice's cursor, and not counted in the channel (R7).
    client.send_message(cid, bob, "yes", message_id=f"{unique}-reply", parent_id=f"{unique}-parent")
    chat.type("/why")
    chat.wait_for(lambda line: line.startswith("unread 0"))
    chat.wait_for(lambda line: f"{unique}-reply not counted: a reply in its thread" in line)
    token = client.user_token(alice)
    assert [t["parent_message_id"] for t in client.call("GET", "/unread", token=token)["threads"]] == [f"{unique}-parent"]

    chat.type("/readthreads")
    chat.wait_for(lambda line: "1 thread marked read" in line)
    assert client.call("GET", "/unread", token=token)["threads"] == []
    chat.type("/quit")
    assert chat.process.wait(timeout=10) == 0


def test_ticks_chat_plays_a_voice_note_and_shows_who_played_it(ticks, client, unique, tmp_path):
    alice, bob, carol = (f"{unique}-{name}" for name in ("alice", "bob", "carol"))
    client.upsert_users({"id": alice, "name": "Alice"}, {"id": bob, "name": "Bob"}, {"id": carol, "name": "Carol"})
    cid = f"messaging:{unique}-v"
    client.create_channel(cid, [alice, bob, carol], created_by=bob)
    voice = f"{unique}-voice"
    client.send_message(cid, bob, "", message_id=voice,
                        attachments=[{"type": "voiceRecording", "asset_url": "https://example.com/v.m4a"}])

    chat = Chat(ticks, alice, cid, tmp_path / "outbox.sqlite")
    chat.wait_for(lambda line: "Bob: (voice note)" in line and "/play 1" in line)
    chat.wait_for(lambda line: "connected" in line)
    chat.type("/play 1")
    # alice's own connection hears her play (R14): the line shows it played (the event may
    # come before or after the command's own answer).
    chat.wait_for(lambda line: "Bob: (voice note)" in line and line.endswith("\x1b[94m▶ played\x1b[0m"))
    if "played [1]" not in chat.seen:
        chat.wait_for(lambda line: line == "played [1]")
    assert [r["user"]["id"] for r in client.receipts(voice)["receipts"] if r.get("played_at")] == [alice]
    client.call("POST", f"/messages/{voice}/played", {"user_id": carol})
    chat.wait_for(lambda line: "Bob: (voice note)" in line and line.endswith("\x1b[94m▶ played 2\x1b[0m"))
    chat.type("/receipts 1")
    chat.wait_for(lambda line: "played by 2" in line)

    chat.type("/quit")
    assert chat.process.wait(timeout=10) == 0


class Screen:
    """ticks-chat on a real terminal: a tmux session, read with capture-pane."""

    def __init__(self, name, command, tmp_path):
        self.name = name
        self.log = tmp_path / f"{name}-screens.txt"
        subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "120", "-y", "30", command], check=True)

    def text(self):
        """The screen, with its colours (escape codes) kept."""
        result = subprocess.run(["tmux", "capture-pane", "-p", "-e", "-t", self.name], capture_output=True, text=True)
        return result.stdout

    def wait_for(self, predicate, what, timeout=20):
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.text()
            if predicate(screen):
                with open(self.log, "a") as log:
                    log.write(f"--- {what}\n{screen}\n")
                return screen
            time.sleep(0.1)
        pytest.fail(f"the screen never showed {what}:\n{screen}")

    def type(self, text):
        subprocess.run(["tmux", "send-keys", "-t", self.name, "-l", text], check=True)
        subprocess.run(["tmux", "send-keys", "-t", self.name, "Enter"], check=True)

    def alive(self):
        return subprocess.run(["tmux", "has-session", "-t", self.name], capture_output=True).returncode == 0

    def close(self):
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)


def plain(screen):
    """The screen without colour codes."""
    return re.sub(r"\x1b\[[0-9;]*m", "", screen)


def row(screen, text):
    """The screen line holding `text` (colours kept), or ''."""
    return next((line for line in screen.splitlines() if text in plain(line)), "")


def test_ticks_chat_in_tmux_lists_channels_and_survives_a_restart_and_time_offline(tmp_path, unique):
    """The full-screen client as a user sees it: the channel list with unread
    badges and the total, a channel with live ticks, a server restart with a
    message written while it was down, and a time away during which others
    wrote and read: every message once, every count right."""
    if shutil.which("tmux") is None:
        if os.environ.get("CI"):
            pytest.fail("CI must run the terminal test: tmux is not installed (.ci/run installs it)")
        pytest.skip("tmux is not installed")
    key, secret = "tmuxkey", secrets.token_urlsafe(48)
    port = free_port()
    server = TicksProcess(tmp_path / "server", api_key=key, api_secret=secret, port=port)
    api = Ticks(server.base_url, key, secret)
    alice, bob, carol = (f"{unique}-{name}" for name in ("alice", "bob", "carol"))
    api.upsert_users({"id": alice, "name": "Alice"}, {"id": bob, "name": "Bob"}, {"id": carol, "name": "Carol"})
    trip, team, quiet = (f"messaging:{unique}-{name}" for name in ("trip", "team", "quiet"))
    api.create_channel(quiet, [alice, carol], created_by=alice)
    api.create_channel(trip, [alice, bob], created_by=alice)
    api.create_channel(team, [alice, bob, carol], created_by=carol)
    api.send_message(trip, bob, "pack the tent", message_id=f"{unique}-t1")
    api.send_message(trip, bob, "and the stove", message_id=f"{unique}-t2")
    api.send_message(team, carol, "retro moved", message_id=f"{unique}-m1")

    command = " ".join([CHAT_BIN, "--url", server.base_url, "--api-key", key, "--token", api.user_token(alice),
                        "--outbox", str(tmp_path / "alice.sqlite")])
    screen = Screen(f"ticks-{unique}", command, tmp_path)
    try:
        # The list: newest first, unread badges, the total in the header.
        shown = screen.wait_for(lambda s: "3 unread in 2 channels" in plain(s) and "retro moved" in plain(s),
                                "the channel list")
        lines = [plain(line) for line in shown.splitlines() if line.startswith("[")]
        assert "Bob, Carol (1)" in lines[0] and "retro moved" in lines[0]
        assert "Bob (2)" in lines[1] and "and the stove" in lines[1]
        assert "Carol" in lines[2] and "(no messages)" in lines[2]

        # A channel: what is on the screen is read; an own message gets its ticks live.
        screen.type("/open 2")
        screen.wait_for(lambda s: "Bob: pack the tent" in plain(s) and "1 unread in 1 channel" in plain(s),
                        "trip, read")
        screen.type("on my way")
        screen.wait_for(lambda s: plain(row(s, "on my way")).endswith("✓"), "sent")
        mine = api.query_channel(trip, user=alice)["messages"][-1]["id"]
        api.mark_delivered(bob, (trip, mine))
        screen.wait_for(lambda s: plain(row(s, "on my way")).endswith("✓✓"), "delivered")
        api.mark_read(trip, bob)
        screen.wait_for(lambda s: BLUE_ON_SCREEN in row(s, "on my way"), "read")

        # The server goes away: what alice writes waits, and is sent once when it is back.
        assert server.stop() == 0
        screen.wait_for(lambda s: "offline" in plain(s), "offline")
        screen.type("from the tunnel")
        screen.wait_for(lambda s: plain(row(s, "from the tunnel")).endswith("…"), "pending while offline")
        time.sleep(1.5)
        server = TicksProcess(tmp_path / "server", api_key=key, api_secret=secret, port=port)
        screen.wait_for(lambda s: plain(row(s, "from the tunnel")).endswith("✓") and "[connected]" in plain(s),
                        "sent after the restart", timeout=30)

        # Alice leaves; meanwhile the others write and read.
        screen.type("/quit")
        deadline = time.monotonic() + 10
        while screen.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not screen.alive(), "ticks-chat did not quit"
        tunnel = next(m for m in api.query_channel(trip, user=alice)["messages"] if m["text"] == "from the tunnel")
        api.send_message(trip, bob, "are you coming?", message_id=f"{unique}-t3")
        api.send_message(team, carol, "standup at 10", message_id=f"{unique}-m2")
        api.mark_read(trip, bob, message_id=tunnel["id"])

        # Back: the list caught up (team 2 unread, trip 1), each message once, the read shown.
        screen = Screen(f"ticks-{unique}-2", command, tmp_path)
        shown = screen.wait_for(lambda s: "3 unread in 2 channels" in plain(s) and "standup at 10" in plain(s)
                                and "are you coming?" in plain(s), "the list caught up")
        lines = [plain(line) for line in shown.splitlines() if line.startswith("[")]
        assert "Bob, Carol (2)" in lines[0] and "standup at 10" in lines[0]
        assert "Bob (1)" in lines[1] and "are you coming?" in lines[1]
        screen.type("/open 2")
        shown = screen.wait_for(lambda s: "Bob: are you coming?" in plain(s) and BLUE_ON_SCREEN in row(s, "from the tunnel"),
                                "trip caught up")
        for text in ("pack the tent", "and the stove", "on my way", "from the tunnel", "are you coming?"):
            assert plain(shown).count(text) == 1, f"{text!r} shown {plain(shown).count(text)} times:\n{shown}"
        texts = [m["text"] for m in api.query_channel(trip, user=alice, messages_limit=100)["messages"]]
        assert texts == ["pack the tent", "and the stove", "on my way", "from the tunnel", "are you coming?"]

        # Private reads, from the client.
        screen.type("/privacy read off")
        screen.wait_for(lambda s: "read receipts off, delivery receipts on" in plain(s), "privacy set")
        user = api.query_users({"id": {"$in": [alice]}})["users"][0]
        assert user["privacy_settings"]["read_receipts"]["enabled"] is False
        screen.type("/quit")
    finally:
        screen.close()
        server.stop()
