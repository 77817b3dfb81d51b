"""Running Ticks in production (docs/operations.md): online backup and restore
of a SQLite data folder under receipt load, the data folder's lock, and the
PostgreSQL recipes as that page writes them (the dump/restore round trip,
point-in-time recovery), all with the real `ticks` binary."""

import datetime
import os
import re
import secrets
import shlex
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import threading
import time
import urllib.request
from urllib.parse import urlsplit

import pytest
from conftest import POSTGRES_URL, TICKS_BIN, TicksProcess, free_port, psql
from dbfaults import POSTGRES_SCRIPT, ROOT, postgres_installed
from receipt_load import MarkLoad
from wire import Ticks

# Readers, and the writer of every message: a reader's own message would move their read cursor (R4).
MEMBERS = [f"op{index}" for index in range(4)]
WRITER = "opwriter"
# The section of docs/operations.md whose recipes the PostgreSQL tests run as written.
RECIPES = "### PostgreSQL: `pg_dump` and point-in-time recovery"


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

    # The counts per member (kept as of the channel's position) are R7 counted afresh from the
    # messages (a user's totals are their sums).
    with sqlite3.connect(restored_dir / "ticks.sqlite") as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        wrong = db.execute(
            """
            SELECT m.user_id, m.unread + (SELECT c.counted FROM channel c WHERE c.pk = m.channel_pk) - m.counted_at,
              (SELECT COUNT(*) FROM message g
              WHERE g.channel_pk = m.channel_pk AND g.seq > m.read_seq AND g.user_id <> m.user_id AND g.hidden = 0)
            FROM member m
            """).fetchall()
        assert [row for row in wrong if row[1] != row[2]] == []


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


def recipe_blocks():
    """The fenced blocks of docs/operations.md's PostgreSQL section, in order, as (language, lines): the
    commands and settings the tests run, without comments and blank lines."""
    with open(os.path.join(ROOT, "docs", "operations.md")) as doc:
        lines = doc.read().splitlines()
    blocks, block, language = [], None, None
    for line in lines[lines.index(RECIPES) + 1:]:
        stripped = line.strip()
        if block is None:
            if line.startswith("## ") or line.startswith("### "):
                break
            if stripped.startswith("```"):
                language, block = stripped[3:], []
        elif stripped == "```":
            blocks.append((language, block))
            block = None
        elif stripped and not stripped.startswith("#"):
            block.append(stripped)
    return blocks


def recipe(index, language, first_words):
    """The section's block `index`, checked to be the one meant: its language and its lines' first words."""
    found_language, lines = recipe_blocks()[index]
    assert (found_language, [line.split()[0] for line in lines]) == (language, first_words), (index, lines)
    return lines


def substituted(text, replacements):
    """`text` with each key of `replacements` replaced by its value, the longest keys first, in one pass."""
    pattern = re.compile("|".join(re.escape(key) for key in sorted(replacements, key=len, reverse=True)))
    return pattern.sub(lambda match: replacements[match.group(0)], text)


def commands(lines, replacements):
    """The argv of each shell line, as the shell splits it, with `replacements` made in each argument."""
    return [[substituted(argument, replacements) for argument in shlex.split(line)] for line in lines]


def client_environment(url):
    """The environment with libpq's defaults pointing at `url`'s server: what `createdb` and `pg_basebackup`
    without connection options connect to."""
    parts = urlsplit(url)
    return dict(os.environ, PGHOST=parts.hostname, PGPORT=str(parts.port), PGUSER=parts.username)


def run_recipe_command(argv, **options):
    """Runs one command of the recipe; it must exit 0."""
    result = subprocess.run(argv, capture_output=True, text=True, timeout=300, **options)
    assert result.returncode == 0, (argv, result.returncode, result.stdout + result.stderr)
    return result


def require_test_database():
    if POSTGRES_URL is None:
        if os.environ.get("CI"):
            pytest.fail("CI must run the PostgreSQL tests: TICKS_TEST_POSTGRES_URL is not set")
        pytest.skip("TICKS_TEST_POSTGRES_URL is not set")


