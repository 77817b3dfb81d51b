"""What the database fault suite (test_database_faults.py) runs against: a
PostgreSQL cluster of its own that it may crash, stop and cut off, Ticks
nodes on it, and receipt traffic through them that records every answer."""

import os
import secrets
import subprocess
import tempfile
import threading
import time

from conftest import TICKS_BIN, free_port
from test_nodes import Socket
from wire import APIError, Ticks

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
POSTGRES_SCRIPT = os.path.join(ROOT, "scripts", "postgres")


def postgres_installed():
    return any(
        os.path.exists(path) for path in ["/usr/lib/postgresql"] + [
            os.path.join(folder, "initdb") for folder in os.environ.get("PATH", "").split(os.pathsep)])


class OwnPostgres:
    """A throwaway cluster (scripts/postgres) that only this test uses, so it may crash it."""

    def __init__(self, address=None, options=""):
        # Under /tmp: as root the cluster belongs to the postgres user.
        self.dir = tempfile.mkdtemp(prefix="ticks-faults-pg.")
        self.port = free_port()
        self.address = address
        self.options = options  # more server options, as `-c name=value …`
        self.url = self._script("start", self.dir, str(self.port), *([address] if address else []))

    def _script(self, *arguments):
        return subprocess.run(
            [POSTGRES_SCRIPT, *arguments], check=True, capture_output=True, text=True, timeout=120,
            env=dict(os.environ, POSTGRES_OPTIONS=self.options)).stdout.strip()

    def crash_restart(self):
        self._script("crash-restart", self.dir)

    def stop(self):
        self._script("stop", self.dir)

    def start(self):
        self._script("start", self.dir, str(self.port), *([self.address] if self.address else []))

    def accepting(self):
        return subprocess.run(
            ["pg_isready", "-q", "-h", "127.0.0.1", "-p", str(self.port)], timeout=10).returncode == 0

    def psql(self, sql, schema=None):
        url = self.url
        return subprocess.run(
            ["psql", url, "-qAtc", (f"SET search_path TO {schema}; " if schema else "") + sql], check=True,
            capture_output=True, text=True, timeout=60).stdout.strip()

    def close(self):
        subprocess.run([POSTGRES_SCRIPT, "stop", self.dir], capture_output=True, timeout=120)
        subprocess.run(["rm", "-rf", self.dir], timeout=60)


