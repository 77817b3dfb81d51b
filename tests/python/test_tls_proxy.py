"""TLS in front of Ticks: the shipped nginx site (packaging/nginx/ticks.conf)
run by Debian's nginx on loopback, with a throwaway self-signed certificate.

The test renders the shipped file itself, replacing only its placeholders
(ports, certificate paths, server name, log folder), wraps it in an nginx.conf whose
paths are all in the test's folder, and checks what a client sees through
it: the REST API and the WebSocket over TLS, the redirect from HTTP, the
limits it shares with Ticks, /metrics kept inside. Needs nginx and openssl
(apt-get install nginx openssl); under CI=true their absence fails the test.
"""

import grp
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import requests
import websockets.sync.client
from conftest import TicksProcess, free_port
from websockets.sync.client import connect
from wire import Ticks

SITE = Path(__file__).resolve().parents[2] / "packaging" / "nginx" / "ticks.conf"
NGINX = shutil.which("nginx", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"]))
OPENSSL = shutil.which("openssl")
SERVER_NAME = "localhost"

pytestmark = pytest.mark.skipif(
    not (NGINX and OPENSSL) and not os.environ.get("CI"),
    reason="nginx or openssl is not installed (apt-get install nginx openssl)")


def render_site(folder, tls_port, http_port, upstream_port, cert, key, ipv6):
    """The shipped site with its placeholders replaced, and nothing else: each must still be there."""
    text = SITE.read_text()
    replacements = {
        "listen 443 ssl;": f"listen 127.0.0.1:{tls_port} ssl;",
        "listen [::]:443 ssl;": f"listen [::1]:{tls_port} ssl;" if ipv6 else "# (no IPv6 loopback here)",
        "listen 80;": f"listen 127.0.0.1:{http_port};",
        "listen [::]:80;": f"listen [::1]:{http_port};" if ipv6 else "# (no IPv6 loopback here)",
        "127.0.0.1:3030": f"127.0.0.1:{upstream_port}",
        "/var/log/nginx/": f"{folder}/",
        "/etc/letsencrypt/live/chat.example.com/fullchain.pem": str(cert),
        "/etc/letsencrypt/live/chat.example.com/privkey.pem": str(key),
        "chat.example.com": SERVER_NAME,
    }
    for placeholder, value in replacements.items():
        assert placeholder in text, f"packaging/nginx/{SITE.name} no longer has {placeholder!r}: update this test"
        text = text.replace(placeholder, value)
    directives = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    for left in ("example.com", ":3030", "letsencrypt", "/var/log", " 443", " 80;"):
        assert left not in directives, f"packaging/nginx/{SITE.name} has a placeholder this test leaves: {left!r}"
    return text


def nginx_conf(folder, site):
    """A whole nginx.conf around the site, everything it writes in `folder`."""
    # As root, nginx's workers take the user named here (else nobody, who may not read the folder).
    user = ""
    if os.geteuid() == 0:
        user = f"user {pwd.getpwuid(os.geteuid()).pw_name} {grp.getgrgid(os.getegid()).gr_name};"
    return f"""# Written by tests/python/test_tls_proxy.py around packaging/nginx/{SITE.name}.
{user}
worker_processes 1;
pid {folder}/nginx.pid;
error_log {folder}/error.log info;
events {{
    worker_connections 256;
}}
http {{
    client_body_temp_path {folder}/client_body;
    proxy_temp_path {folder}/proxy;
    fastcgi_temp_path {folder}/fastcgi;
    uwsgi_temp_path {folder}/uwsgi;
    scgi_temp_path {folder}/scgi;
    include {site};
}}
"""


def ipv6_loopback(port):
    """Whether this machine has ::1 (some containers have no IPv6) with `port` free on it."""
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", port))
        return True
    except OSError:
        return False


def wait_for_port(port, process, log, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"nginx exited with {process.returncode}:\n{log.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nginx did not listen on {port} within {timeout} s:\n{log.read_text()}")


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    """Ticks on a free loopback port behind nginx running the shipped site; stopped afterwards."""
    assert NGINX and OPENSSL, "CI must run the TLS proxy test: install nginx and openssl"
    folder = tmp_path_factory.mktemp("tls-proxy")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", f"/CN={SERVER_NAME}",
         "-addext", f"subjectAltName=DNS:{SERVER_NAME},IP:127.0.0.1,IP:::1"],
        check=True, capture_output=True, timeout=60)

    ticks = TicksProcess(folder / "ticks", api_key="tlskey", api_secret=secrets.token_urlsafe(48))
    nginx = None
    try:
        tls_port, http_port = free_port(), free_port()
        site = folder / "ticks-site.conf"
        site.write_text(render_site(folder, tls_port, http_port, ticks.port, cert, key, ipv6_loopback(tls_port)))
        conf = folder / "nginx.conf"
        conf.write_text(nginx_conf(folder, site))
        log = folder / "error.log"
        arguments = [NGINX, "-p", str(folder), "-c", str(conf), "-e", str(log)]

        checked = subprocess.run([*arguments, "-t"], capture_output=True, text=True, timeout=60)
        assert checked.returncode == 0, checked.stderr
        # The site as shipped must load without a warning (a deprecated directive, one nginx ignores).
        assert "[warn]" not in checked.stderr and "[emerg]" not in checked.stderr, checked.stderr

        with open(folder / "nginx.out", "w") as out:
            nginx = subprocess.Popen([*arguments, "-g", "daemon off;"], stdout=out, stderr=subprocess.STDOUT)
        wait_for_port(tls_port, nginx, log)
        wait_for_port(http_port, nginx, log)

        client = Ticks(f"https://127.0.0.1:{tls_port}", ticks.api_key, ticks.api_secret)
        client.session.verify = str(cert)
        client.session.trust_env = False  # else REQUESTS_CA_BUNDLE, when set, wins over the session's verify
        yield SimpleNamespace(
            ticks=ticks, client=client, cert=cert, tls_port=tls_port, http_port=http_port,
            access_log=folder / "ticks.access.log",
            tls=ssl.create_default_context(cafile=str(cert)))
    finally:
        if nginx is not None:
            nginx.send_signal(signal.SIGTERM)
            try:
                nginx.wait(timeout=20)
            except subprocess.TimeoutExpired:
                nginx.kill()
                nginx.wait()
        assert ticks.stop() == 0, ticks.output()
    assert nginx.returncode == 0, (folder / "error.log").read_text()


