"""The operator's destructive paths (docs/operations.md, "Back up and restore",
"Files and permissions"), with the real `ticks` binary on copies of a real
data folder: `ticks backup` and `ticks restore` never delete or overwrite
anything they cannot prove is theirs, every file Ticks writes is 0600 and its
data folder 0700 whatever the umask, `ticks status` sends a token that soon
expires, and no log carries a receiver URL's credentials."""

import base64
import contextlib
import fcntl
import http.server
import json
import os
import pwd
import secrets
import shutil
import sqlite3
import stat
import subprocess
import tempfile
import threading
import time

import pytest
from conftest import TICKS_BIN, TicksProcess, free_port
from wire import Ticks

CHANNEL = "messaging:safety"


def credentials():
    return {"api_key": "safetykey", "api_secret": secrets.token_urlsafe(48)}


def ticks(*arguments, cwd=None, umask=None, user=None, env=None, timeout=120):
    """Runs `ticks ARGUMENTS` (with `umask`, as `user`); the completed process."""

    def before():
        if umask is not None:
            os.umask(umask)

    return subprocess.run(
        [TICKS_BIN, *arguments], capture_output=True, text=True, timeout=timeout, cwd=cwd, preexec_fn=before,
        user=user, env=env)


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def snapshot(folder):
    """Every file under `folder` with its bytes: what must be there, unchanged, after a refusal
    (but for the server's log and the lock, which holds the pid of whoever took it last)."""
    found = {}
    for root, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            if name in ("stdout.txt", "ticks.lock") or os.path.islink(path):  # the log; the holder's pid
                continue
            with open(path, "rb") as f:
                found[os.path.relpath(path, folder)] = f.read()
    return found


def messages(api):
    return [message["text"] for message in api.query_channel(CHANNEL, messages_limit=300)["messages"]]


@pytest.fixture(scope="module")
def real_folder(tmp_path_factory):
    """A data folder a server has really used (users, a channel, messages, receipts), stopped; tests work on copies."""
    keys = credentials()
    folder = tmp_path_factory.mktemp("real") / "data"
    server = TicksProcess(folder, **keys)
    try:
        api = Ticks(server.base_url, keys["api_key"], keys["api_secret"])
        api.upsert_users("alice", "bob")
        api.create_channel(CHANNEL, ["alice", "bob"], "alice")
        for index in range(20):
            api.send_message(CHANNEL, "alice", f"m{index}", message_id=f"safety-{index}")
        api.mark_read(CHANNEL, "bob", "safety-10")
    finally:
        assert server.stop() == 0, server.output()
    return folder, keys


@pytest.fixture
def data_folder(real_folder, tmp_path):
    """A copy of the real data folder, and its credentials."""
    source, keys = real_folder
    copy = tmp_path / "data"
    shutil.copytree(source, copy)
    return copy, keys


def refused(result, reason):
    assert result.returncode != 0, result.stdout + result.stderr
    assert reason in result.stderr, result.stderr


def test_a_backup_into_a_folder_adds_a_file_and_deletes_nothing(data_folder, tmp_path):
    folder, _ = data_folder
    backups = tmp_path / "backups"
    backups.mkdir()
    (backups / "earlier.sqlite").write_bytes(b"an earlier backup")
    (backups / "notes.txt").write_text("keep me")
    before = snapshot(backups)
    for _ in range(2):
        result = ticks("backup", "--data-dir", str(folder), "--to", str(backups), "--quiet")
        assert result.returncode == 0, result.stderr
        time.sleep(1.1)  # a new name each second
    after = snapshot(backups)
    for name, content in before.items():
        assert after.get(name) == content, name
    written = sorted(name for name in after if name.startswith("ticks-") and name.endswith(".sqlite"))
    assert len(written) == 2, sorted(after)
    for name in written:
        assert mode(backups / name) == 0o600
        with sqlite3.connect(backups / name) as db:
            assert db.execute("SELECT COUNT(*) FROM message").fetchone()[0] == 20
    assert not [name for name in os.listdir(backups) if name.endswith(".partial")]


def backup_named(folder, target, name):
    """A backup of the data folder `folder` written as `target/name`."""
    result = ticks("backup", "--data-dir", str(folder), "--to", str(target / name), "--quiet")
    assert result.returncode == 0, result.stderr
    return target / name


