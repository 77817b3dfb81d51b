"""Starts the real `ticks` binary for the Python tests.

TICKS_BIN names the binary (scripts/test sets it to the debug build). Each
server gets its own data folder and a free loopback port, and must stop with
exit code 0 on SIGTERM. TICKS_TEST_LOG_LEVEL sets the servers' --log-level
(warning; debug shows, among the rest, each service's start and stop).
TICKS_TEST_FAILURES names a file to which each failure is appended as it
happens (scripts/test-under-load sets it: pytest prints failures only at its
end, and a loaded run stopped part way would otherwise show none).
"""

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import time
import urllib.request

import pytest
from wire import Ticks

TICKS_BIN = os.environ.get("TICKS_BIN", os.path.join(os.getcwd(), ".build", "debug", "ticks"))
# Every server the tests start waits on its database for up to a minute before answering 503
# (the default is 5 s): the tests run on machines saturated beside them (scripts/test-under-load).
# The fault tests (test_database_faults.py, tests/ha) give --store-timeout themselves, which wins.
os.environ.setdefault("TICKS_STORE_TIMEOUT", "60")
# A PostgreSQL database for the tests that run on both stores (scripts/test starts one).
POSTGRES_URL = os.environ.get("TICKS_TEST_POSTGRES_URL")


def pytest_runtest_logreport(report):
    """With TICKS_TEST_FAILURES, a failure is written there at once, with its traceback."""
    path = os.environ.get("TICKS_TEST_FAILURES")
    if path and report.failed:
        with open(path, "a", encoding="utf-8") as log:
            log.write(f"=== {time.strftime('%H:%M:%S')} {report.nodeid} ({report.when}, {report.duration:.1f} s)\n")
            log.write(report.longreprtext + "\n")


def psql(sql):
    """Runs `sql` on the test database; its output, unaligned."""
    return subprocess.run(
        ["psql", POSTGRES_URL, "-qAtc", sql], check=True, capture_output=True, text=True).stdout.strip()


@contextlib.contextmanager
def store_arguments(store, prefix):
    """The `ticks serve` arguments for `store`: nothing for "sqlite" (the data
    folder's database); for "postgres" a fresh schema named after `prefix`,
    dropped afterwards. Without a test database the test is skipped, and
    under CI=true it fails."""
    if store == "sqlite":
        yield []
        return
    if POSTGRES_URL is None:
        if os.environ.get("CI"):
            pytest.fail("CI must run the PostgreSQL tests: TICKS_TEST_POSTGRES_URL is not set")
        pytest.skip("TICKS_TEST_POSTGRES_URL is not set (scripts/test sets it when PostgreSQL is installed)")
    schema = f"{prefix}_{secrets.token_hex(6)}"
    psql(f"CREATE SCHEMA {schema}")
    try:
        yield ["--postgres-url", f"{POSTGRES_URL}?schema={schema}"]
    finally:
        psql(f"DROP SCHEMA {schema} CASCADE")


@contextlib.contextmanager
def served(store, prefix, tmp_path_factory, extra_args=()):
    """A `ticks serve` on `store` ("sqlite" or "postgres", `store_arguments`),
    rate limits off, with `extra_args`; it must exit cleanly when stopped.
    Module fixtures use it for one server per store; `process.schema` is the
    PostgreSQL schema (None on SQLite)."""
    with store_arguments(store, prefix) as store_args:
        process = TicksProcess(
            tmp_path_factory.mktemp(f"{prefix}-{store}"), api_key=f"{prefix}key",
            api_secret=secrets.token_urlsafe(48), extra_args=["--rate-limits", "off", *extra_args, *store_args])
        process.schema = store_args[1].split("?schema=")[1] if store_args else None
        yield process
        assert process.stop() == 0, process.output()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class TicksProcess:
    """One `ticks serve` process on loopback."""

    def __init__(self, data_dir, api_key=None, api_secret=None, extra_args=(), port=None, binary=None):
        self.data_dir = str(data_dir)
        self.port = port or free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.api_key = api_key
        self.api_secret = api_secret
        env = dict(os.environ)
        env.pop("TICKS_API_KEY", None)
        env.pop("TICKS_API_SECRET", None)
        if api_key:
            env["TICKS_API_KEY"] = api_key
            env["TICKS_API_SECRET"] = api_secret
        self.stdout_path = os.path.join(self.data_dir, "stdout.txt")
        os.makedirs(self.data_dir, exist_ok=True)
        self._stdout = open(self.stdout_path, "a")
        self.process = subprocess.Popen(
            [binary or TICKS_BIN, "serve", "--port", str(self.port), "--data-dir", self.data_dir,
             "--log-level", os.environ.get("TICKS_TEST_LOG_LEVEL", "warning"),
             *extra_args],
            stdout=self._stdout,
            stderr=subprocess.STDOUT,
            env=env,
        )
        self.wait_healthy()

    def wait_healthy(self, timeout=30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"ticks exited with {self.process.returncode}: {self.output()}")
            try:
                with urllib.request.urlopen(self.base_url + "/health", timeout=1) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"ticks did not answer /health within {timeout}s: {self.output()}")

    def output(self) -> str:
        with open(self.stdout_path) as f:
            return f.read()

    def stop(self) -> int:
        """SIGTERM, then the exit code (the server must stop gracefully). It is given systemd's
        TimeoutStopSec, 30 s: past its --shutdown-timeout (15 s) it cancels what is left, which
        has 5 s more, and exits 1, so a stop that hangs beyond is a bug of its own."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired as timeout:
                # What the server's threads were doing when it would not stop, for the report.
                threads = subprocess.run(["ps", "-L", "-o", "tid,stat,wchan:32,comm", "-p", str(self.process.pid)],
                                         capture_output=True, text=True).stdout
                self.process.kill()
                self.process.wait()
                tail = "\n".join(self.output().splitlines()[-60:])
                raise AssertionError(f"ticks did not stop within 30 s of SIGTERM; its threads then:\n{threads}\n"
                                     f"--- the end of its output:\n{tail}") from timeout
        self._stdout.close()
        return self.process.returncode


@pytest.fixture(scope="session")
def ticks(tmp_path_factory):
    """One server for the session, with credentials from the environment."""
    server = TicksProcess(
        tmp_path_factory.mktemp("ticks"), api_key="pytestkey", api_secret=secrets.token_urlsafe(48)
    )
    yield server
    assert server.stop() == 0, server.output()


@pytest.fixture
def client(ticks):
    """A wire client of the session's server (wire.Ticks), with the server token."""
    return Ticks(ticks.base_url, ticks.api_key, ticks.api_secret)


@pytest.fixture
def unique():
    """A fresh id prefix so tests sharing the server never collide."""
    return "t" + secrets.token_hex(4)