def test_the_api_and_the_socket_through_tls(proxy, monkeypatch):
    # As in a browser, the socket must open at the first try: a WebSocket does not follow redirects
    # (and Ticks answers 307 to an upgrade on a connection that already carried a request).
    monkeypatch.setattr(websockets.sync.client, "MAX_REDIRECTS", 1)
    client = proxy.client
    unique = "tls" + secrets.token_hex(4)
    alice, bob = f"{unique}-alice", f"{unique}-bob"
    client.upsert_users(alice, bob)
    cid = f"messaging:{unique}"
    client.create_channel(cid, [alice, bob], created_by=alice)

    url = client.socket_url(bob)
    assert url.startswith(f"wss://127.0.0.1:{proxy.tls_port}/connect?")
    with connect(url, ssl=proxy.tls, open_timeout=10) as events:
        hello = json.loads(events.recv(timeout=10))
        assert hello["type"] == "health.check", hello
        assert hello["me"]["id"] == bob
        assert hello["connection_id"]

        client.send_message(cid, alice, "over TLS", message_id=f"{unique}-m1")
        new = json.loads(events.recv(timeout=10))
        assert (new["type"], new["cid"], new["message"]["id"]) == ("message.new", cid, f"{unique}-m1")

        # Stream's health check, sent by the client, answered through the proxy too.
        events.send(json.dumps([{"type": "health.check"}]))
        assert json.loads(events.recv(timeout=10))["type"] == "health.check"

    answer = client.raw("GET", "/health")
    assert answer.status_code == 200
    assert answer.headers["Strict-Transport-Security"].startswith("max-age=")

    # nginx logs the socket's path, not its query with the user's token (once it has seen Ticks close it).
    deadline = time.monotonic() + 10
    while '"GET /connect HTTP/1.1" 101 ' not in (logged := proxy.access_log.read_text()):
        assert time.monotonic() < deadline, f"no /connect in nginx's access log:\n{logged}"
        time.sleep(0.05)
    assert "authorization" not in logged and client.user_token(bob) not in logged, logged


def test_plain_http_is_redirected_to_https(proxy):
    answer = requests.get(
        f"http://127.0.0.1:{proxy.http_port}/channels?api_key=k", headers={"Host": SERVER_NAME},
        allow_redirects=False, timeout=10)
    assert answer.status_code == 301
    assert answer.headers["Location"] == f"https://{SERVER_NAME}/channels?api_key=k"


def test_the_certificate_is_checked(proxy):
    """A client that does not trust the throwaway certificate is refused: the TLS is real."""
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(f"https://127.0.0.1:{proxy.tls_port}/health", timeout=10)


def test_limits_agree_with_ticks(proxy):
    client = proxy.client
    unique = "tls" + secrets.token_hex(4)
    # A long query (a $in of Ticks' 1,000 values, about 30 KiB of URL) passes: Ticks takes 80 KiB.
    ids = [f"{unique}-user-{i:04d}" for i in range(1000)]
    client.upsert_users(*ids[:3])
    found = client.query_users({"id": {"$in": ids}}, limit=10)
    assert sorted(user["id"] for user in found["users"]) == ids[:3]

    # A body over Ticks' 1 MiB is refused as Ticks would (413), before it reaches Ticks.
    refused = client.raw("POST", "/users", {"users": {}, "padding": "x" * (1 << 20)})
    assert refused.status_code == 413


def test_metrics_stay_inside(proxy):
    assert proxy.client.raw("GET", "/metrics").status_code == 403
    assert requests.get(f"{proxy.ticks.base_url}/metrics", timeout=10).status_code == 200
