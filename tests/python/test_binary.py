"""The `ticks` command line and the WebSocket, as a new user meets them."""

import contextlib
import json
import os
import signal
import stat
import socket
import sqlite3
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
from conftest import TICKS_BIN, TicksProcess, free_port
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect
from wire import Ticks


def run_ticks(*args, env=None):
    return subprocess.run([TICKS_BIN, *args], capture_output=True, text=True, timeout=60, env=env)


def test_first_start_generates_credentials_and_reuses_them(tmp_path):
    data = tmp_path / "data"
    server = TicksProcess(data)
    credentials_path = data / "credentials.json"
    credentials = json.loads(credentials_path.read_text())
    assert stat.S_IMODE(os.stat(credentials_path).st_mode) == 0o600
    assert len(credentials["api_secret"].encode()) >= 32
    output = server.output()
    assert credentials["api_key"] in output
    assert str(credentials_path) in output
    assert f"user token: swift run ticks token USER_ID --data-dir {data}\n" in output  # run from the build folder
    assert credentials["api_secret"] not in output
    assert server.stop() == 0

    again = TicksProcess(data)
    assert json.loads(credentials_path.read_text()) == credentials
    assert again.stop() == 0


def test_an_installed_binary_names_itself_in_the_banner(tmp_path):
    """Installed (here: a link outside the build folder), the banner says `ticks token`, not `swift run`."""
    installed = tmp_path / "bin" / "ticks"
    installed.parent.mkdir()
    installed.symlink_to(TICKS_BIN)
    server = TicksProcess(tmp_path / "data", binary=str(installed))
    output = server.output()
    assert server.stop() == 0
    assert f"user token: ticks token USER_ID --data-dir {tmp_path / 'data'}\n" in output, output


def test_a_short_secret_is_refused(tmp_path):
    env = dict(os.environ, TICKS_API_KEY="k", TICKS_API_SECRET="too-short")
    result = run_ticks("serve", "--port", "0", "--data-dir", str(tmp_path), env=env)
    assert result.returncode != 0
    assert "32" in result.stderr + result.stdout


def test_token_command_and_websocket_events(ticks, client, unique):
    alice, bob = f"{unique}-alice", f"{unique}-bob"
    client.upsert_users(alice, bob)
    cid = f"messaging:{unique}-dm"
    client.create_channel(cid, [alice, bob], created_by=alice)

    env = dict(os.environ, TICKS_API_KEY=ticks.api_key, TICKS_API_SECRET=ticks.api_secret)
    token = run_ticks("token", alice, "--data-dir", ticks.data_dir, env=env)
    assert token.returncode == 0, token.stderr
    query = urllib.parse.urlencode(
        {"api_key": ticks.api_key, "json": json.dumps({"user_id": alice}), "authorization": token.stdout.strip()}
    )
    with connect(f"ws://127.0.0.1:{ticks.port}/connect?{query}", open_timeout=10) as socket:
        hello = json.loads(socket.recv(timeout=10))
        assert hello["type"] == "health.check"
        assert hello["me"]["id"] == alice
        assert hello["connection_id"]

        client.send_message(cid, alice, "hi", message_id=f"{unique}-m1")
        new = json.loads(socket.recv(timeout=10))
        assert (new["type"], new["message"]["id"], new["cid"]) == ("message.new", f"{unique}-m1", cid)

        client.mark_delivered(bob, (cid, f"{unique}-m1"))
        delivered = json.loads(socket.recv(timeout=10))
        assert delivered["type"] == "message.delivered"
        assert delivered["user"]["id"] == bob
        assert delivered["last_delivered_message_id"] == f"{unique}-m1"
        assert delivered["last_delivered_at"]
        # bob is every other member: alice's message is delivered to all (R13), told after the receipt.
        to_all = json.loads(socket.recv(timeout=10))
        assert (to_all["type"], to_all["message_id"]) == ("message.delivered_to_all", f"{unique}-m1")

        client.mark_read(cid, bob)
        read = json.loads(socket.recv(timeout=10))
        assert read["type"] == "message.read"
        assert read["user"]["id"] == bob
        assert read["last_read_message_id"] == f"{unique}-m1"
        for field in ("cid", "channel_type", "channel_id", "created_at"):
            assert read[field]
        by_all = json.loads(socket.recv(timeout=10))
        assert (by_all["type"], by_all["message_id"]) == ("message.read_by_all", f"{unique}-m1")

        socket.send(json.dumps([{"type": "health.check"}]))
        assert json.loads(socket.recv(timeout=10))["type"] == "health.check"