def test_keep_removes_only_the_oldest_of_its_own_backups(data_folder, tmp_path):
    """`--keep N` counts and removes only files named as `--to FOLDER` names them that are sound Ticks backups:
    a foreign file, a look-alike name, a database that is not a backup stay, whether dated before the backups
    (they would be the first to go) or after them (counted, they would push a backup out)."""
    folder, _ = data_folder
    backups = tmp_path / "backups"
    backups.mkdir()
    spare = backup_named(folder, tmp_path, "spare.sqlite")
    old = [backup_named(folder, backups, f"ticks-2025010{day}-030000.sqlite") for day in (1, 2, 3)]
    for look_alike in ("ticks-20200101-030000.sqlite.bak", "ticks-20200101-0300.sqlite", "ticks-20201301-030000.sqlite",
                       "Ticks-20200101-030000.sqlite", "nightly.sqlite"):
        shutil.copy(spare, backups / look_alike)  # a real backup, under a name `--to FOLDER` never gives
    (backups / "notes.txt").write_text("keep me")
    (backups / "ticks-20200101-000001.sqlite").write_text("years of work")
    (backups / "ticks-20300101-000001.sqlite").write_text("years of work")
    with sqlite3.connect(backups / "ticks-20200101-000002.sqlite") as db:
        db.execute("CREATE TABLE notes (text TEXT)")
    shutil.copy(folder / "ticks.sqlite", backups / "ticks-20300101-000002.sqlite")  # a live database's copy: WAL
    os.symlink(spare, backups / "ticks-20200101-000003.sqlite")
    not_backups = {"ticks-20200101-000001.sqlite", "ticks-20300101-000001.sqlite", "ticks-20200101-000002.sqlite",
                   "ticks-20300101-000002.sqlite", "ticks-20200101-000003.sqlite"}
    before = snapshot(backups)

    result = ticks("backup", "--data-dir", str(folder), "--to", str(backups), "--keep", "2", "--quiet", umask=0o022)
    assert result.returncode == 0, result.stdout + result.stderr
    after = snapshot(backups)
    written = sorted(set(after) - set(before))
    assert len(written) == 1 and written[0].startswith("ticks-") and written[0].endswith(".sqlite"), written
    assert mode(backups / written[0]) == 0o600
    # The two newest backups stay: the one just written and the newest before it. Everything else is as it was.
    assert set(after) == (set(before) - {old[0].name, old[1].name}) | set(written), sorted(after)
    for name in set(before) - {old[0].name, old[1].name}:
        assert after[name] == before[name], name
    assert os.path.islink(backups / "ticks-20200101-000003.sqlite") and spare.exists()
    assert f"removed {old[1]} " in result.stdout and f"removed {old[0]} " in result.stdout, result.stdout
    assert "2 of at most 2 backups kept" in result.stdout, result.stdout
    for name in not_backups:
        assert f"left {backups / name} alone" in result.stderr, (name, result.stderr)
    assert "nightly.sqlite" not in result.stderr + result.stdout

    # A second later: the oldest backup goes, and still nothing else.
    time.sleep(1.1)
    again = ticks("backup", "--data-dir", str(folder), "--to", str(backups), "--keep", "2", "--quiet")
    assert again.returncode == 0, again.stdout + again.stderr
    newest = snapshot(backups)
    second = sorted(set(newest) - set(after))
    assert len(second) == 1, second
    assert set(newest) == (set(before) - {path.name for path in old}) | set(written) | set(second), sorted(newest)
    assert f"removed {old[2]} " in again.stdout, again.stdout


def test_keep_needs_a_folder_and_at_least_one(data_folder, tmp_path):
    folder, _ = data_folder
    target = tmp_path / "one.sqlite"
    refused(ticks("backup", "--data-dir", str(folder), "--to", str(target), "--keep", "2", "--quiet"),
            "--keep needs --to to name a folder")
    assert not target.exists()
    refused(ticks("backup", "--data-dir", str(folder), "--to", str(tmp_path), "--keep", "0", "--quiet"),
            "--keep must be at least 1")
    assert not [name for name in os.listdir(tmp_path) if name.startswith("ticks-")]
    # A symbolic link to a folder (systemd makes /var/lib/ticks-backups one) is that folder.
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(real, tmp_path / "linked")
    result = ticks("backup", "--data-dir", str(folder), "--to", str(tmp_path / "linked"), "--keep", "1", "--quiet")
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(os.listdir(real)) == 1 and os.path.islink(tmp_path / "linked"), os.listdir(real)

