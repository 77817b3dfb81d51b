"""A PostgreSQL cluster with high availability on loopback, from Debian's
packages: etcd, two Patroni members (a primary and a synchronous standby),
and HAProxy in front, sending connections to whichever member Patroni's
REST API calls the primary (docs/operations.md, "High availability")."""

import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

PG_BIN = "/usr/lib/postgresql/15/bin"


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def as_postgres(command):
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


class Member:
    def __init__(self, name, base, etcd_port, ttl, loop_wait, retry_timeout, synchronous):
        self.name = name
        self.dir = os.path.join(base, name)
        os.makedirs(self.dir)
        self.pg_port = free_port()
        self.rest_port = free_port()
        self.data_dir = os.path.join(self.dir, "data")
        self.config = os.path.join(self.dir, "patroni.yml")
        self.log_path = os.path.join(self.dir, "patroni.log")
        config = {
            "scope": "ticks-ha",
            "name": name,
            "restapi": {"listen": f"127.0.0.1:{self.rest_port}", "connect_address": f"127.0.0.1:{self.rest_port}"},
            "etcd3": {"hosts": f"127.0.0.1:{etcd_port}"},
            "bootstrap": {
                "dcs": {
                    "ttl": ttl, "loop_wait": loop_wait, "retry_timeout": retry_timeout,
                    "maximum_lag_on_failover": 1048576, "synchronous_mode": synchronous,
                    "postgresql": {
                        "use_pg_rewind": True, "use_slots": True,
                        "parameters": {"wal_log_hints": "on", "max_connections": 200, "fsync": "on",
                                       "synchronous_commit": "on"},
                    },
                },
                "initdb": [{"encoding": "UTF8"}],
                "pg_hba": ["host replication replicator 127.0.0.1/32 trust", "host all all 127.0.0.1/32 trust",
                           "local all all trust"],
            },
            "postgresql": {
                "listen": f"127.0.0.1:{self.pg_port}",
                "connect_address": f"127.0.0.1:{self.pg_port}",
                "data_dir": self.data_dir,
                "bin_dir": PG_BIN,
                "pgpass": os.path.join(self.dir, "pgpass"),
                "authentication": {
                    "replication": {"username": "replicator", "password": "replicator"},
                    "superuser": {"username": "postgres", "password": "postgres"},
                    "rewind": {"username": "postgres", "password": "postgres"},
                },
                "parameters": {"unix_socket_directories": self.dir},
            },
        }
        # JSON is YAML.
        with open(self.config, "w") as f:
            json.dump(config, f)
        if os.geteuid() == 0:
            subprocess.run(["chown", "-R", "postgres", self.dir], check=True)
        self.process = None
        self.start()

    def start(self):
        self._log = open(self.log_path, "a")
        self.process = subprocess.Popen(as_postgres(["patroni", self.config]), stdout=self._log,
                                        stderr=subprocess.STDOUT, start_new_session=True)

    def rest(self, path):
        """The status code of Patroni's REST `path` on this member (0 when it does not answer)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.rest_port}{path}", timeout=1) as response:
                return response.status
        except urllib.error.HTTPError as error:
            return error.code
        except OSError:
            return 0

    def postmaster_pid(self):
        try:
            with open(os.path.join(self.data_dir, "postmaster.pid")) as f:
                return int(f.readline())
        except (OSError, ValueError):
            return None

    def kill(self):
        """kill -9 of Patroni and of PostgreSQL's postmaster (its backends end with it): a member that crashed."""
        pid = self.postmaster_pid()
        os.killpg(self.process.pid, signal.SIGKILL)
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait()
        # The backends notice their postmaster is gone and exit at once.
        deadline = time.monotonic() + 10
        while pid and time.monotonic() < deadline:
            if subprocess.run(["pgrep", "-P", str(pid)], capture_output=True).returncode != 0:
                break
            time.sleep(0.1)

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        pid = self.postmaster_pid()
        if pid:
            subprocess.run(as_postgres([f"{PG_BIN}/pg_ctl", "-D", self.data_dir, "-m", "immediate", "stop"]),
                           capture_output=True)

    def output(self):
        with open(self.log_path) as f:
            return f.read()