def dump_round_trip(tmp_path, lines, node_url, replacements):
    """The dump recipe `lines` (pg_dump, createdb, pg_restore, ticks serve) run as written, with `replacements`,
    around a node on `node_url`: every command exits 0, and a node on the copy serves what the original did."""
    keys = credentials()
    dump, create, restore, serve = commands(lines, replacements)
    assert serve[:2] == ["ticks", "serve"], serve
    environment = client_environment(POSTGRES_URL)
    server = TicksProcess(tmp_path / "pg", extra_args=["--postgres-url", node_url], **keys)
    try:
        api = Ticks(server.base_url, keys["api_key"], keys["api_secret"])
        order = populate(api, ["messaging:pgdump"], 8)
        api.mark_read("messaging:pgdump", "op1", order["messaging:pgdump"][5])
        api.mark_delivered("op2", ("messaging:pgdump", order["messaging:pgdump"][7]))
        # Online: the node keeps running while the dump is taken.
        run_recipe_command(dump, cwd=tmp_path, env=environment)
        expected = read_states(api, "messaging:pgdump")
        expected_receipts = api.receipts(order["messaging:pgdump"][5])
    finally:
        assert server.stop() == 0, server.output()
    run_recipe_command(create, cwd=tmp_path, env=environment)
    run_recipe_command(restore, cwd=tmp_path, env=environment)
    server = TicksProcess(tmp_path / "pg-restored", extra_args=serve[2:], **keys)
    try:
        api = Ticks(server.base_url, keys["api_key"], keys["api_secret"])
        messages, reads = read_states(api, "messaging:pgdump")
        assert messages == expected[0]
        for user in MEMBERS:
            for field in ("last_read_message_id", "last_read", "unread_messages", "last_delivered_message_id"):
                assert reads[user].get(field) == expected[1][user].get(field), (user, field)
        receipts = api.receipts(order["messaging:pgdump"][5])
        assert receipts["receipts"] and receipts["receipts"] == expected_receipts["receipts"], receipts
    finally:
        assert server.stop() == 0, server.output()


def test_a_postgres_dump_of_public_restores_with_every_command_exiting_0(tmp_path):
    """docs/operations.md's first dump recipe, on a database of its own whose tables are in `public` (a URL
    without `?schema=`): pg_dump of the live database, createdb, pg_restore, a node on the copy."""
    require_test_database()
    name = f"ops_{secrets.token_hex(4)}"
    server_url = POSTGRES_URL.rsplit("/", 1)[0]
    psql(f"CREATE DATABASE {name}")
    try:
        dump_round_trip(
            tmp_path, recipe(0, "sh", ["pg_dump", "createdb", "pg_restore", "ticks"]), f"{server_url}/{name}", {
                "postgres://ticks@db/ticks_restored": f"{server_url}/{name}_copy",
                "postgres://ticks@db/ticks": f"{server_url}/{name}", "ticks_restored": f"{name}_copy"})
        # The node's tables were in public, and the copy's are.
        copy = subprocess.run(
            ["psql", f"{server_url}/{name}_copy", "-qAtc",
             "SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename = 'message'"],
            check=True, capture_output=True, text=True).stdout.strip()
        assert copy == "1"
    finally:
        psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        psql(f"DROP DATABASE IF EXISTS {name}_copy WITH (FORCE)")


def test_a_postgres_dump_restores_into_a_working_database(tmp_path):
    """docs/operations.md's second dump recipe, for a URL with `?schema=NAME`: pg_dump --schema=NAME of the
    live database, createdb, pg_restore, a node on the copy with the same `?schema=`."""
    require_test_database()
    name = f"ops_{secrets.token_hex(4)}"
    schema = f"{name}_s"
    server_url = POSTGRES_URL.rsplit("/", 1)[0]
    psql(f"CREATE SCHEMA {schema}")
    try:
        dump_round_trip(
            tmp_path, recipe(1, "sh", ["pg_dump", "createdb", "pg_restore", "ticks"]),
            f"{POSTGRES_URL}?schema={schema}", {
                "postgres://ticks@db/ticks_restored": f"{server_url}/{name}_copy", "postgres://ticks@db/ticks":
                POSTGRES_URL, "ticks_restored": f"{name}_copy", "NAME": schema})
    finally:
        psql(f"DROP SCHEMA {schema} CASCADE")
        psql(f"DROP DATABASE IF EXISTS {name}_copy WITH (FORCE)")