@pytest.mark.parametrize("target", ["", ".", "./"])
def test_a_backup_to_the_current_folder_or_nothing_is_refused(data_folder, target):
    folder, _ = data_folder
    before = snapshot(folder)
    result = ticks("backup", "--data-dir", ".", "--to", target, "--quiet", cwd=folder)
    refused(result, "names the current folder" if target else "--to is empty")
    assert os.path.isdir(folder)
    assert snapshot(folder) == before


def test_a_backup_never_writes_a_file_of_the_live_data_folder(data_folder, tmp_path):
    folder, keys = data_folder
    server = TicksProcess(folder, **keys)
    try:
        api = Ticks(server.base_url, keys["api_key"], keys["api_secret"])
        api.send_message(CHANNEL, "alice", "while serving")
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        os.link(folder / "ticks.sqlite", elsewhere / "hard-link.sqlite")
        os.symlink(folder / "ticks.sqlite", elsewhere / "symbolic-link.sqlite")
        targets = {
            folder / "ticks.sqlite": "is a file of the live data folder",
            folder / "ticks.sqlite-wal": "is a file of the live data folder",
            folder / "ticks.sqlite-shm": "is a file of the live data folder",
            folder / "ticks.sqlite-journal": "is a file of the live data folder",  # not there: by name
            folder / "credentials.json": "is a file of the live data folder",
            folder / "ticks.lock": "is a file of the live data folder",
            elsewhere / "hard-link.sqlite": "is a file of the live data folder",  # by device and inode
            elsewhere / "symbolic-link.sqlite": "is a symbolic link",
            # Another spelling of the same file.
            folder / ".." / folder.name / "ticks.sqlite": "is a file of the live data folder",
        }
        for target, reason in targets.items():
            for replace in ([], ["--replace"]):
                result = ticks("backup", "--data-dir", str(folder), "--to", str(target), "--quiet", *replace)
                refused(result, reason)
        assert not (folder / "ticks.sqlite-journal").exists()
        # The server goes on as if nothing happened, and all of it is there after a restart (R12).
        for index in range(200):
            api.send_message(CHANNEL, "alice", f"after {index}")
    finally:
        assert server.stop() == 0, server.output()
    server = TicksProcess(folder, **keys)
    try:
        api = Ticks(server.base_url, keys["api_key"], keys["api_secret"])
        texts = messages(api)
        assert texts[-1] == "after 199" and "while serving" in texts and len(texts) == 221, len(texts)
    finally:
        assert server.stop() == 0, server.output()
    with sqlite3.connect(folder / "ticks.sqlite") as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_a_backup_replaces_only_a_ticks_backup_and_only_when_asked(data_folder, tmp_path):
    folder, _ = data_folder
    existing = tmp_path / "existing.sqlite"
    assert ticks("backup", "--data-dir", str(folder), "--to", str(existing), "--quiet").returncode == 0
    assert mode(existing) == 0o600
    os.chmod(existing, 0o644)
    first = existing.read_bytes()
    # Not without --replace.
    refused(ticks("backup", "--data-dir", str(folder), "--to", str(existing), "--quiet"), "exists")
    assert existing.read_bytes() == first
    # Not what is not a backup, even with --replace.
    other = tmp_path / "thesis.txt"
    other.write_text("years of work")
    live_copy = tmp_path / "live-copy.sqlite"
    shutil.copy(folder / "ticks.sqlite", live_copy)  # a Ticks database in WAL mode, as a live one is
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE notes (text TEXT)")
    cases = {other: "is not a SQLite database", live_copy: "in WAL mode", foreign: "is not a Ticks database"}
    for target, reason in cases.items():
        content = target.read_bytes()
        refused(ticks("backup", "--data-dir", str(folder), "--to", str(target), "--replace", "--quiet"), reason)
        assert target.read_bytes() == content
    refused(ticks("backup", "--data-dir", str(folder), "--to", str(tmp_path), "--replace", "--quiet", cwd=tmp_path),
            "names the current folder")
    # A backup, with --replace: replaced, and 0600 again.
    result = ticks("backup", "--data-dir", str(folder), "--to", str(existing), "--replace", "--quiet")
    assert result.returncode == 0, result.stderr
    assert mode(existing) == 0o600
    with sqlite3.connect(existing) as db:
        assert db.execute("SELECT COUNT(*) FROM message").fetchone()[0] == 20