def test_a_token_for_someone_else_cannot_connect(ticks, unique):
    env = dict(os.environ, TICKS_API_KEY=ticks.api_key, TICKS_API_SECRET=ticks.api_secret)
    token = run_ticks("token", f"{unique}-mallory", env=env).stdout.strip()
    query = urllib.parse.urlencode(
        {"api_key": ticks.api_key, "json": json.dumps({"user_id": f"{unique}-alice"}), "authorization": token}
    )
    # As Stream does: the socket opens, its only frame is the error, then it closes (1000).
    with connect(f"ws://127.0.0.1:{ticks.port}/connect?{query}", open_timeout=10) as socket:
        error = json.loads(socket.recv(timeout=10))["error"]
        assert (error["StatusCode"], error["code"]) == (403, 17)
        assert "mallory" in error["message"]
        with pytest.raises(ConnectionClosed) as closed:
            socket.recv(timeout=10)
        assert closed.value.rcvd.code == 1000


def test_a_websocket_upgrade_is_taken_only_as_a_connections_first_request(ticks, client, unique):
    """README ("Running several nodes") and packaging/nginx/ticks.conf rely on this: an upgrade on a
    connection that already carried a request is answered 307 to the same path with Connection: close
    (hummingbird-websocket), so a balancer must send /connect on a new connection; as the first
    request of one it is upgraded (101)."""
    path = client.socket_url(f"{unique}-alice")[len(f"ws://127.0.0.1:{ticks.port}"):]
    upgrade = (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").encode()

    def answer(connection):
        """The status line and headers of the next answer, its body read past."""
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = connection.recv(4096)
            assert chunk, received
            received += chunk
        head, _, body = received.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
        while len(body) < int(headers.get("content-length", "0")):
            chunk = connection.recv(4096)
            assert chunk, body
            body += chunk
        return lines[0], headers

    with socket.create_connection(("127.0.0.1", ticks.port), timeout=10) as reused:
        reused.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        status, headers = answer(reused)
        assert status.split()[1] == "200", status
        reused.sendall(upgrade)
        status, headers = answer(reused)
        assert status.split()[1] == "307", status
        assert headers["location"] == path and headers["connection"] == "close", headers
    with socket.create_connection(("127.0.0.1", ticks.port), timeout=10) as fresh:
        fresh.sendall(upgrade)
        status, headers = answer(fresh)
        assert status.split()[1] == "101", status
        assert headers["upgrade"].lower() == "websocket", headers


def test_sigterm_is_not_held_up_by_an_unused_connection(tmp_path):
    """HTTP clients open connections ahead of use; shutdown must not wait for them."""
    # The header timeout (which would close the connection too) far beyond the generous deadline below:
    # a shutdown that waited for the connection would miss it by minutes, whatever the machine's load.
    server = TicksProcess(tmp_path, api_key="quiet", api_secret="s" * 40, extra_args=("--header-timeout", "900"))
    idle = socket.create_connection(("127.0.0.1", server.port))
    try:
        started = time.monotonic()
        assert server.stop() == 0
        assert time.monotonic() - started < 120
    finally:
        idle.close()


def test_sigterm_closes_sockets_with_1011_so_streams_clients_come_back(tmp_path):
    """docs/events.md, "Connecting": at a graceful shutdown the node closes its sockets itself, with
    1011, before the HTTP server stops: Stream's clients reconnect on 1011 (to another node, or to
    this one once it is back) and take 1000, which the HTTP server's own shutdown sends, as final."""
    secret = "s" * 40
    server = TicksProcess(tmp_path, api_key="leaving", api_secret=secret)
    env = dict(os.environ, TICKS_API_KEY="leaving", TICKS_API_SECRET=secret)
    sockets = []
    try:
        for user in ("sam", "sam", "kim"):
            token = run_ticks("token", user, "--data-dir", server.data_dir, env=env).stdout.strip()
            query = urllib.parse.urlencode(
                {"api_key": "leaving", "json": json.dumps({"user_id": user}), "authorization": token})
            sockets.append(connect(f"ws://127.0.0.1:{server.port}/connect?{query}", open_timeout=60))
            assert json.loads(sockets[-1].recv(timeout=60))["type"] == "health.check"
        server.process.send_signal(signal.SIGTERM)
        for open_socket in sockets:
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    open_socket.recv(timeout=60)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1011, closed.value
        assert server.stop() == 0
    finally:
        for open_socket in sockets:
            open_socket.close()
        server.stop()


def test_a_stop_held_up_past_its_bound_cancels_what_is_left_names_it_and_exits_1(tmp_path):
    """docs/operations.md, "Install on a server": --shutdown-timeout bounds a graceful shutdown.
    A send waits on the database, which another process holds (SQLite's busy timeout, 5 s, is
    longer than the bound, 1 s): past the bound the node cancels it, logs what it waited for, and
    exits 1. Without the bound it would have waited for the send, then exited 0."""
    server = TicksProcess(tmp_path, api_key="held", api_secret="h" * 40, extra_args=["--shutdown-timeout", "1"])
    try:
        held_up_stop(server)
    finally:
        server.stop()  # whatever failed, the node does not outlive the test


def held_up_stop(server):
    """The send held up, the SIGTERM, and what the node did then."""
    client = Ticks(server.base_url, "held", "h" * 40)
    client.upsert_users({"id": "ann"})
    client.create_channel("messaging:held", ["ann"], created_by="ann")
    holder = sqlite3.connect(os.path.join(server.data_dir, "ticks.sqlite"), isolation_level=None)


    def send():
        with contextlib.suppress(Exception):  # the node stops while it waits: no answer to check
            client.send_message("messaging:held", "ann", "stuck")

    sending = threading.Thread(target=send, daemon=True)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        sending.start()
        # The send is in a handler once /metrics counts two requests in flight (itself and the send).
        deadline = time.monotonic() + 60
        while in_flight(server) < 2:
            assert time.monotonic() < deadline, "the send never reached a handler"
            time.sleep(0.05)
        server.process.send_signal(signal.SIGTERM)
        code = server.process.wait(timeout=60)
    finally:
        holder.rollback()
        holder.close()
    output = server.output()
    assert code == 1, output
    # The send, then the services the group had not yet come to (it stops the HTTP server first).
    assert "graceful shutdown took longer than 1.0 seconds: cancelled what was left (requests in flight: 1, " \
        in output, output


def in_flight(server):
    """`ticks_http_requests_in_flight` in the node's /metrics (this request included)."""
    with urllib.request.urlopen(server.base_url + "/metrics", timeout=30) as response:
        for line in response.read().decode().splitlines():
            if line.startswith("ticks_http_requests_in_flight "):
                return float(line.split()[1])
    raise AssertionError("/metrics has no ticks_http_requests_in_flight")


def test_demo_refuses_an_address_others_can_reach(tmp_path):
    """`--demo` hands out tokens for any user: loopback only, unless forced."""
    env = dict(os.environ, TICKS_API_KEY="demo", TICKS_API_SECRET="d" * 40)
    refused = run_ticks("serve", "--demo", "--host", "0.0.0.0", "--port", "0", "--data-dir", str(tmp_path), env=env)
    assert refused.returncode != 0
    assert "--demo-allow-remote" in refused.stderr + refused.stdout
    # Forced, it starts (and stops cleanly).
    server = TicksProcess(tmp_path / "forced", api_key="demo", api_secret="d" * 40,
                          extra_args=["--demo", "--host", "0.0.0.0", "--demo-allow-remote"])
    assert server.stop() == 0


def test_limit_flags_are_checked(tmp_path):
    env = dict(os.environ, TICKS_API_KEY="k", TICKS_API_SECRET="s" * 40)
    for args in (["--rate-limit", "Nope=5"], ["--rate-limits", "maybe"], ["--connection-buffer-bytes", "0"],
                 ["--ping-interval", "0"], ["--ping-interval", "86401"], ["--ping-interval", str(2**63)]):
        result = run_ticks("serve", "--port", "0", "--data-dir", str(tmp_path), *args, env=env)
        assert result.returncode != 0, args
    # A limit that is set is in force: GET /app and GET /rate_limits report it.
    server = TicksProcess(tmp_path / "limited", api_key="k", api_secret="s" * 40,
                          extra_args=["--max-connections-per-user", "3", "--rate-limit", "MarkRead=7/9"])
    try:
        from wire import Ticks
        ticks = Ticks(server.base_url, "k", "s" * 40)
        assert ticks.call("GET", "/app")["app"]["limits"]["max_connections_per_user"] == 3
        quotas = ticks.call("GET", "/rate_limits?server_side=true&web=true&endpoints=MarkRead")
        assert (quotas["web"]["MarkRead"]["limit"], quotas["server_side"]["MarkRead"]["limit"]) == (7, 9)
    finally:
        assert server.stop() == 0


def test_a_websocket_that_never_answers_a_ping_is_closed_at_the_ping_interval(tmp_path):
    """--ping-interval 1: a client that completed its handshake and then reads nothing (so
    answers no ping) is closed by the server, in seconds, not at the 60 s idle timeout."""
    server = TicksProcess(tmp_path, api_key="pk", api_secret="p" * 40, extra_args=["--ping-interval", "1"])
    try:
        from wire import Ticks
        client = Ticks(server.base_url, "pk", "p" * 40)
        client.upsert_users("mute")
        raw = socket.create_connection(("127.0.0.1", server.port))
        query = urllib.parse.urlencode({"api_key": "pk", "json": json.dumps({"user_id": "mute"}),
                                        "authorization": client.user_token("mute")})
        raw.sendall((f"GET /connect?{query} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                     "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        started = time.monotonic()
        raw.settimeout(50)  # under the idle timeout (60 s): what closes it here is the unanswered ping
        received = b""
        while chunk := raw.recv(65536):  # the handshake, health.check, pings, the close: never answered
            received += chunk
        assert received.startswith(b"HTTP/1.1 101"), received[:200]
        assert time.monotonic() - started < 50
        raw.close()
    finally:
        assert server.stop() == 0


def test_ticks_status_without_credentials_creates_nothing(tmp_path):
    """Run where there is no data folder, `ticks status` says what to give and leaves no `.ticks` behind."""
    env = {key: value for key, value in os.environ.items() if key not in ("TICKS_API_KEY", "TICKS_API_SECRET")}
    result = subprocess.run([TICKS_BIN, "status"], capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert result.returncode != 0
    assert "no credentials" in result.stderr and "--api-key" in result.stderr, result.stderr
    assert list(tmp_path.iterdir()) == [], list(tmp_path.iterdir())
    result = subprocess.run([TICKS_BIN, "status", "--data-dir", str(tmp_path / "elsewhere")], capture_output=True,
                            text=True, timeout=60, env=env, cwd=tmp_path)
    assert result.returncode != 0 and "no credentials" in result.stderr, result.stderr
    assert list(tmp_path.iterdir()) == [], list(tmp_path.iterdir())


def metrics_answer(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_metrics_port_keeps_the_metrics_off_the_api_address(tmp_path):
    """By default /metrics is on the API's address; with --metrics-port it is served there only
    (on --metrics-host, 127.0.0.1 by default) and the API's address answers 404 in Stream's format."""
    server = TicksProcess(tmp_path / "default")
    try:
        status, body = metrics_answer(server.base_url + "/metrics")
        assert status == 200 and "ticks_http_requests_total" in body, (status, body[:200])
    finally:
        assert server.stop() == 0, server.output()

    metrics_port = free_port()
    server = TicksProcess(tmp_path / "apart", extra_args=["--metrics-port", str(metrics_port)])
    try:
        status, body = metrics_answer(server.base_url + "/metrics")
        assert status == 404, (status, body[:200])
        assert json.loads(body)["StatusCode"] == 404, body
        status, body = metrics_answer(f"http://127.0.0.1:{metrics_port}/metrics")
        assert status == 200 and "ticks_http_requests_total" in body, (status, body[:200])
        assert metrics_answer(f"http://127.0.0.1:{metrics_port}/health")[0] == 404, "the metrics address serves nothing else"
        assert f"metrics:    http://127.0.0.1:{metrics_port}/metrics" in server.output(), server.output()
    finally:
        assert server.stop() == 0, server.output()

    for arguments, said in [
        (["--metrics-port", "0"], "between 1 and 65535"),
        (["--metrics-port", "70000"], "between 1 and 65535"),
        (["--metrics-host", "127.0.0.1"], "needs --metrics-port"),
        (["--port", "4040", "--metrics-port", "4040"], "must differ"),
    ]:
        result = run_ticks("serve", "--data-dir", str(tmp_path / "refused"), *arguments)
        assert result.returncode != 0 and said in result.stderr, (arguments, result.stderr)
    result = run_ticks("serve", "--data-dir", str(tmp_path / "refused"),
                       env=dict(os.environ, TICKS_METRICS_PORT="many"))
    assert result.returncode != 0 and "TICKS_METRICS_PORT" in result.stderr, result.stderr
