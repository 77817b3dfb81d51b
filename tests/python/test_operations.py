"""Running Ticks in production (docs/operations.md): online backup and restore
of a SQLite data folder under receipt load, the data folder's lock, and the
PostgreSQL dump/restore round trip, all with the real `ticks` binary."""

import os
import secrets
import sqlite3
import subprocess
import threading
import time

import pytest
from conftest import POSTGRES_URL, TICKS_BIN, TicksProcess, psql
from receipt_load import MarkLoad
from wire import Ticks

# Readers, and the writer of every message: a reader's own message would move their read cursor (R4).
MEMBERS = [f"op{index}" for index in range(4)]
WRITER = "opwriter"


def credentials():
    return {"api_key": "opskey", "api_secret": secrets.token_urlsafe(48)}


def ticks(*arguments, check=True):
    """Runs `ticks ARGUMENTS`; the completed process."""
    result = subprocess.run([TICKS_BIN, *arguments], capture_output=True, text=True, timeout=300)
    if check:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


def populate(api, channels, messages_per_channel):
    """Channels of MEMBERS and WRITER with WRITER's messages (long texts: a database of many pages);
    the readers have read none of them."""
    api.upsert_users(*MEMBERS, WRITER)
    order = {}
    for cid in channels:
        api.create_channel(cid, [*MEMBERS, WRITER], WRITER)
        order[cid] = []
        for index in range(messages_per_channel):
            message_id = f"{cid.split(':')[1]}-{index}"
            api.send_message(cid, WRITER, f"{index} " + "x" * 3000, message_id=message_id)
            order[cid].append(message_id)
    return order


def receipt_load(api, order):
    """Marks going on through `api`, and the writer sending a message now and then; a client per thread."""
    local = threading.local()

    def client():
        if not hasattr(local, "client"):
            local.client = Ticks(api.base_url, api.api_key, api.api_secret)
        return local.client

    def send_now_and_then(step, thread, cid):
        if step % 7 == thread:
            client().send_message(cid, WRITER, "during the load")

    return MarkLoad(lambda cid, user, message_id: client().mark_read(cid, user, message_id), order, MEMBERS,
                    after_mark=send_now_and_then)


def read_states(api, cid):
    """The channel's messages ((id, author) in order) and its members' read states, by user."""
    state = api.query_channel(cid, messages_limit=300)
    messages = [(message["id"], message["user"]["id"]) for message in state["messages"]]
    return messages, {read["user"]["id"]: read for read in state["read"]}