def test_a_backup_refuses_a_target_another_backup_is_writing(data_folder, tmp_path):
    folder, _ = data_folder
    target = tmp_path / "nightly.sqlite"
    # What a running backup holds while it writes: the lock of its partial file.
    partial = tmp_path / ".nightly.sqlite.partial"
    with open(partial, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        held.write("a backup being written")
        held.flush()
        refused(ticks("backup", "--data-dir", str(folder), "--to", str(target), "--quiet"),
                "another backup is writing")
        assert partial.read_text() == "a backup being written"
        assert not target.exists()
    # Once it is done, the next one goes ahead.
    assert ticks("backup", "--data-dir", str(folder), "--to", str(target), "--quiet").returncode == 0


def test_a_restore_from_the_folders_own_database_is_refused_and_keeps_it(data_folder, tmp_path):
    folder, keys = data_folder
    before = snapshot(folder)
    os.link(folder / "ticks.sqlite", tmp_path / "same-file.sqlite")
    for source in (folder / "ticks.sqlite", tmp_path / "same-file.sqlite"):
        result = ticks("restore", "--from", str(source), "--data-dir", str(folder), "--replace")
        refused(result, "is the data folder's own database")
    assert snapshot(folder) == before
    server = TicksProcess(folder, **keys)
    try:
        assert len(messages(Ticks(server.base_url, keys["api_key"], keys["api_secret"]))) == 20
    finally:
        assert server.stop() == 0, server.output()


def test_a_live_database_with_its_log_is_not_restored_from(data_folder, tmp_path):
    folder, keys = data_folder
    server = TicksProcess(folder, **keys)
    try:
        refused(ticks("restore", "--from", str(folder / "ticks.sqlite"), "--data-dir", str(tmp_path / "new")),
                "has a write-ahead log beside it")
    finally:
        assert server.stop() == 0, server.output()


def test_each_replaced_database_is_kept_under_its_own_name(data_folder, tmp_path):
    folder, keys = data_folder
    backup = tmp_path / "b.sqlite"
    assert ticks("backup", "--data-dir", str(folder), "--to", str(backup), "--quiet").returncode == 0
    original = (folder / "ticks.sqlite").read_bytes()
    first = ticks("restore", "--from", str(backup), "--data-dir", str(folder), "--replace")
    assert first.returncode == 0, first.stderr
    restored = (folder / "ticks.sqlite").read_bytes()
    second = ticks("restore", "--from", str(backup), "--data-dir", str(folder), "--replace")
    assert second.returncode == 0, second.stderr
    kept = sorted(name for name in os.listdir(folder) if name.startswith("ticks.sqlite.before-restore-")
                  and not name.endswith(("-wal", "-shm", "-journal")))
    assert len(kept) == 2, os.listdir(folder)
    contents = [(folder / name).read_bytes() for name in kept]
    assert original in contents and restored in contents
    for name in os.listdir(folder):
        if name.startswith("ticks"):
            assert mode(folder / name) == 0o600, name


def test_files_are_the_owners_alone_whatever_the_umask(tmp_path):
    keys = credentials()
    for umask in (0o022, 0o000):
        folder = tmp_path / f"fresh-{umask:o}" / "data"
        port = free_port()
        log = open(tmp_path / f"serve-{umask:o}.txt", "w")
        env = dict(os.environ, TICKS_API_KEY=keys["api_key"], TICKS_API_SECRET=keys["api_secret"])
        process = subprocess.Popen(
            [TICKS_BIN, "serve", "--data-dir", str(folder), "--port", str(port)], stdout=log, stderr=subprocess.STDOUT,
            env=env, preexec_fn=lambda: os.umask(umask))
        try:
            api = Ticks(f"http://127.0.0.1:{port}", keys["api_key"], keys["api_secret"])
            deadline = time.monotonic() + 30
            while True:
                try:
                    api.upsert_users("alice", "bob")
                    break
                except OSError:
                    assert time.monotonic() < deadline and process.poll() is None, open(log.name).read()
                    time.sleep(0.1)
            api.create_channel(CHANNEL, ["alice", "bob"], "alice")
            api.send_message(CHANNEL, "alice", "private")
            assert mode(folder) == 0o700
            for name in ("ticks.sqlite", "ticks.sqlite-wal", "ticks.sqlite-shm", "ticks.lock"):
                assert mode(folder / name) == 0o600, (name, oct(mode(folder / name)))
            backup = tmp_path / f"backup-{umask:o}.sqlite"
            result = ticks("backup", "--data-dir", str(folder), "--to", str(backup), "--quiet", umask=umask)
            assert result.returncode == 0, result.stderr
            assert mode(backup) == 0o600
        finally:
            process.terminate()
            assert process.wait(timeout=20) == 0
            log.close()
        # The credentials, made by `ticks token` in a new folder.
        token_folder = tmp_path / f"token-{umask:o}"
        env = {key: value for key, value in os.environ.items() if not key.startswith("TICKS_API_")}
        assert ticks("token", "someone", "--data-dir", str(token_folder), umask=umask, env=env).returncode == 0
        assert mode(token_folder) == 0o700 and mode(token_folder / "credentials.json") == 0o600
        # A restore into a new folder, from a backup anyone may read.
        os.chmod(backup, 0o644)
        restored = tmp_path / f"restored-{umask:o}"
        assert ticks("restore", "--from", str(backup), "--data-dir", str(restored), umask=umask).returncode == 0
        assert mode(restored) == 0o700
        for name in ("ticks.sqlite", "ticks.lock"):
            assert mode(restored / name) == 0o600, name


def test_a_looser_data_folder_is_warned_of_not_changed(data_folder):
    folder, keys = data_folder
    os.chmod(folder, 0o755)
    os.chmod(folder / "ticks.sqlite", 0o644)
    server = TicksProcess(folder, **keys)
    try:
        output = server.output()
    finally:
        assert server.stop() == 0, server.output()
    assert f"the data folder {folder} has mode 0755" in output, output
    assert f"{folder}/ticks.sqlite has mode 0644" in output, output
    assert mode(folder) == 0o755


@pytest.mark.skipif(os.geteuid() != 0, reason="restoring into another user's folder needs root")
def test_a_restore_as_root_leaves_the_folder_to_its_owner(data_folder, tmp_path):
    folder, keys = data_folder
    backup = tmp_path / "b.sqlite"
    assert ticks("backup", "--data-dir", str(folder), "--to", str(backup), "--quiet").returncode == 0
    owner = pwd.getpwnam("nobody")
    # Outside pytest's folders (root's only): a folder the unit's user owns, as /var/lib/ticks is.
    base = tempfile.mkdtemp(prefix="ticks-owner-", dir="/tmp")
    try:
        os.chmod(base, 0o755)
        service_folder = os.path.join(base, "data")
        os.mkdir(service_folder, 0o700)
        os.chown(service_folder, owner.pw_uid, owner.pw_gid)
        # It already has a database of its own, which the restore replaces.
        shutil.copy(folder / "ticks.sqlite", os.path.join(service_folder, "ticks.sqlite"))
        os.chown(os.path.join(service_folder, "ticks.sqlite"), owner.pw_uid, owner.pw_gid)
        os.chmod(backup, 0o644)
        result = ticks("restore", "--from", str(backup), "--data-dir", service_folder, "--replace")
        assert result.returncode == 0, result.stderr
        for name in ("ticks.sqlite", "ticks.lock"):
            status = os.stat(os.path.join(service_folder, name))
            assert (status.st_uid, stat.S_IMODE(status.st_mode)) == (owner.pw_uid, 0o600), name
        # The binary must be reachable by that user: a copy of it beside the folder.
        binary = os.path.join(base, "ticks")
        shutil.copy(TICKS_BIN, binary)
        os.chmod(binary, 0o755)
        port = free_port()
        env = dict(os.environ, TICKS_API_KEY=keys["api_key"], TICKS_API_SECRET=keys["api_secret"])
        process = subprocess.Popen(
            [binary, "serve", "--data-dir", service_folder, "--port", str(port)], user=owner.pw_uid,
            group=owner.pw_gid, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=base)
        try:
            api = Ticks(f"http://127.0.0.1:{port}", keys["api_key"], keys["api_secret"])
            deadline = time.monotonic() + 30
            while True:
                try:
                    assert len(messages(api)) == 20
                    break
                except OSError:
                    assert time.monotonic() < deadline and process.poll() is None, process.stdout.read()
                    time.sleep(0.1)
            # And it may write: a readonly database would answer 500 here.
            api.send_message(CHANNEL, "alice", "after the restore")
            assert messages(api)[-1] == "after the restore"
        finally:
            process.terminate()
            assert process.wait(timeout=20) == 0, process.stdout.read()
    finally:
        shutil.rmtree(base)


class Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every request with `status` and keeps its headers."""

    status = 200
    seen = []

    def do_GET(self):
        self._answer()

    def do_POST(self):
        self._answer()

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        type(self).seen.append((self.path, dict(self.headers)))
        body = json.dumps({"error": "nothing here"}).encode()
        self.send_response(type(self).status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *arguments):
        pass


@contextlib.contextmanager
def recorder(status):
    handler = type("Handler", (Recorder,), {"status": status, "seen": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], handler.seen
    finally:
        server.shutdown()
        server.server_close()


def claims(token):
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def test_ticks_status_sends_a_token_that_expires_within_a_minute(tmp_path):
    keys = credentials()
    with recorder(500) as (port, seen):
        env = dict(os.environ, TICKS_API_KEY=keys["api_key"], TICKS_API_SECRET=keys["api_secret"])
        started = time.time()
        result = ticks("status", "--url", f"http://127.0.0.1:{port}", "--data-dir", str(tmp_path / "d"), env=env)
        returned = time.time()
        assert result.returncode != 0 and "answered 500" in result.stderr, result.stderr
    assert len(seen) == 1
    token = seen[0][1]["Authorization"]
    expiry = claims(token)["exp"]
    # Made between the command's start and its return: a loaded machine took over a second to start it.
    assert started <= expiry <= returned + 61, (started, returned, claims(token))
    assert "expires" in ticks("status", "--help").stdout


def test_logs_carry_no_receiver_credentials_and_the_receiver_gets_them_as_basic_auth(tmp_path):
    keys = credentials()
    with recorder(500) as (port, seen):
        url = f"http://hook-user:hook-pa%24%24word@127.0.0.1:{port}/hooks/ticks?token=query-secret&team=x"
        server = TicksProcess(
            tmp_path / "hooks", **keys,
            extra_args=["--webhook", url, "--push-hook", url, "--webhook-first-backoff", "0.2", "--log-level", "info"])
        try:
            api = Ticks(server.base_url, keys["api_key"], keys["api_secret"])
            api.upsert_users("alice", "bob")
            api.create_channel(CHANNEL, ["alice", "bob"], "alice")
            api.send_message(CHANNEL, "alice", "hello")
            deadline = time.monotonic() + 20
            while "webhook call failed" not in server.output():
                assert time.monotonic() < deadline, server.output()
                time.sleep(0.1)
            status = subprocess.run(
                [TICKS_BIN, "status", "--url", server.base_url, "--json"], capture_output=True, text=True,
                env=dict(os.environ, TICKS_API_KEY=keys["api_key"], TICKS_API_SECRET=keys["api_secret"]))
            assert status.returncode == 0, status.stderr
        finally:
            assert server.stop() == 0, server.output()
        output = server.output() + status.stdout
        assert f"http://127.0.0.1:{port}/hooks/ticks" in output, output
        for secret in ("hook-user", "pa%24%24word", "pa$$word", "query-secret", "team=x"):
            assert secret not in output, (secret, output)
        assert seen, "the receiver was never called"
        for path, headers in seen:
            assert path == "/hooks/ticks?token=query-secret&team=x"
            assert headers["Authorization"] == "Basic " + base64.b64encode(b"hook-user:hook-pa$$word").decode()