# Short, so the test waits seconds for the last segment; the recipe says 60.
ARCHIVE_TIMEOUT = 5


def as_cluster_owner(argv):
    """`argv` run as the cluster's owner: the postgres user when we are root (as in scripts/postgres)."""
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else list(argv)


def cluster(*arguments):
    """scripts/postgres ARGUMENTS; what it prints."""
    return run_recipe_command([POSTGRES_SCRIPT, *arguments]).stdout.strip()


def query(url, sql):
    return run_recipe_command(["psql", url, "-qAtc", sql]).stdout.strip()


def test_point_in_time_recovery_serves_the_receipts_before_the_target_and_none_after(tmp_path):
    """docs/operations.md's point-in-time recovery, steps 1 to 3, on throwaway clusters: the receipts committed
    before the target time are served after the recovery, and none committed after it."""
    if not postgres_installed():
        if os.environ.get("CI"):
            pytest.fail("CI must run the point-in-time recovery test: PostgreSQL is not installed")
        pytest.skip("PostgreSQL is not installed")
    archive_settings = recipe(2, "ini", ["wal_level", "archive_mode", "archive_command", "archive_timeout"])
    (base_backup,) = recipe(3, "sh", ["pg_basebackup"])
    (unpack,) = recipe(4, "sh", ["tar"])
    recovery_settings = recipe(5, "ini", ["restore_command", "recovery_target_time", "recovery_target_action"])
    (signal_file,) = recipe(6, "sh", ["touch"])
    keys = credentials()
    cid = "messaging:pitr"
    # Under /tmp, owned by the postgres user when we are root: its clusters, archive and backup live there.
    top = tempfile.mkdtemp(prefix="ticks-pitr.")
    if os.geteuid() == 0:
        shutil.chown(top, "postgres")
    original, archive, base, restored = (os.path.join(top, folder) for folder in ("original", "archive", "base",
                                                                                  "restored"))
    for folder in (archive, restored):
        os.mkdir(folder, 0o700)
        if os.geteuid() == 0:
            shutil.chown(folder, "postgres")
    replacements = {"/archive": archive, "/backups/base": base, "$PGDATA": restored,
                    "archive_timeout = 60": f"archive_timeout = {ARCHIVE_TIMEOUT}"}
    started = []
    try:
        # Step 1: a cluster that archives its log.
        port = free_port()
        url = cluster("start", original, str(port))
        started.append(original)
        with open(os.path.join(original, "postgresql.conf"), "a") as conf:
            conf.writelines(substituted(line, replacements) + "\n" for line in archive_settings)
        cluster("stop", original)
        cluster("start", original, str(port))
        assert query(url, "SHOW archive_mode") == "on"
        assert query(url, "SHOW archive_timeout") == f"{ARCHIVE_TIMEOUT}s"

        # A node on it (tables in public), its messages, then step 2's base backup while it runs.
        server = TicksProcess(tmp_path / "node", extra_args=["--postgres-url", url], **keys)
        try:
            api = Ticks(server.base_url, keys["api_key"], keys["api_secret"])
            ids = populate(api, [cid], 10)[cid]
            for argv in commands([base_backup], replacements):
                run_recipe_command(as_cluster_owner(argv), env=client_environment(url))
            # Receipts before the target (after the base backup: only the archived log holds them)…
            api.mark_read(cid, "op1", ids[3])
            api.mark_delivered("op2", (cid, ids[3]))
            time.sleep(1)
            target = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f+00")
            time.sleep(1)
            # …and after it.
            api.mark_read(cid, "op1", ids[7])
            api.mark_read(cid, "op3", ids[7])
            api.mark_delivered("op2", (cid, ids[7]))
            api.send_message(cid, WRITER, "after the target", message_id="pitr-after")
            assert {receipt["user"]["id"] for receipt in api.receipts(ids[7])["receipts"]} == {"op1", "op2", "op3"}
            # archive_timeout archives the segment that holds them (nothing calls pg_switch_wal()).
            last = query(url, "SELECT pg_walfile_name(pg_current_wal_lsn())")
            waited = time.monotonic()
            while not os.path.exists(os.path.join(archive, last)):
                assert time.monotonic() - waited < ARCHIVE_TIMEOUT + 25, f"{last} not archived: {os.listdir(archive)}"
                time.sleep(0.2)
            print(f"\n{last} archived {time.monotonic() - waited:.1f} s after the last write "
                  f"(archive_timeout = {ARCHIVE_TIMEOUT} s)")
        finally:
            assert server.stop() == 0, server.output()
        cluster("stop", original)
        started.remove(original)

        # Step 3: the base backup unpacked into an empty data directory, the recovery settings, recovery.signal.
        replacements["2026-11-26 09:15:00+00"] = target
        for argv in commands([unpack], replacements):
            run_recipe_command(as_cluster_owner(argv))
        with open(os.path.join(restored, "postgresql.conf"), "a") as conf:
            conf.writelines(substituted(line, replacements) + "\n" for line in recovery_settings)
        for argv in commands([signal_file], replacements):
            run_recipe_command(as_cluster_owner(argv))
        port = free_port()
        url = cluster("start", restored, str(port))
        started.append(restored)
        waited = time.monotonic()
        while query(url, "SELECT pg_is_in_recovery()") != "f":
            assert time.monotonic() - waited < 120, "still in recovery after 120 s (paused at the target?)"
            time.sleep(0.2)

        server = TicksProcess(tmp_path / "recovered", extra_args=["--postgres-url", url], **keys)
        try:
            api = Ticks(server.base_url, keys["api_key"], keys["api_secret"])
            messages, reads = read_states(api, cid)
            assert [message_id for message_id, _ in messages] == ids  # not the message sent after the target
            assert (reads["op1"].get("last_read_message_id"), reads["op1"]["unread_messages"]) == (ids[3], 6)
            assert (reads["op3"].get("last_read_message_id"), reads["op3"]["unread_messages"]) == (None, 10)
            assert reads["op2"].get("last_delivered_message_id") == ids[3]
            receipts = {receipt["user"]["id"]: receipt for receipt in api.receipts(ids[3])["receipts"]}
            assert set(receipts) == {"op1", "op2"}, receipts
            assert "read_at" in receipts["op1"] and "read_at" not in receipts["op2"], receipts
            assert "delivered_at" in receipts["op2"], receipts
            assert api.receipts(ids[7])["receipts"] == []
            # The recovered database takes writes: the node marks read.
            api.mark_read(cid, "op3", ids[9])
            assert read_states(api, cid)[1]["op3"]["unread_messages"] == 0
        finally:
            assert server.stop() == 0, server.output()
    finally:
        for folder in started:
            subprocess.run([POSTGRES_SCRIPT, "stop", folder], capture_output=True, timeout=120)
        for folder in ("original", "restored"):
            log = os.path.join(top, folder, "server.log")
            if os.path.exists(log):
                shutil.copy(log, tmp_path / f"postgres-{folder}.log")
        shutil.rmtree(top, ignore_errors=True)


