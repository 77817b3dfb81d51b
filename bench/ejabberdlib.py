"""A throwaway ejabberd node for bench/compare-ejabberd and bench/receipt-path-counts:
Debian's ejabberd package, its own config, spool, node name and cookie in a
temporary folder, plain c2s on a loopback port, nothing throttled."""
import os
import secrets
import shutil
import socket
import subprocess
import time

from benchlib import ROOT, log
from xmpp_markers import tree_cpu_seconds

C2S_PORT = 5322
SCHEMA = "/usr/share/ejabberd/sql/pg.sql"
BUSY_WAIT_OFF = "+sbwt none +sbwtdcpu none +sbwtdio none"


def install():
    """Debian's ejabberd (23.01 on bookworm) and its PostgreSQL driver; the
    distro's own service is stopped and disabled so it holds no ports."""
    if not os.path.exists("/usr/sbin/ejabberdctl"):
        subprocess.run(["apt-get", "install", "-y", "ejabberd", "erlang-p1-pgsql"], check=True,
                       env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"}, stdout=subprocess.DEVNULL)
    elif not os.path.exists("/usr/lib/x86_64-linux-gnu/erlang-p1-pgsql") and not any(
            name.startswith("p1_pgsql") for name in os.listdir("/usr/lib/erlang/lib")):
        subprocess.run(["apt-get", "install", "-y", "erlang-p1-pgsql"], check=True,
                       env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"}, stdout=subprocess.DEVNULL)
    for command in (["service", "ejabberd", "stop"], ["update-rc.d", "ejabberd", "disable"]):
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def config(c2s_port, sql_url=None):
    """ejabberd.yml: one host, plain c2s with PLAIN auth and no TLS, in-band
    registration open on loopback, no shaper, no offline storage. With
    `sql_url` (postgresql://user@host:port/db) mod_mam archives in PostgreSQL."""
    sql = ""
    mam = ""
    if sql_url:
        rest = sql_url.split("://", 1)[1]
        user, rest = rest.split("@", 1)
        hostport, database = rest.split("/", 1)
        host, port = hostport.split(":")
        sql = f"""
sql_type: pgsql
sql_server: "{host}"
sql_port: {port}
sql_database: "{database}"
sql_username: "{user}"
sql_password: ""
sql_pool_size: 10
"""
        mam = """
  mod_mam:
    db_type: sql
    default: always
    assume_mam_usage: true
"""
    return f"""# Written by bench/ejabberdlib.py: a benchmark node, not a deployment.
hosts:
  - localhost
loglevel: warning
log_rotate_count: 0
auth_method: internal
auth_password_format: plain
default_db: mnesia
{sql}
max_fsm_queue: 100000
listen:
  -
    port: {c2s_port}
    ip: "127.0.0.1"
    module: ejabberd_c2s
    starttls: false
    starttls_required: false
    shaper: none
    max_stanza_size: 1048576
    access: all
shaper: {{}}
shaper_rules: {{}}
acl:
  loopback:
    ip:
      - 127.0.0.0/8
access_rules:
  local:
    allow: all
  c2s:
    allow: all
  register:
    allow: all
api_permissions: {{}}
allow_contrib_modules: false
modules:
  mod_disco: {{}}
  mod_ping: {{}}
  mod_register:
    ip_access: all
    access: register
  mod_roster: {{}}
  mod_stream_mgmt:
    resend_on_timeout: false{mam}
registration_timeout: infinity
"""


class Node:
    """One ejabberd node started with `erl` the way `ejabberdctl foreground`
    starts it (same flags), but as the current user, under its own node name
    and a random cookie, with everything in `folder`."""

    def __init__(self, folder, busy_wait=True, sql_url=None, c2s_port=C2S_PORT):
        self.folder, self.busy_wait, self.sql_url, self.c2s_port = folder, busy_wait, sql_url, c2s_port
        self.process = None
        self.node = f"tickscmp{os.getpid()}@localhost"

    def start(self):
        os.makedirs(os.path.join(self.folder, "spool"), exist_ok=True)
        path = os.path.join(self.folder, "ejabberd.yml")
        with open(path, "w") as out:
            out.write(config(self.c2s_port, self.sql_url))
        flags = ["+K", "true", "+P", "250000"]
        if not self.busy_wait:
            flags += BUSY_WAIT_OFF.split()
        env = {**os.environ, "EJABBERD_CONFIG_PATH": path,
               "EJABBERD_LOG_PATH": os.path.join(self.folder, "ejabberd.log"),
               "ERL_LIBS": "/usr/lib/x86_64-linux-gnu", "ERL_MAX_PORTS": "32000",
               "ERL_MAX_ETS_TABLES": "1400", "ERL_CRASH_DUMP": os.path.join(self.folder, "erl_crash.dump"),
               "HOME": self.folder}
        command = ["/usr/bin/erl", "-sname", self.node, "-setcookie", secrets.token_hex(16), *flags,
                   "-mnesia", "dir", f'"{os.path.join(self.folder, "spool")}"', "-s", "ejabberd", "-noinput"]
        self.command = command
        self.process = subprocess.Popen(command, env=env, cwd=self.folder, stdout=open(os.path.join(self.folder, "stdout"), "w"),
                                        stderr=subprocess.STDOUT)
        deadline = time.time() + 240
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"ejabberd exited with {self.process.returncode}; see {self.folder}/stdout and ejabberd.log:\n"
                                 + open(os.path.join(self.folder, "stdout")).read()[-3000:])
            # The port opens before the modules have started: ready once a stream gets its features.
            try:
                with socket.create_connection(("127.0.0.1", self.c2s_port), timeout=2) as probe:
                    probe.sendall(b"<?xml version='1.0'?><stream:stream to='localhost' xmlns='jabber:client' "
                                  b"xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>")
                    received = b""
                    while b"</stream:features>" not in received:
                        chunk = probe.recv(65536)
                        if not chunk:
                            break
                        received += chunk
                    if b"</stream:features>" in received:
                        return self
            except OSError:
                pass
            time.sleep(0.3)
        self.stop()
        raise SystemExit("ejabberd did not answer a stream within 240 s")

    @property
    def pid(self):
        return self.process.pid

    def cpu_seconds(self):
        return tree_cpu_seconds(self.process.pid)

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def load_schema(sql_url):
    """ejabberd's PostgreSQL schema (the single-host one) into the database."""
    subprocess.run(["psql", sql_url, "-q", "-v", "ON_ERROR_STOP=1", "-f", SCHEMA], check=True,
                   stdout=subprocess.DEVNULL)


def start_postgres(folder, port):
    out = subprocess.run([os.path.join(ROOT, "scripts/postgres"), "start", folder, str(port)], check=True,
                         capture_output=True, text=True).stdout.strip().splitlines()
    return out[-1]


def stop_postgres(folder):
    subprocess.run([os.path.join(ROOT, "scripts/postgres"), "stop", folder], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    shutil.rmtree(folder, ignore_errors=True)


def markers(port, pairs, rate, duration, processes=1, register=False, store=False, prefix="u", server_pid=None):
    """One run of bench/xmpp_markers.py; its JSON result."""
    import json
    command = [os.path.join(ROOT, "bench/xmpp_markers.py"), "--port", str(port), "--pairs", str(pairs),
               "--rate", str(rate), "--duration", str(duration), "--processes", str(processes), "--prefix", prefix]
    if register:
        command.append("--register")
    if server_pid:
        command += ["--server-pid", str(server_pid)]
    if store:
        command.append("--store")
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")
    log(result.stderr.strip()) if result.stderr.strip() else None
    return json.loads(result.stdout)