class Node:
    """One `ticks serve` on a PostgreSQL URL, optionally inside a network namespace
    (`prefix`: the command that enters it; `host`: the address it listens on)."""

    def __init__(self, name, folder, postgres_url, credentials, store_timeout, prefix=(), host="127.0.0.1",
                 binary=None, extra_args=()):
        self.name = name
        self.port = free_port()
        self.host = host
        self.base_url = f"http://{host}:{self.port}"
        self.api_key = credentials["api_key"]
        self.api_secret = credentials["api_secret"]
        os.makedirs(folder, exist_ok=True)
        self.log_path = os.path.join(folder, "log.txt")
        self._log = open(self.log_path, "a")
        env = dict(os.environ, TICKS_API_KEY=self.api_key, TICKS_API_SECRET=self.api_secret)
        arguments = [binary or TICKS_BIN, "serve", "--host", host, "--port", str(self.port), "--data-dir",
                     os.path.join(folder, "data"), "--postgres-url", postgres_url, "--rate-limits", "off",
                     "--log-level", os.environ.get("FAULT_LOG_LEVEL", "notice")]
        if store_timeout is not None:
            arguments += ["--store-timeout", str(store_timeout)]
        arguments += list(extra_args)
        self.process = subprocess.Popen([*prefix, *arguments], stdout=self._log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 60
        while True:
            assert self.process.poll() is None, f"{name} exited: {self.output()}"
            try:
                if self.client(timeout=2).raw("GET", "/health").status_code == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, f"{name} did not start: {self.output()}"
            time.sleep(0.1)

    def client(self, timeout=10):
        client = Ticks(self.base_url, self.api_key, self.api_secret)
        client.timeout = timeout
        return client

    def alive(self):
        return self.process.poll() is None

    def output(self):
        with open(self.log_path) as f:
            return f.read()

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        return self.process.returncode


class Answer:
    """One request the traffic made: which node, what, when it was sent and answered (monotonic), the status."""

    __slots__ = ("node", "kind", "sent", "answered", "status", "retry_after", "key")

    def __init__(self, node, kind, sent, answered, status, retry_after, key):
        self.node, self.kind, self.sent, self.answered = node, kind, sent, answered
        self.status, self.retry_after, self.key = status, retry_after, key

    @property
    def seconds(self):
        return self.answered - self.sent

    def __repr__(self):
        return f"{self.node} {self.kind} {self.status} in {self.seconds:.2f}s at {self.sent:.2f}"


WRITER = "writer"
READERS = ["r0", "r1", "r2"]


class Traffic:
    """Messages and receipts through every node at once, as apps make them: each
    of `threads` threads per node sends a message (with its own id, R11) into
    its channel through its node, then marks it delivered and read as each
    reader — through the same node on even threads, through the next node on
    odd ones (so receipts cross the nodes, and a node cut off holds up only
    the threads that use it). A request that fails is tried again, as a
    client would, after a short pause. Every answer is kept (`answers`), and
    every acknowledged mark (`acked_reads`)."""

    def __init__(self, nodes, client_timeout=30.0, threads=2):
        self.nodes = nodes
        self.client_timeout = client_timeout
        self.answers = []
        self.acked_reads = {}  # (cid, reader) -> the highest index acknowledged as read
        self.sent = {}  # cid -> ids of the messages acknowledged as sent
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.errors = []
        self.channels = []
        setup = nodes[0].client()
        setup.upsert_users(WRITER, *READERS)
        self.workers = []
        for node_index, node in enumerate(nodes):
            for thread in range(threads):
                cid = f"messaging:f{node_index}t{thread}{secrets.token_hex(3)}"
                setup.create_channel(cid, [WRITER, *READERS], WRITER)
                self.channels.append(cid)
                self.sent[cid] = []
                other = nodes[(node_index + thread % 2) % len(nodes)]
                self.workers.append(threading.Thread(target=self._run, args=(cid, node, other), daemon=True))

    def __enter__(self):
        for worker in self.workers:
            worker.start()
        return self

    def __exit__(self, *exc):
        self.stop_event.set()
        for worker in self.workers:
            worker.join(timeout=self.client_timeout + 30)
        assert not any(worker.is_alive() for worker in self.workers), "a traffic thread did not end"

    def _call(self, node, kind, key, make):
        """`make(client)` until it is answered 2xx (or the traffic stops); True once acknowledged."""
        client = node.client(timeout=self.client_timeout)
        while not self.stop_event.is_set():
            sent = time.monotonic()
            status, retry_after = None, None
            try:
                make(client)
                status = 200
            except APIError as error:
                status = error.status
                retry_after = error.headers.get("Retry-After")
            except OSError as error:  # refused, reset, or no answer within the client's timeout
                status = f"{type(error).__name__}"
            answered = time.monotonic()
            with self.lock:
                self.answers.append(Answer(node.name, kind, sent, answered, status, retry_after, key))
            if status == 200:
                return True
            time.sleep(0.1)
            client = node.client(timeout=self.client_timeout)  # a fresh connection, as after an error
        return False

    def _run(self, cid, node, other):
        try:
            index = 0
            while not self.stop_event.is_set():
                message_id = f"{cid.split(':')[1]}-{index}"
                if not self._call(node, "send", (cid, index), lambda c: c.send_message(
                        cid, WRITER, f"message {index}", message_id=message_id)):
                    return
                with self.lock:
                    self.sent[cid].append(message_id)
                for reader in READERS:
                    if not self._call(other, "delivered", (cid, reader, index),
                                      lambda c: c.mark_delivered(reader, (cid, message_id))):
                        return
                    if not self._call(other, "read", (cid, reader, index),
                                      lambda c: c.mark_read(cid, reader, message_id)):
                        return
                    with self.lock:
                        self.acked_reads[(cid, reader)] = index
                index += 1
        except Exception as error:  # noqa: BLE001 - reported by the test
            self.errors.append(error)

    def snapshot(self):
        with self.lock:
            return list(self.answers)

    def wait_for_reads(self, count, timeout=60, node=None, after=None):
        """Until `count` more marks read are acknowledged (through `node`, answered after `after`)."""
        def counted():
            return sum(1 for answer in self.snapshot() if answer.kind == "read" and answer.status == 200
                       and (node is None or answer.node == node) and (after is None or answer.answered > after))
        target = (0 if after is not None else counted()) + count
        deadline = time.monotonic() + timeout
        while counted() < target:
            assert not self.errors, self.errors
            assert time.monotonic() < deadline, f"only {counted()} of {target} marks read were acknowledged"
            time.sleep(0.02)

    def first_success(self, node, kind, after):
        """When the first request of `kind` through `node` sent after `after` was acknowledged; None if none was."""
        times = [answer.answered for answer in self.snapshot()
                 if answer.node == node and answer.kind == kind and answer.status == 200 and answer.sent >= after]
        return min(times) if times else None


def live_events_flow(sender_node, listener_node, timeout=30):
    """A mark read through `sender_node` reaches a socket on `listener_node` (reconnecting as
    clients do when the node closes it); the seconds it took from the first try."""
    started = time.monotonic()
    via = sender_node.client()
    cid = f"messaging:live{secrets.token_hex(3)}"
    via.upsert_users("liveauthor", "livereader")
    while True:
        try:
            via.create_channel(cid, ["liveauthor", "livereader"], "liveauthor")
            break
        except (APIError, OSError):
            assert time.monotonic() - started < timeout, "could not create the channel for the live check"
            time.sleep(0.2)
    socket = None
    try:
        while time.monotonic() - started < timeout:
            if socket is None or socket.closed.is_set():
                if socket:
                    socket.close()
                socket = Socket(listener_node, listener_node.client(), "liveauthor")
            message_id = f"live-{secrets.token_hex(4)}"
            try:
                via.send_message(cid, "liveauthor", "are you there", message_id=message_id)
                via.mark_read(cid, "livereader", message_id)
            except (APIError, OSError):
                time.sleep(0.2)
                continue
            try:
                socket.wait_for(lambda e: e.get("type") == "message.read"
                                and e.get("last_read_message_id") == message_id, timeout=2)
                return time.monotonic() - started
            except AssertionError:
                continue
        raise AssertionError(f"no live event from {sender_node.name} reached {listener_node.name} in {timeout}s")
    finally:
        if socket:
            socket.close()


def lost_receipts(postgres, schema, traffic):
    """The acknowledged marks read and messages sent that the database does not have (read back with psql)."""
    cursors = {}
    for line in postgres.psql(
            "SELECT c.type || ':' || c.id, m.user_id, m.read_seq FROM member m JOIN channel c ON c.pk = m.channel_pk",
            schema=schema).splitlines():
        cid, user, seq = line.split("|")
        cursors[(cid, user)] = int(seq)
    sequence = {}
    for line in postgres.psql("SELECT id, seq FROM message", schema=schema).splitlines():
        message_id, seq = line.split("|")
        sequence[message_id] = int(seq)
    lost = []
    with traffic.lock:
        sent = {cid: list(ids) for cid, ids in traffic.sent.items()}
        reads = dict(traffic.acked_reads)
    for cid, ids in sent.items():
        lost += [("sent", message_id) for message_id in ids if message_id not in sequence]
    for (cid, reader), index in reads.items():
        message_id = f"{cid.split(':')[1]}-{index}"
        if message_id not in sequence or cursors.get((cid, reader), -1) < sequence[message_id]:
            lost.append(("read", cid, reader, index))
    return lost


# A 503 while the store is known to be away comes at once: well under the deadline, or no slower
# than a request took on this machine with the database there (slowest_before).
AT_ONCE = 1.0


def slowest_before(answers, moment):
    """How long the slowest request sent and answered before `moment` (the fault) took: what a request
    costs on this machine as it is, with the database there. A bound on requests during a fault is the
    deadline plus this, not plus a fixed second: beside stress-ng (scripts/test-under-load) a send
    took 3.3 s with PostgreSQL up (2026-12-03), where an idle machine answers in milliseconds."""
    return max((answer.seconds for answer in answers if answer.answered < moment), default=0.0)


def assert_503s_at_once(answers, node, until):
    """Once `node` has answered a 503 (its store is then known to be away), every later 503 it gives
    before `until` (when the database is back) comes at once, not at the store's deadline
    (docs/operations.md, "When the database goes away"): within AT_ONCE, or within what its slowest
    request took before the first 503 on a machine busy beside the test. The exact proof is the
    node's count of calls left at the deadline (`store.timed_out_calls`), which the callers that
    can read it assert too. Returns how long the first 503 took."""
    mine = sorted((answer for answer in answers if answer.node == node), key=lambda answer: answer.sent)
    first = next((answer for answer in mine if answer.status == 503), None)
    assert first is not None, f"{node} never answered 503"
    known = first.answered
    at_once = max(AT_ONCE, slowest_before(mine, first.sent))
    later = [answer for answer in mine if answer.status == 503 and known < answer.sent < until]
    slow = [answer for answer in later if answer.seconds > at_once]
    assert later, f"{node} answered no 503 after its first one: {mine[-10:]}"
    assert not slow, f"{len(slow)} of {len(later)} later 503s of {node} took over {at_once:.2f} s: {slow[:10]}"
    return first.seconds