def test_a_node_on_a_server_in_recovery_says_so_and_waits_for_its_promotion(tmp_path):
    """A node started on a server still in recovery (here a standby; a point-in-time recovery is one until it
    promotes) takes no migrations, writes or LISTEN there: it says so in plain words and waits, not listening
    yet, and stops when asked to; once the server is promoted it starts and serves."""
    if not postgres_installed():
        if os.environ.get("CI"):
            pytest.fail("CI must run the recovery test: PostgreSQL is not installed")
        pytest.skip("PostgreSQL is not installed")
    keys = credentials()
    top = tempfile.mkdtemp(prefix="ticks-standby.")
    if os.geteuid() == 0:
        shutil.chown(top, "postgres")
    primary, standby = os.path.join(top, "primary"), os.path.join(top, "standby")
    started = []
    node = None
    try:
        primary_url = cluster("start", primary, str(free_port()))
        started.append(primary)
        # A streaming standby of it: in recovery until promoted.
        run_recipe_command(as_cluster_owner(["pg_basebackup", "-D", standby, "-R", "-X", "stream", "-d",
                                             primary_url]))
        standby_url = cluster("start", standby, str(free_port()))
        started.append(standby)
        assert query(standby_url, "SELECT pg_is_in_recovery()") == "t"

        port = free_port()
        data = tmp_path / "node"
        data.mkdir()
        output = data / "stdout.txt"
        env = dict(os.environ, TICKS_API_KEY=keys["api_key"], TICKS_API_SECRET=keys["api_secret"])
        with open(output, "w") as sink:
            node = subprocess.Popen(
                [TICKS_BIN, "serve", "--port", str(port), "--data-dir", str(data), "--postgres-url", standby_url],
                stdout=sink, stderr=subprocess.STDOUT, env=env)
        waited = time.monotonic()
        while "in recovery" not in output.read_text():
            assert node.poll() is None, output.read_text()
            assert time.monotonic() - waited < 60, output.read_text()
            time.sleep(0.1)
        time.sleep(1)
        said = output.read_text()
        assert node.poll() is None, said
        assert "waiting for it to be promoted" in said and "Generic description" not in said, said
        # Nothing else tries the store meanwhile: the event bus listens only once it is promoted.
        assert "event bus listener lost" not in said, said
        with pytest.raises(OSError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)

        # A node asked to stop while it waits stops at once (exit 0), having touched nothing.
        stopped_data = tmp_path / "stopped"
        stopped_data.mkdir()
        stopped_output = stopped_data / "stdout.txt"
        with open(stopped_output, "w") as sink:
            stopped = subprocess.Popen(
                [TICKS_BIN, "serve", "--port", str(free_port()), "--data-dir", str(stopped_data), "--postgres-url",
                 standby_url], stdout=sink, stderr=subprocess.STDOUT, env=env)
        try:
            waited = time.monotonic()
            while "in recovery" not in stopped_output.read_text():
                assert stopped.poll() is None, stopped_output.read_text()
                assert time.monotonic() - waited < 60, stopped_output.read_text()
                time.sleep(0.1)
            stopped.send_signal(signal.SIGTERM)
            assert stopped.wait(timeout=15) == 0, stopped_output.read_text()
            assert "stopped before serving" in stopped_output.read_text(), stopped_output.read_text()
        finally:
            if stopped.poll() is None:
                stopped.kill()
                stopped.wait()

        query(standby_url, "SELECT pg_promote()")
        waited = time.monotonic()
        while True:
            assert node.poll() is None, output.read_text()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() - waited < 60, output.read_text()
            time.sleep(0.2)
        assert "out of recovery" in output.read_text(), output.read_text()
        api = Ticks(f"http://127.0.0.1:{port}", keys["api_key"], keys["api_secret"])
        api.upsert_users("promoted")
        api.create_channel("messaging:promoted", ["promoted"], "promoted")
        assert api.query_channel("messaging:promoted")["channel"]["id"] == "promoted"
    finally:
        exit_code = 0
        if node is not None and node.poll() is None:
            node.send_signal(signal.SIGTERM)
            try:
                exit_code = node.wait(timeout=30)
            except subprocess.TimeoutExpired:
                node.kill()
                exit_code = node.wait()
        for folder in reversed(started):
            cluster("stop", folder)
        shutil.rmtree(top, ignore_errors=True)
    assert exit_code == 0, output.read_text()