def test_a_backup_under_receipt_load_restores_every_acknowledged_receipt(tmp_path):
    keys = credentials()
    channels = [f"messaging:bk{index}" for index in range(3)]
    original = TicksProcess(tmp_path / "original", **keys)
    try:
        api = Ticks(original.base_url, keys["api_key"], keys["api_secret"])
        order = populate(api, channels, 60)
        backup = tmp_path / "ticks-backup.sqlite"
        with receipt_load(api, order) as load:
            load.wait_for(40)
            began = time.monotonic()
            # One page a step: hundreds of steps while the marks go on.
            result = ticks("backup", "--data-dir", original.data_dir, "--to", str(backup), "--pages-per-step", "1")
            load.wait_for(1, after=time.monotonic())
        assert not load.errors, load.errors
        steps = int(result.stdout.split(" steps")[0].rsplit(" ", 1)[1])
        assert steps > 100, result.stdout
        final = {cid: read_states(api, cid) for cid in channels}
    finally:
        assert original.stop() == 0, original.output()

    # Restored into a fresh folder, a server with the same credentials serves it.
    restored_dir = tmp_path / "restored"
    ticks("restore", "--from", str(backup), "--data-dir", str(restored_dir))
    restored = TicksProcess(restored_dir, **keys)
    try:
        api = Ticks(restored.base_url, keys["api_key"], keys["api_secret"])
        before = {}
        for ack in load.acks():
            if ack.at < began:
                before[(ack.cid, ack.user)] = max(before.get((ack.cid, ack.user), -1), ack.index)
        assert len(before) >= 6, before
        for cid in channels:
            messages, reads = read_states(api, cid)
            ids = [message_id for message_id, _ in messages]
            final_ids = [message_id for message_id, _ in final[cid][0]]
            # One moment's state: the messages are those of the original up to some point.
            assert final_ids[: len(ids)] == ids
            for user in MEMBERS:
                read = reads[user]
                position = ids.index(read["last_read_message_id"]) if "last_read_message_id" in read else -1
                # Every mark acknowledged before the backup began is there…
                if (cid, user) in before:
                    assert position >= ids.index(order[cid][before[(cid, user)]]), (cid, user, read)
                # …and no cursor is past where the original's ended.
                final_read = final[cid][1][user].get("last_read_message_id")
                assert position <= (final_ids.index(final_read) if final_read else -1), (cid, user, read)
                # The kept unread count is R7 counted afresh: the others' messages after the cursor.
                expected = sum(1 for _, author in messages[position + 1:] if author != user)
                assert read["unread_messages"] == expected, (cid, user, read, expected)
    finally:
        assert restored.stop() == 0, restored.output()

    # The totals kept per user equal their members' counts, counted afresh from the messages (R7).
    with sqlite3.connect(restored_dir / "ticks.sqlite") as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        wrong = db.execute(
            """
            SELECT m.user_id, m.unread, (SELECT COUNT(*) FROM message g
              WHERE g.channel_pk = m.channel_pk AND g.seq > m.read_seq AND g.user_id <> m.user_id AND g.hidden = 0)
            FROM member m
            """).fetchall()
        assert [row for row in wrong if row[1] != row[2]] == []
        totals = db.execute(
            """
            SELECT u.id, u.unread_messages, (SELECT COALESCE(SUM(m.unread), 0) FROM member m WHERE m.user_id = u.id)
            FROM app_user u
            """).fetchall()
        assert [row for row in totals if row[1] != row[2]] == []


def test_the_data_folder_has_one_server_and_no_restore_under_it(tmp_path):
    keys = credentials()
    server = TicksProcess(tmp_path / "folder", **keys)
    try:
        api = Ticks(server.base_url, keys["api_key"], keys["api_secret"])
        api.upsert_users("keeper")
        backup = tmp_path / "b.sqlite"
        ticks("backup", "--data-dir", server.data_dir, "--to", str(backup), "--quiet")
        refused = ticks("restore", "--from", str(backup), "--data-dir", server.data_dir, "--replace", check=False)
        assert refused.returncode != 0
        assert f"(pid {server.process.pid}) is using the data folder" in refused.stderr, refused.stderr
        second = subprocess.run(
            [TICKS_BIN, "serve", "--data-dir", server.data_dir, "--port", "0"], capture_output=True, text=True,
            timeout=60)
        assert second.returncode != 0 and "is using the data folder" in second.stderr, second.stderr
        # The running server was not disturbed.
        api.upsert_users("after")
        assert {user["id"] for user in api.query_users({"id": {"$in": ["keeper", "after"]}})["users"]} == {
            "keeper", "after"}
    finally:
        assert server.stop() == 0, server.output()
    # Stopped: the restore may replace the database, keeping the old one beside it.
    ticks("restore", "--from", str(backup), "--data-dir", server.data_dir, "--replace")
    assert len(list((tmp_path / "folder").glob("ticks.sqlite.before-restore-*[0-9]"))) == 1
    server = TicksProcess(tmp_path / "folder", **keys)
    try:
        api = Ticks(server.base_url, keys["api_key"], keys["api_secret"])
        assert [user["id"] for user in api.query_users({"id": {"$in": ["keeper", "after"]}})["users"]] == ["keeper"]
    finally:
        assert server.stop() == 0, server.output()