class HACluster:
    """etcd, two Patroni members and HAProxy; `url` reaches the primary through HAProxy."""

    def __init__(self, ttl=10, loop_wait=2, retry_timeout=4, synchronous=True):
        self.ttl, self.loop_wait, self.retry_timeout = ttl, loop_wait, retry_timeout
        self.base = tempfile.mkdtemp(prefix="ticks-ha.")
        os.chmod(self.base, 0o755)
        self.processes = []
        self.members = []
        self.etcd_port = free_port()
        peer = free_port()
        self.etcd_log = open(os.path.join(self.base, "etcd.log"), "w")
        self.etcd = subprocess.Popen(
            ["etcd", "--name", "ha", "--data-dir", os.path.join(self.base, "etcd"),
             "--listen-client-urls", f"http://127.0.0.1:{self.etcd_port}",
             "--advertise-client-urls", f"http://127.0.0.1:{self.etcd_port}",
             "--listen-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-cluster", f"ha=http://127.0.0.1:{peer}"],
            stdout=self.etcd_log, stderr=subprocess.STDOUT)
        self.wait(lambda: self._etcd_healthy(), "etcd did not start", 30)
        first = Member("m1", self.base, self.etcd_port, ttl, loop_wait, retry_timeout, synchronous)
        self.members.append(first)
        self.wait(lambda: first.rest("/primary") == 200, "the first member never became the primary", 90)
        second = Member("m2", self.base, self.etcd_port, ttl, loop_wait, retry_timeout, synchronous)
        self.members.append(second)
        self.wait(lambda: second.rest("/replica") == 200, "the second member never became a replica", 120)
        if synchronous:
            self.wait(lambda: second.rest("/sync") == 200, "the replica never became the synchronous standby", 60)
        self.haproxy_port = free_port()
        config = os.path.join(self.base, "haproxy.cfg")
        with open(config, "w") as f:
            f.write(self.haproxy_config())
        self.haproxy_log = open(os.path.join(self.base, "haproxy.log"), "w")
        self.haproxy = subprocess.Popen(["haproxy", "-f", config, "-db"], stdout=self.haproxy_log,
                                        stderr=subprocess.STDOUT)
        self.url = f"postgres://postgres@127.0.0.1:{self.haproxy_port}/postgres"
        # HAProxy counts a server up until its first check says otherwise: wait until every
        # connection it makes lands on the primary.
        self.wait(lambda: all(self.psql("SELECT pg_is_in_recovery()") == "f" for _ in range(10)),
                  "HAProxy did not settle on the primary", 30)

    def haproxy_config(self):
        servers = "\n".join(
            f"    server {m.name} 127.0.0.1:{m.pg_port} check port {m.rest_port}" for m in self.members)
        # The check asks Patroni who is the primary every 500 ms; a member that stops being it is
        # marked down after one failed check, and its sessions are cut so clients reconnect.
        return f"""global
    maxconn 1000
defaults
    mode tcp
    timeout connect 2s
    timeout client 30m
    timeout server 30m
    timeout check 1s
listen primary
    bind 127.0.0.1:{self.haproxy_port}
    option httpchk GET /primary
    http-check expect status 200
    default-server inter 500ms fall 1 rise 1 on-marked-down shutdown-sessions
{servers}
"""

    def _etcd_healthy(self):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.etcd_port}/health", timeout=1) as response:
                return json.load(response).get("health") == "true"
        except OSError:
            return False

    @staticmethod
    def wait(condition, message, timeout):
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, message
            time.sleep(0.1)

    def primary(self):
        found = [m for m in self.members if m.rest("/primary") == 200]
        return found[0] if len(found) == 1 else None

    def psql(self, sql, port=None, schema=None):
        result = subprocess.run(
            ["psql", "-h", "127.0.0.1", "-p", str(port or self.haproxy_port), "-U", "postgres", "-d", "postgres",
             "-qAtc", (f"SET search_path TO {schema}; " if schema else "") + sql],
            capture_output=True, text=True, timeout=30)
        if result.returncode != 0:
            self.last_error = result.stderr.strip()
            return None
        return result.stdout.strip()

    def set_synchronous(self, on):
        """Turns Patroni's synchronous_mode on or off (PATCH /config) and waits until the standby is (a)synchronous."""
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.members[0].rest_port}/config", method="PATCH",
            data=json.dumps({"synchronous_mode": on}).encode(), headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10):
            pass
        standby = next(m for m in self.members if m is not self.primary())
        self.wait(lambda: standby.rest("/sync" if on else "/async") == 200,
                  f"the standby did not become {'synchronous' if on else 'asynchronous'}", 60)
        self.wait(lambda: (self.psql("SHOW synchronous_standby_names") or "") != "" if on
                  else self.psql("SHOW synchronous_standby_names") == "",
                  "the primary's synchronous_standby_names did not follow", 60)

    def close(self):
        if getattr(self, "haproxy", None):
            self.haproxy.terminate()
            self.haproxy.wait()
        for member in self.members:
            member.stop()
        self.etcd.terminate()
        self.etcd.wait()
        subprocess.run(["rm", "-rf", self.base])
