"""Shared by the bench/ scripts: build, start and stop servers, run ticks-bench."""
import http.client
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TICKS_PORT = 3040
TICKS_URL = f"http://127.0.0.1:{TICKS_PORT}"


def log(text):
    print(text, file=sys.stderr, flush=True)


def raise_open_files(wanted=20000):
    """Thousands of sockets need thousands of descriptors, in the server and the generator alike."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def build_release():
    for product in ("ticks", "ticks-bench"):
        subprocess.run(["swift", "build", "-c", "release", "--product", product], cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# The named baseline of issue 57: main before R13, R15 and the deadlines, whose cost per receipt on
# PostgreSQL the path is to come back to (`bench/ab --a baseline`).
NAMED_BASELINE = "30d8a45"


def baseline_binary(commit=NAMED_BASELINE):
    """A release `ticks` of `commit`, built once in a git worktree of its own under /var/tmp and kept
    there for later runs (a release build takes 20 minutes or more here); never removed by this script."""
    folder = f"/var/tmp/ticks-baseline-{commit}"
    binary = os.path.join(folder, ".build/release/ticks")
    if os.path.exists(binary):
        return binary
    if not os.path.isdir(folder):
        subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", folder, commit], check=True)
    log(f"building ticks {commit} (release) in {folder}")
    subprocess.run(["swift", "build", "-c", "release", "--product", "ticks"], cwd=folder, check=True)
    return binary


def wait_for(url, seconds, process):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{url}: the server exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"{url} did not answer within {seconds}s")


def start_ticks(data_dir, extra_args=(), rate_limits=False, binary=None, cpu=None):
    """A release Ticks server on TICKS_PORT with a fresh SQLite database in data_dir.

    Rate limits are off (`--rate-limits off`) unless asked for: the benchmarks
    measure what the server can do, and one generator plays thousands of users
    at rates no single app would. `binary` replaces the checkout's release build.

    `cpu`: the node runs on that CPU alone from its start (taskset), with one
    event loop (`NIO_SINGLETON_GROUP_LOOP_COUNT=1`), as on a machine of one
    core. NIO sizes its loops by the machine's cores (cgroups count, CPU
    affinity does not), so a node pinned after its start ran two loops on one
    CPU, each receipt switching between them."""
    limits = () if rate_limits else ("--rate-limits", "off")
    command = [binary or os.path.join(ROOT, ".build/release/ticks"), "serve", "--port", str(TICKS_PORT),
               "--data-dir", data_dir, "--log-level", "warning", *limits, *extra_args]
    env = None
    if cpu is not None:
        command = ["taskset", "-c", str(cpu), *command]
        env = dict(os.environ, NIO_SINGLETON_GROUP_LOOP_COUNT="1")
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=open(os.path.join(data_dir, "log"), "w"),
                               env=env)
    wait_for(f"{TICKS_URL}/health", 30, process)
    return process


def stop(process):
    if process and process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def bench(arguments, data_dir, bin_dir=None):
    """One `ticks-bench … --json` run against the Ticks server; its JSON result."""
    command = [os.path.join(bin_dir or os.path.join(ROOT, ".build/release"), "ticks-bench"), *arguments, "--json", "--url", TICKS_URL,
               "--data-dir", data_dir]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stderr}")
    return json.loads(result.stdout)


def median(results, key):
    return statistics.median(key(r) for r in results)


def save(name, payload):
    os.makedirs(os.path.join(ROOT, "bench/results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench/results", name), "w") as out:
        json.dump(payload, out, indent=1)


def children_cpu_seconds():
    """User and system CPU of this script's children that have ended and been waited for
    (a load generator once run; not a server still running)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def process_cpu_seconds(pid):
    """User and system CPU seconds a process has used so far (/proc)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_cpu_seconds(pid):
    """The same per thread name (threads of one name summed)."""
    seconds = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/stat") as stat:
                raw = stat.read()
        except OSError:
            continue  # the thread ended
        name = raw[raw.index("(") + 1:raw.rindex(")")]
        fields = raw.rsplit(")", 1)[1].split()
        seconds[name] = seconds.get(name, 0) + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return seconds


READERS_PREFIX = "w"


def prepare_reads(ticks, data_dir, channels, messages):
    """For wrk's bench/mark-read.lua, as the server: channels wc<i> of a sender
    ws<i> and a reader wr<i>, `messages` messages wc<i>m<j> in each. Returns
    the API key and a server token."""
    key = json.load(open(os.path.join(data_dir, "credentials.json")))["api_key"]
    token = subprocess.run([ticks, "token", "--server", "--data-dir", data_dir],
                           capture_output=True, text=True, check=True).stdout.strip()

    # One kept-alive connection per worker thread: a new connection per call made the set-up of
    # PostgreSQL's floors (tens of thousands of sends) take minutes.
    local = threading.local()

    def call(path, body):
        if not hasattr(local, "connection"):
            local.connection = http.client.HTTPConnection("127.0.0.1", TICKS_PORT, timeout=30)
        local.connection.request(
            "POST", f"{path}?api_key={key}", body=json.dumps(body).encode(),
            headers={"Authorization": token, "stream-auth-type": "jwt", "Content-Type": "application/json"})
        response = local.connection.getresponse()
        answer = response.read()
        if response.status >= 300:
            raise SystemExit(f"POST {path}: {response.status} {answer[:300]!r}")
        return json.loads(answer)

    prefix = READERS_PREFIX
    ids = [f"{prefix}{role}{i}" for i in range(channels) for role in "sr"]
    for start in range(0, len(ids), 100):  # at most 100 users a call, as in Stream
        call("/users", {"users": {i: {"id": i} for i in ids[start:start + 100]}})

    def channel(i):
        call(f"/channels/messaging/{prefix}c{i}/query", {"data": {"members": [f"{prefix}s{i}", f"{prefix}r{i}"]}})
        for m in range(messages):
            call(f"/channels/messaging/{prefix}c{i}/message",
                 {"message": {"id": f"{prefix}c{i}m{m}", "text": "x", "user": {"id": f"{prefix}s{i}"}}})

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(channel, range(channels)))
    return key, token


class Postgres:
    """A throwaway cluster (scripts/postgres) on a free port, and a fresh schema in it per server."""

    def __init__(self, options=""):
        """`options`: more server settings, as `-c name=value …` (scripts/postgres' POSTGRES_OPTIONS)."""
        self.dir = tempfile.mkdtemp(prefix="ticks-ab-pg.")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.url = subprocess.run([os.path.join(ROOT, "scripts/postgres"), "start", self.dir, str(port)],
                                  check=True, capture_output=True, text=True,
                                  env=dict(os.environ, POSTGRES_OPTIONS=options)).stdout.strip()
        self.schemas = 0

    def psql(self, sql):
        """Runs `sql`; its rows, as psql prints them unaligned (`|` between columns)."""
        return subprocess.run(["psql", self.url, "-qAtc", sql], check=True, capture_output=True, text=True).stdout

    def analyze(self, schema):
        """Current statistics for `schema`'s tables; the server's sessions plan their statements again after it."""
        self.psql(f"SET search_path TO {schema}; ANALYZE")

    def new_schema(self):
        self.schemas += 1
        name = f"ab_{self.schemas}"
        self.psql(f"CREATE SCHEMA {name}")
        return name

    def postmaster_pid(self):
        with open(os.path.join(self.dir, "postmaster.pid")) as pid_file:
            return int(pid_file.readline())

    def cpu_seconds(self):
        """CPU seconds used so far by the cluster: the postmaster and every process it started,
        running or ended (/proc)."""
        postmaster, total = self.postmaster_pid(), 0.0
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue  # the process ended
            if int(entry) == postmaster:
                # Its own, and its children's that have ended (a client's backend once it disconnects).
                total += sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
            elif int(fields[1]) == postmaster:
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total

    def processes(self):
        """The postmaster and the processes it has started that are running now (backends, the
        checkpointer, the WAL writer, …)."""
        postmaster, found = self.postmaster_pid(), []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            if int(entry) == postmaster or parent == postmaster:
                found.append(int(entry))
        return found

    def pin(self, cpu):
        """The cluster onto one CPU: the postmaster, so every backend it starts from now on, and
        the processes it has started already (checkpointer, WAL writer, …)."""
        for pid in self.processes():
            subprocess.run(["taskset", "-c", "-p", str(cpu), str(pid)], capture_output=True)

    def close(self):
        subprocess.run([os.path.join(ROOT, "scripts/postgres"), "stop", self.dir], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)