def test_restore_refuses_what_is_not_a_sound_ticks_backup(tmp_path):
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database at all" * 100)
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE notes (text TEXT)")
    keys = credentials()
    server = TicksProcess(tmp_path / "source", **keys)
    Ticks(server.base_url, keys["api_key"], keys["api_secret"]).upsert_users("someone")
    good = tmp_path / "good.sqlite"
    ticks("backup", "--data-dir", server.data_dir, "--to", str(good), "--quiet")
    assert server.stop() == 0
    torn = tmp_path / "torn.sqlite"
    data = good.read_bytes()
    torn.write_bytes(data[: len(data) // 2])
    newer = tmp_path / "newer.sqlite"
    newer.write_bytes(data)
    with sqlite3.connect(newer) as db:
        db.execute("INSERT INTO grdb_migrations (identifier) VALUES ('v999-from-the-future')")
    cases = {
        junk: "is damaged", foreign: "is not a Ticks database", torn: "is damaged", newer: "comes from a newer Ticks",
        tmp_path / "absent.sqlite": "there is no backup"}
    for file, reason in cases.items():
        target = tmp_path / f"into-{file.stem}"
        result = ticks("restore", "--from", str(file), "--data-dir", str(target), check=False)
        assert result.returncode != 0 and reason in result.stderr, (file, result.stderr)
        assert not (target / "ticks.sqlite").exists(), file


def test_a_postgres_dump_restores_into_a_working_database(tmp_path):
    """docs/operations.md's recipe: pg_dump of a live database, pg_restore into a new one, a server on it."""
    if POSTGRES_URL is None:
        if os.environ.get("CI"):
            pytest.fail("CI must run the PostgreSQL tests: TICKS_TEST_POSTGRES_URL is not set")
        pytest.skip("TICKS_TEST_POSTGRES_URL is not set")
    keys = credentials()
    name = f"ops_{secrets.token_hex(4)}"
    schema = f"{name}_s"
    psql(f"CREATE SCHEMA {schema}")
    copy_url = POSTGRES_URL.rsplit("/", 1)[0] + f"/{name}_copy"
    dump = tmp_path / "ticks.dump"
    try:
        server = TicksProcess(tmp_path / "pg", extra_args=["--postgres-url", f"{POSTGRES_URL}?schema={schema}"], **keys)
        try:
            api = Ticks(server.base_url, keys["api_key"], keys["api_secret"])
            order = populate(api, ["messaging:pgdump"], 8)
            api.mark_read("messaging:pgdump", "op1", order["messaging:pgdump"][5])
            api.mark_delivered("op2", ("messaging:pgdump", order["messaging:pgdump"][7]))
            # Online: the server keeps running while the dump is taken.
            subprocess.run(
                ["pg_dump", "--format=custom", f"--schema={schema}", f"--file={dump}", POSTGRES_URL], check=True)
            expected = read_states(api, "messaging:pgdump")
        finally:
            assert server.stop() == 0, server.output()
        psql(f"CREATE DATABASE {name}_copy")
        subprocess.run(["pg_restore", "--no-owner", f"--dbname={copy_url}", str(dump)], check=True)
        server = TicksProcess(
            tmp_path / "pg-restored", extra_args=["--postgres-url", f"{copy_url}?schema={schema}"], **keys)
        try:
            api = Ticks(server.base_url, keys["api_key"], keys["api_secret"])
            messages, reads = read_states(api, "messaging:pgdump")
            assert messages == expected[0]
            for user in MEMBERS:
                for field in ("last_read_message_id", "last_read", "unread_messages", "last_delivered_message_id"):
                    assert reads[user].get(field) == expected[1][user].get(field), (user, field)
            receipts = api.receipts(order["messaging:pgdump"][5])
            assert receipts, receipts
        finally:
            assert server.stop() == 0, server.output()
    finally:
        psql(f"DROP SCHEMA {schema} CASCADE")
        psql(f"DROP DATABASE IF EXISTS {name}_copy")
