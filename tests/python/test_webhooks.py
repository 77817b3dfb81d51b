"""Webhooks and the push hook against the real binary and real HTTP receivers
(an `http.server` in a thread of the test process), on SQLite and, when
TICKS_TEST_POSTGRES_URL is set, on PostgreSQL in a schema of its own.

What is proved, test by test: every call is signed over its exact body and
carries its event, for the event types asked for (flags, environment, GET
/app); failed calls, and calls that time out, are retried with the same
delivery id, die after the last attempt or the maximum age, are listed and
sent again on request; a receiver gets each channel's calls in the order of
the changes, a failing call holding back the later ones; calls survive a
kill -9 and are never made for a change that did not commit; the push hook
names only members without a socket, with a token that may mark that one
channel delivered and nothing else; a hanging receiver holds no receipt.

Each receiver answers as the test tells it (2xx, 500, or not at all); the
server retries with backoffs of a fraction of a second. No test measures
how fast anything is: each waits, with a deadline, for what must happen.
"""

import base64
import hashlib
import hmac
import json
import random
import re
import secrets
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
from conftest import TICKS_BIN, TicksProcess, store_arguments
from test_nodes import Socket
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect
from wire import APIError, Ticks, make_token

# Retries a fraction of a second apart; the sender also looks at the outbox
# at least once a second, so a retry comes within about a second.
FAST = ["--webhook-first-backoff", "0.2", "--webhook-max-backoff", "0.4"]


# Receivers


class Call:
    """One HTTP call a receiver got: its headers, its exact body, and what it was answered."""

    def __init__(self, path, headers, body):
        self.path = path
        self.headers = headers
        self.body = body
        self.event = json.loads(body)
        self.delivery_id = headers.get("X-Webhook-Id")
        self.attempt = int(headers.get("X-Webhook-Attempt", "0"))
        self.arrived = time.monotonic()
        self.status = None  # set once the receiver decided its answer

    @property
    def type(self):
        return self.event.get("type")

    @property
    def message_id(self):
        return (self.event.get("message") or {}).get("id")

    @property
    def delivered(self):
        return self.status is not None and 200 <= self.status < 300

    def __repr__(self):
        return f"<{self.type} {self.message_id or self.event.get('cid')} #{self.attempt} -> {self.status}>"


class Receiver:
    """An HTTP server in this process recording every POST, in the order they
    arrive, and answering what `answer(call)` returns: a status code (it may
    block first, as a hanging receiver does), or a threading.Event to send
    200 and the first byte of the body and then stall until it is set."""

    def __init__(self, answer=None):
        self.answer = answer or (lambda call: 200)
        self.calls = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                call = Call(self.path, {k: v for k, v in self.headers.items()}, body)
                with receiver.lock:
                    receiver.calls.append(call)
                status = receiver.answer(call)
                try:
                    if isinstance(status, threading.Event):
                        # 200 and the start of the body, then nothing until the event is set.
                        self.send_response(200)
                        self.send_header("Content-Length", "100")
                        self.end_headers()
                        self.wfile.write(b"{")
                        self.wfile.flush()
                        status.wait(60)
                        return
                    call.status = status
                    self.send_response(status)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"{}")
                except OSError:
                    pass  # the server gave up on this call (its timeout) and closed the connection

            def log_message(self, *args):
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                pass

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def snapshot(self):
        with self.lock:
            return list(self.calls)

    def wait_for(self, check, timeout=20.0, what="the calls awaited"):
        """Waits until `check(calls so far)` is true; returns the calls."""
        deadline = time.monotonic() + timeout
        while True:
            calls = self.snapshot()
            if check(calls):
                return calls
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not within {timeout}s; got {calls}")
            time.sleep(0.02)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def signature(body, secret):
    """Stream's X-Signature: HMAC-SHA256 of the raw body with the api secret, lowercase hex."""
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def delivered_ids(calls):
    """The message ids of the message.new calls answered 2xx."""
    return {c.message_id for c in calls if c.type == "message.new" and c.delivered}


def first_deliveries(calls, cid):
    """The message ids of `cid`'s message.new calls, in the order each was first answered 2xx."""
    order, seen = [], set()
    for call in calls:
        if call.type == "message.new" and call.event["cid"] == cid and call.delivered \
                and call.delivery_id not in seen:
            seen.add(call.delivery_id)
            order.append(call.message_id)
    return order


# Servers


class Servers:
    """Servers on one store: every start uses the same data (SQLite's folder, PostgreSQL's schema)."""

    def __init__(self, name, data_dir, store_args):
        self.name = name
        self.data_dir = data_dir
        self.store_args = store_args
        self.api_key = "hookkey"
        self.api_secret = secrets.token_urlsafe(48)
        self.started = []

    def start(self, *flags):
        server = TicksProcess(
            self.data_dir, api_key=self.api_key, api_secret=self.api_secret,
            extra_args=["--rate-limits", "off", *self.store_args, *flags])
        self.started.append(server)
        return server


@pytest.fixture(params=["sqlite", "postgres"])
def store(request, tmp_path):
    """Starts servers (`store.start(*flags)`, again on the same data) on the store asked for; stops them afterwards."""
    with store_arguments(request.param, "wh") as store_args:
        servers = Servers(request.param, tmp_path / "data", store_args)
        yield servers
        for server in servers.started:
            if server.process.poll() is None:
                assert server.stop() == 0, server.output()


@pytest.fixture
def receivers():
    """Makes receivers (`receivers(answer)`); closes them afterwards."""
    made = []

    def make(answer=None):
        receiver = Receiver(answer)
        made.append(receiver)
        return receiver

    yield make
    for receiver in made:
        receiver.close()


def client_of(server):
    return Ticks(server.base_url, server.api_key, server.api_secret, timeout=10)


def metric(server, name, **labels):
    """The sum of the samples of `name` whose labels include `labels`."""
    total = 0.0
    for line in requests.get(server.base_url + "/metrics", timeout=10).text.splitlines():
        match = re.match(r"^([A-Za-z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)$", line)
        if not match or match.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
        if all(found.get(key) == value for key, value in labels.items()):
            total += float(match.group(3))
    return total


def metrics_reach(server, expected, timeout=10.0):
    """Waits until the webhook metrics are as `expected`: {(name, outcome or state): value}."""

    def values():
        return {(name, label): metric(server, name, **(
            {"kind": "webhook", "outcome": label} if name == "ticks_webhook_calls_total" else {"state": label}))
            for name, label in expected}

    poll_until(values, lambda found: found == expected, f"the metrics {expected}", timeout=timeout)


def poll_until(fetch, done, what, timeout=20.0):
    """Calls `fetch()` until `done(result)`; the result."""
    deadline = time.monotonic() + timeout
    while True:
        result = fetch()
        if done(result):
            return result
        assert time.monotonic() < deadline, f"{what}: not within {timeout}s; last {result}"
        time.sleep(0.05)


def receipt(client, message_id, user, token=None):
    """`user`'s entry in GET /messages/{id}/receipts ({} when they have none)."""
    entries = client.receipts(message_id, token=token)["receipts"]
    return next((r for r in entries if r["user"]["id"] == user), {})


def refused(call, status):
    """Runs `call`, which must fail with `status`; Stream's error body."""
    with pytest.raises(APIError) as error:
        call()
    assert error.value.status == status, error.value
    body = error.value.body
    assert body.get("StatusCode") == status and body.get("message") and "code" in body, body
    return body


def jwt_claims(token, secret):
    """The claims of an HS256 token, once its signature is checked."""
    header, payload, sig = token.split(".")

    def decode(part):
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))

    assert json.loads(decode(header))["alg"] == "HS256"
    expected = hmac.new(secret.encode(), f"{header}.{payload}".encode(), hashlib.sha256).digest()
    assert hmac.compare_digest(decode(sig), expected), "the token is not signed with the api secret"
    return json.loads(decode(payload))


# 1. What each call carries


def test_every_change_calls_the_webhook_signed_with_its_event(store, receivers):
    """Every change of a channel makes one call, in the order of the changes,
    whose X-Signature is the HMAC-SHA256 of its exact body with the api
    secret, and whose body is the event (type, cid, channel_type,
    channel_id, created_at and the event's own fields). A resend of the same
    message id makes no second message.new, and a member who keeps their
    reads private never makes a message.read, nor a notification.mark_unread
    (which tells their read position); their delivery is still told."""
    receiver = receivers()
    server = store.start("--webhook", receiver.url, *FAST)
    client = client_of(server)
    private = {"id": "pia", "privacy_settings": {"read_receipts": {"enabled": False}}}
    client.upsert_users("amy", "ben", "quin", private)
    cid, path = "messaging:sig", "/channels/messaging/sig"
    client.create_channel(cid, ["amy", "ben", "pia"], created_by="amy")
    client.send_message(cid, "amy", "hello", message_id="m1")
    client.send_message(cid, "amy", "hello", message_id="m1")  # a client's retry: the same message
    client.mark_delivered("pia", (cid, "m1"))
    client.mark_read(cid, "pia")  # private: no webhook
    client.call("POST", f"{path}/unread", {"user": {"id": "pia"}, "message_id": "m1"})  # private: none either
    client.mark_delivered("ben", (cid, "m1"))
    client.mark_read(cid, "ben")
    client.call("POST", f"{path}/unread", {"user": {"id": "ben"}, "message_id": "m1"})
    client.update_members(cid, add=["quin"])
    client.update_members(cid, remove=["quin"])
    client.call("PATCH", path, {"set": {"color": "red"}})
    client.call("POST", "/messages/m1", {"message": {"id": "m1", "text": "edited", "user": {"id": "amy"}}})
    client.call("DELETE", "/messages/m1")
    client.call("POST", f"{path}/truncate", {})
    client.call("DELETE", path)

    calls = receiver.wait_for(lambda calls: any(c.type == "channel.deleted" for c in calls),
                              what="channel.deleted, the last change")
    assert [(c.type, c.event.get("user", {}).get("id")) for c in calls] == [
        ("channel.created", None),
        ("message.new", "amy"),
        ("message.delivered", "pia"),
        ("message.delivered", "ben"),
        ("message.delivered_to_all", None),  # pia and ben have it (R13)
        ("message.read", "ben"),
        ("message.read_by_all", None),  # pia counts through her delivery (R10, R13)
        ("notification.mark_unread", "ben"),
        ("member.added", "quin"),
        ("member.removed", "quin"),
        ("channel.updated", None),
        ("message.updated", "amy"),
        ("message.deleted", "amy"),
        ("channel.truncated", None),
        ("channel.deleted", None),
    ], calls

    for call in calls:
        assert call.path == "/hook"
        assert call.headers["X-Signature"] == signature(call.body, server.api_secret), call
        assert call.headers["X-Signature"] != signature(call.body, server.api_secret + "x")
        assert call.headers["X-Api-Key"] == server.api_key
        assert call.headers["Content-Type"].startswith("application/json")
        assert call.attempt == 1 and call.status == 200
        event = call.event
        assert (event["cid"], event["channel_type"], event["channel_id"]) == (cid, "messaging", "sig"), event
        assert event["created_at"], event
    assert len({c.delivery_id for c in calls}) == len(calls), "each call has a delivery id of its own"

    events = {}
    for call in calls:
        events.setdefault(call.type, []).append(call.event)
    assert events["channel.created"][0]["channel"]["cid"] == cid
    new = events["message.new"][0]
    assert (new["message"]["id"], new["message"]["text"], new["message"]["user"]["id"]) == ("m1", "hello", "amy")
    delivered = events["message.delivered"][1]
    assert delivered["last_delivered_message_id"] == "m1" and delivered["last_delivered_at"], delivered
    assert events["message.read"][0]["last_read_message_id"] == "m1"
    unread = events["notification.mark_unread"][0]
    assert (unread["first_unread_message_id"], unread["unread_messages"]) == ("m1", 1), unread
    assert events["member.added"][0]["member"]["user_id"] == "quin"
    assert events["member.removed"][0]["member"]["user"]["id"] == "quin"
    assert events["channel.updated"][0]["channel"]["color"] == "red"
    updated = events["message.updated"][0]
    assert (updated["message_id"], updated["message"]["text"]) == ("m1", "edited"), updated
    deleted = events["message.deleted"][0]
    assert deleted["message_id"] == "m1" and deleted["message"]["type"] == "deleted", deleted
    assert deleted["message"]["deleted_at"] and deleted["hard_delete"] is False, deleted
    assert events["channel.truncated"][0]["channel"]["truncated_at"]
    assert events["channel.deleted"][0]["channel"]["deleted_at"]


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_webhook_settings_from_the_environment_choose_the_events_and_show_in_the_app(
        store, receivers, monkeypatch):
    """TICKS_WEBHOOK_URLS, TICKS_WEBHOOK_EVENTS and TICKS_PUSH_HOOK_URL set
    the hooks as the flags do: with the events `message.new` the webhook gets
    message.new and nothing else (the later message.new is the proof, calls
    being in order). GET /app shows the hooks and the delivery settings to a
    server token; a user token sees no URL."""
    webhook, push = receivers(), receivers()
    monkeypatch.setenv("TICKS_WEBHOOK_URLS", webhook.url)
    monkeypatch.setenv("TICKS_WEBHOOK_EVENTS", "message.new")
    monkeypatch.setenv("TICKS_PUSH_HOOK_URL", push.url + "/push")
    server = store.start("--webhook-attempts", "5", "--webhook-timeout", "2.5", "--delivery-token-lifetime", "90")
    client = client_of(server)
    client.upsert_users("amy", "ben")
    cid = "messaging:only"
    client.create_channel(cid, ["amy", "ben"], created_by="amy")
    client.send_message(cid, "amy", "one", message_id="one")
    client.mark_delivered("ben", (cid, "one"))
    client.mark_read(cid, "ben")
    client.call("PATCH", "/channels/messaging/only", {"set": {"color": "blue"}})
    client.update_members(cid, add=["amy"], remove=["ben"])
    client.send_message(cid, "amy", "two", message_id="two")

    calls = webhook.wait_for(lambda calls: "two" in delivered_ids(calls), what="message.new of 'two'")
    assert [(c.type, c.message_id) for c in calls] == [("message.new", "one"), ("message.new", "two")], calls
    pushed = push.wait_for(lambda calls: len(calls) >= 1, what="the push call of 'one'")
    assert pushed[0].message_id == "one" and pushed[0].path == "/hook/push"

    app = client.call("GET", "/app")["app"]
    assert app["webhook_url"] == webhook.url
    assert app["webhook_events"] == ["message.new"]
    assert app["event_hooks"] == [
        {"hook_type": "webhook", "webhook_url": webhook.url, "event_types": ["message.new"], "enabled": True},
        {"hook_type": "push", "webhook_url": push.url + "/push", "event_types": ["message.new"], "enabled": True},
    ], app["event_hooks"]
    delivery = app["webhook_delivery"]
    assert (delivery["max_attempts"], delivery["call_timeout_seconds"], delivery["delivery_token_seconds"]) == \
        (5, 2.5, 90), delivery
    seen_by_user = client.call("GET", "/app", token=client.user_token("amy"))["app"]
    assert not seen_by_user.get("event_hooks") and not seen_by_user.get("webhook_url"), seen_by_user


@pytest.mark.parametrize("flags, complaint", [
    (["--webhook", "ftp://127.0.0.1/hook"], "not an http(s) URL"),
    (["--webhook", "http://127.0.0.1/hook", "--webhook-events", "message.new,typing.start"], "typing.start"),
    (["--push-hook", "http://127.0.0.1/push", "--delivery-token-lifetime", "30"], "at least 60"),
    (["--webhook", "http://127.0.0.1/hook", "--webhook-attempts", "0"], "at least 1"),
])
def test_bad_webhook_settings_stop_the_server_from_starting(tmp_path, flags, complaint):
    """A webhook setting that cannot work is refused at start, saying why, rather than failing every call later."""
    # `--api-secret=VALUE`: a random secret may begin with "-", which would read as a flag of its own.
    result = subprocess.run(
        [TICKS_BIN, "serve", "--port", "0", "--data-dir", str(tmp_path), "--api-key", "k",
         f"--api-secret={secrets.token_urlsafe(48)}", *flags],
        capture_output=True, text=True, timeout=30)
    assert result.returncode != 0
    assert complaint in result.stdout + result.stderr, result.stdout + result.stderr


# 2. Retries, dead calls, and retrying them


def test_failed_calls_are_retried_then_dead_listed_and_sent_again(store, receivers):
    """A call answered 500 is tried again after the first backoff, then after
    twice that (capped by the largest), with the same X-Webhook-Id and
    X-Webhook-Attempt 1, 2, 3; a call with no answer within --webhook-timeout
    is tried again too. After --webhook-attempts failures the call is dead:
    it no longer holds back its channel, GET /webhooks/failed lists it (server
    tokens only, in pages), and POST /webhooks/failed/retry sends it again,
    by delivery id or all of them. /metrics counts each outcome."""
    released = threading.Event()

    def answer(call):
        message = call.message_id
        if message == "flaky":
            return 500 if call.attempt < 3 else 200
        if message == "slow" and call.attempt == 1:
            time.sleep(3)  # past the 1 s timeout
            return 200
        if message in ("doomed1", "doomed2"):
            return 200 if released.is_set() else 500
        return 200

    receiver = receivers(answer)
    server = store.start(
        "--webhook", receiver.url, "--webhook-events", "message.new", "--webhook-attempts", "3",
        "--webhook-first-backoff", "0.2", "--webhook-max-backoff", "0.3", "--webhook-timeout", "1")
    client = client_of(server)
    client.upsert_users("amy", "ben")
    for name in ("flaky", "slow", "doomed1", "doomed2"):
        client.create_channel(f"messaging:{name}", ["amy", "ben"], created_by="amy")
    client.send_message("messaging:flaky", "amy", "x", message_id="flaky")
    client.send_message("messaging:slow", "amy", "x", message_id="slow")
    client.send_message("messaging:doomed1", "amy", "x", message_id="doomed1")
    client.send_message("messaging:doomed1", "amy", "x", message_id="after-doomed1")
    client.send_message("messaging:doomed2", "amy", "x", message_id="doomed2")

    def of(calls, message):
        return [c for c in calls if c.message_id == message]

    calls = receiver.wait_for(
        lambda calls: {"flaky", "after-doomed1"} <= delivered_ids(calls) and len(of(calls, "doomed2")) == 3
        and any(c.attempt == 2 and c.delivered for c in of(calls, "slow")),
        what="the flaky, slow and after-doomed1 calls delivered")

    flaky = of(calls, "flaky")
    assert [(c.attempt, c.status) for c in flaky] == [(1, 500), (2, 500), (3, 200)], flaky
    assert len({c.delivery_id for c in flaky}) == 1, "a retry keeps its delivery id"
    # Lower bounds only: the first backoff, then twice it capped at the largest (0.4 -> 0.3); the
    # server counts each from the start of the failed attempt, hence the margin.
    assert flaky[1].arrived - flaky[0].arrived >= 0.15 and flaky[2].arrived - flaky[1].arrived >= 0.25, flaky
    slow = of(calls, "slow")
    assert [c.attempt for c in slow][:2] == [1, 2] and len({c.delivery_id for c in slow}) == 1, slow
    doomed1 = of(calls, "doomed1")
    assert [(c.attempt, c.status) for c in doomed1] == [(1, 500), (2, 500), (3, 500)], doomed1
    # The channel's next call waited until the failing one was dead.
    after = of(calls, "after-doomed1")
    assert calls.index(after[0]) > calls.index(doomed1[-1]), calls

    def failed(**params):
        return client.call("GET", "/webhooks/failed", params=params)

    listed = poll_until(lambda: failed()["calls"], lambda found: len(found) == 2, "two dead calls")
    doomed_ids = [of(calls, "doomed1")[0].delivery_id, of(calls, "doomed2")[0].delivery_id]
    assert [c["delivery_id"] for c in listed] == doomed_ids, listed
    for entry, message in zip(listed, ("doomed1", "doomed2")):
        assert entry["hook"] == "webhook" and entry["url"] == receiver.url, entry
        assert (entry["event_type"], entry["cid"], entry["attempts"]) == ("message.new", f"messaging:{message}", 3)
        assert "500" in entry["last_error"] and entry["created_at"] and entry["failed_at"], entry
        assert json.loads(entry["payload"])["message"]["id"] == message, entry
    first_page = failed(limit=1)
    assert [c["delivery_id"] for c in first_page["calls"]] == doomed_ids[:1] and first_page["next"], first_page
    second_page = failed(limit=1, after=first_page["next"])
    assert [c["delivery_id"] for c in second_page["calls"]] == doomed_ids[1:], second_page
    assert "next" not in second_page or second_page["next"] is None, second_page

    amy = client.user_token("amy")
    refused(lambda: client.call("GET", "/webhooks/failed", token=amy), 403)
    refused(lambda: client.call("POST", "/webhooks/failed/retry", {}, token=amy), 403)
    for params in ({"after": "-1"}, {"limit": "0"}, {"limit": "101"}, {"limit": "ten"}):
        refused(lambda: failed(**params), 400)
    refused(lambda: client.call("POST", "/webhooks/failed/retry", {"delivery_ids": "all"}), 400)
    # Only dead calls are retried: a delivered call's id, or one never made, retries nothing.
    assert client.call("POST", "/webhooks/failed/retry", {"delivery_ids": [flaky[0].delivery_id, "no-such"]}) \
        ["retried"] == []

    # Counted once the server has the answers (the receiver records a call before answering it).
    metrics_reach(server, {
        ("ticks_webhook_calls_total", "failed"): 7,  # flaky 2, slow 1, doomed 2 + 2
        ("ticks_webhook_calls_total", "dead"): 2,
        ("ticks_webhook_calls_total", "delivered"): 3,
        ("ticks_webhook_outbox_calls", "dead"): 2,
        ("ticks_webhook_outbox_calls", "waiting"): 0})

    # The receiver works again: retry one by id, then the rest.
    released.set()
    assert client.call("POST", "/webhooks/failed/retry", {"delivery_ids": doomed_ids[:1]})["retried"] == doomed_ids[:1]
    calls = receiver.wait_for(lambda calls: "doomed1" in delivered_ids(calls), what="doomed1 sent again")
    again = of(calls, "doomed1")[-1]
    assert (again.delivery_id, again.attempt, again.status) == (doomed_ids[0], 1, 200), again
    assert [c["delivery_id"] for c in failed()["calls"]] == doomed_ids[1:]
    assert client.call("POST", "/webhooks/failed/retry", {"delivery_ids": []})["retried"] == []
    assert client.call("POST", "/webhooks/failed/retry", {})["retried"] == doomed_ids[1:]
    calls = receiver.wait_for(lambda calls: "doomed2" in delivered_ids(calls), what="doomed2 sent again")
    assert of(calls, "doomed2")[-1].delivery_id == doomed_ids[1]
    assert failed()["calls"] == []
    metrics_reach(server, {
        ("ticks_webhook_calls_total", "failed"): 7,
        ("ticks_webhook_calls_total", "dead"): 2,
        ("ticks_webhook_calls_total", "delivered"): 5,
        ("ticks_webhook_outbox_calls", "dead"): 0,
        ("ticks_webhook_outbox_calls", "waiting"): 0})


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_receiver_stalling_in_its_answer_is_timed_out_and_retried(store, receivers):
    """--webhook-timeout is what a whole call may take: a receiver that sends
    200 and the first byte of its body and then nothing has failed the call
    once the timeout is past; the call is tried again (attempt 2) and the
    channel's next call follows."""
    stall = threading.Event()
    receiver = receivers(lambda call: stall if call.message_id == "stalled" and call.attempt == 1 else 200)
    # Long enough that a loaded machine's answer to attempt 2 is not timed out as well.
    server = store.start("--webhook", receiver.url, "--webhook-events", "message.new", "--webhook-timeout", "3",
                         *FAST)
    try:
        client = client_of(server)
        client.upsert_users("amy", "ben")
        client.create_channel("messaging:stall", ["amy", "ben"], created_by="amy")
        client.send_message("messaging:stall", "amy", "x", message_id="stalled")
        client.send_message("messaging:stall", "amy", "x", message_id="next")
        # A timed-out call is retried (after 3 s, a 0.2 s backoff, the poll; a loaded machine takes longer).
        calls = receiver.wait_for(lambda calls: {"stalled", "next"} <= delivered_ids(calls), timeout=60,
                                  what="the stalled call retried and the next one sent")
        assert [(c.message_id, c.attempt) for c in calls] == [("stalled", 1), ("stalled", 2), ("next", 1)], calls
    finally:
        stall.set()


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_call_older_than_the_maximum_age_dies_expired(store, receivers):
    """A call still not delivered --webhook-max-age seconds after its change
    is dead however many attempts it has left: the sender's sweep (at start,
    then every few seconds) marks it, GET /webhooks/failed says it expired,
    and it is sent again on request."""
    up = threading.Event()
    receiver = receivers(lambda call: 200 if up.is_set() else 500)
    flags = ["--webhook", receiver.url, "--webhook-events", "message.new", "--webhook-max-age", "1",
             "--webhook-attempts", "1000", *FAST]
    server = store.start(*flags)
    client = client_of(server)
    client.upsert_users("amy", "ben")
    client.create_channel("messaging:old", ["amy", "ben"], created_by="amy")
    client.send_message("messaging:old", "amy", "x", message_id="old")
    sent = time.monotonic()
    receiver.wait_for(lambda calls: any(c.attempt >= 2 for c in calls), what="a retried call")
    time.sleep(max(0.0, sent + 1.5 - time.monotonic()))  # the call is now older than the maximum age
    assert server.stop() == 0, server.output()
    server = store.start(*flags)  # sweeps as it starts sending
    client = client_of(server)
    dead = poll_until(
        lambda: client.call("GET", "/webhooks/failed")["calls"], lambda calls: len(calls) == 1, "the expired call")
    assert "expired" in dead[0]["last_error"] and dead[0]["attempts"] >= 2, dead
    assert json.loads(dead[0]["payload"])["message"]["id"] == "old"
    up.set()
    assert client.call("POST", "/webhooks/failed/retry", {})["retried"] == [dead[0]["delivery_id"]]
    calls = receiver.wait_for(lambda calls: "old" in delivered_ids(calls), what="the expired call sent again")
    assert calls[-1].delivery_id == dead[0]["delivery_id"]


# 3. Order per channel

CHANNELS = 3
PER_CHANNEL = 15


def test_each_channel_calls_come_in_order_while_the_receiver_fails_some(store, receivers):
    """Ordering, as tested: for one receiver and one channel, calls are sent
    one at a time in the order their changes committed. Messages are sent to
    three channels at once (each channel's in sequence, one after the
    other's 2xx) while the receiver answers 500 to some calls (every fifth
    message's first attempt, and at random a tenth of all calls). Then, per
    channel: no call is attempted before every earlier message of the
    channel was answered 2xx; so the first 2xx of each message come in the
    order sent; every message is delivered, each under one X-Webhook-Id with
    attempts 1, 2, ... Across channels nothing is promised. Each message is
    already readable through the API when its call arrives (calls follow the
    commit)."""
    server_box = {}
    rng = random.Random(secrets.randbits(32))
    rng_lock = threading.Lock()
    visible = {}

    def answer(call):
        if call.type != "message.new":
            return 200
        message = call.message_id
        if message not in visible:
            found = client_of(server_box["server"]).raw("GET", f"/messages/{message}")
            visible[message] = found.status_code == 200
        with rng_lock:
            unlucky = rng.random() < 0.1
        if call.attempt == 1 and int(message.rsplit("-", 1)[1]) % 5 == 2:
            return 500
        return 500 if unlucky else 200

    receiver = receivers(answer)
    server = store.start(
        "--webhook", receiver.url, "--webhook-events", "message.new", "--webhook-attempts", "100",
        "--webhook-first-backoff", "0.05", "--webhook-max-backoff", "0.1", "--webhook-concurrency", "4")
    server_box["server"] = server
    client = client_of(server)
    client.upsert_users("amy", "ben")
    cids = [f"messaging:order{i}" for i in range(CHANNELS)]
    for cid in cids:
        client.create_channel(cid, ["amy", "ben"], created_by="amy")
    sent = {cid: [f"o{i}-{n}" for n in range(PER_CHANNEL)] for i, cid in enumerate(cids)}

    def send_all(cid):
        sender = client_of(server)
        for message in sent[cid]:
            sender.send_message(cid, "amy", message, message_id=message)

    with ThreadPoolExecutor(CHANNELS) as pool:
        list(pool.map(send_all, cids))

    everything = {m for messages in sent.values() for m in messages}
    calls = receiver.wait_for(lambda calls: delivered_ids(calls) >= everything, timeout=60,
                              what="every message delivered")
    for cid in cids:
        mine = [c for c in calls if c.event["cid"] == cid]
        done = set()
        for call in mine:
            position = sent[cid].index(call.message_id)
            assert set(sent[cid][:position]) <= done, \
                f"{cid}: {call} was sent before every earlier message was delivered: {mine}"
            if call.delivered:
                done.add(call.message_id)
        assert first_deliveries(calls, cid) == sent[cid], mine
        assert any(c.status == 500 for c in mine), "the receiver must have failed calls of every channel"
    for message in everything:
        mine = [c for c in calls if c.message_id == message]
        assert len({c.delivery_id for c in mine}) == 1, mine
        assert [c.attempt for c in mine] == list(range(1, len(mine) + 1)), mine
    assert all(visible[m] for m in everything), [m for m in everything if not visible[m]]


# 4. Nothing lost across kill -9

KILL_CHANNELS = 3
KILL_PER_CHANNEL = 10


def test_calls_survive_a_kill_and_only_committed_changes_make_calls(store, receivers):
    """With the receiver failing every call, messages answered 2xx have
    their calls in the outbox; the server is killed with SIGKILL and started
    again on the same data, the receiver works again, and every message's
    message.new arrives (at least once), under the delivery id it had before
    the kill. Sends the server refused (a non-member's, a reply to no
    message) make no call: the calls are written in the change's own
    transaction, so a change that did not commit leaves none."""
    up = threading.Event()
    receiver = receivers(lambda call: 200 if up.is_set() else 500)
    flags = ["--webhook", receiver.url, "--webhook-events", "message.new", "--webhook-attempts", "1000",
             "--webhook-first-backoff", "0.1", "--webhook-max-backoff", "0.2"]
    server = store.start(*flags)
    client = client_of(server)
    client.upsert_users("amy", "ben", "eve")
    cids = [f"messaging:kill{i}" for i in range(KILL_CHANNELS)]
    for cid in cids:
        client.create_channel(cid, ["amy", "ben"], created_by="amy")
    sent = {cid: [f"k{i}-{n}" for n in range(KILL_PER_CHANNEL)] for i, cid in enumerate(cids)}

    def send_all(cid):
        sender = client_of(server)
        for n, message in enumerate(sent[cid]):
            if cid == cids[0] and n == KILL_PER_CHANNEL // 2:
                refused(lambda: sender.send_message(cid, "eve", "not a member", message_id="refused-member",
                                                    token=sender.user_token("eve")), 403)
                with pytest.raises(APIError) as error:
                    sender.send_message(cid, "amy", "reply", message_id="refused-reply", parent_id="no-such")
                assert 400 <= error.value.status < 500, error.value
            sender.send_message(cid, "amy", message, message_id=message)

    with ThreadPoolExecutor(KILL_CHANNELS) as pool:
        list(pool.map(send_all, cids))
    everything = {m for messages in sent.values() for m in messages}
    assert metric(server, "ticks_webhook_outbox_calls", state="waiting") == len(everything)
    # Killed while it retries: the head of every channel has been tried and failed.
    before = receiver.wait_for(
        lambda calls: {c.event["cid"] for c in calls if c.attempt >= 2} == set(cids),
        what="a retried call in every channel")
    server.process.kill()
    server.process.wait(timeout=10)
    ids_before = {c.message_id: c.delivery_id for c in before}

    up.set()
    store.start(*flags)
    # On PostgreSQL the dead node's lease on sending (15 s) must run out first;
    # on SQLite the restarted server takes it back at once.
    calls = receiver.wait_for(lambda calls: delivered_ids(calls) >= everything, timeout=60,
                              what="every message's call after the restart")
    assert not {"refused-member", "refused-reply"} & {c.message_id for c in calls}, calls
    for message, delivery_id in ids_before.items():
        assert {c.delivery_id for c in calls if c.message_id == message} == {delivery_id}, message
    for cid in cids:
        assert first_deliveries(calls, cid) == sent[cid]


# 5. The push hook and its delivery-only token


def test_the_push_hook_names_members_without_a_socket_with_a_delivery_only_token(store, receivers):
    """A new message makes one push call naming the members, author aside,
    with no open WebSocket, with their unread counts and a token (HS256, the
    api secret, scope "delivery", the channel, an expiry of
    --delivery-token-lifetime) with which the member's device marks the
    message delivered, as the author then sees. A push call that failed is
    retried like a webhook call, with the same delivery id and its
    recipients. The token may do nothing else: mark read, send, query,
    GET /app, another channel's messages, another user, or open a WebSocket
    are refused (403, code 17); a token with another scope, or a delivery
    scope without an expiry, is not a token (401). A reply shown only in its
    thread is not pushed."""
    push = receivers(lambda call: 500 if call.message_id == "p1" and call.attempt == 1 else 200)
    server = store.start("--push-hook", push.url, "--delivery-token-lifetime", "120", *FAST)
    client = client_of(server)
    client.upsert_users("amy", "onno", "ossi")
    cid, other = "messaging:push", "messaging:elsewhere"
    client.create_channel(cid, ["amy", "onno", "ossi"], created_by="amy")
    client.create_channel(other, ["amy", "ossi"], created_by="amy")
    online = Socket(server, client, "onno")
    try:
        client.send_message(cid, "amy", "are you there?", message_id="p1")
        client.send_message(other, "amy", "and here?", message_id="p2")
        calls = push.wait_for(lambda calls: {"p1", "p2"} <= delivered_ids(calls), what="both push calls")
        online.wait_for(lambda e: e["type"] == "message.new" and e["message"]["id"] == "p1")
    finally:
        online.close()

    attempts = [c for c in calls if c.message_id == "p1"]
    assert [(c.attempt, c.status) for c in attempts] == [(1, 500), (2, 200)], attempts
    assert attempts[0].delivery_id == attempts[1].delivery_id
    assert metric(server, "ticks_webhook_calls_total", kind="push", outcome="failed") == 1
    for call in attempts:
        assert call.path == "/hook" and call.headers["X-Signature"] == signature(call.body, server.api_secret)
        assert call.type == "message.new" and call.event["cid"] == cid and call.event["user"]["id"] == "amy"
        assert call.event["message"]["id"] == "p1" and call.event["message"]["text"] == "are you there?"
        assert [r["user_id"] for r in call.event["recipients"]] == ["ossi"], call.event["recipients"]
    recipients = attempts[1].event["recipients"]
    # ossi has p1 unread here, and p2 in the other channel was sent after this call was written.
    assert (recipients[0]["unread_count"], recipients[0]["total_unread_count"]) == (1, 1), recipients
    token = recipients[0]["delivery_token"]
    claims = jwt_claims(token, server.api_secret)
    assert (claims["user_id"], claims["scope"], claims["channel_cid"]) == ("ossi", "delivery", cid), claims
    assert claims["exp"] == int(claims["exp"]) and time.time() + 60 < claims["exp"] <= time.time() + 121, claims
    other_call = next(c for c in calls if c.message_id == "p2")
    assert [r["user_id"] for r in other_call.event["recipients"]] == ["ossi"]
    assert other_call.event["recipients"][0]["total_unread_count"] == 2

    def mark_delivered(*entries, user=None):
        body = {"latest_delivered_messages": [{"cid": c, "id": m} for c, m in entries]}
        if user:
            body["user_id"] = user
        return client.call("POST", "/channels/delivered", body, token=token)

    # Refused: another channel, alone or with this one (nothing of either is marked), another user,
    # and every other call.
    for attempt in (
            lambda: mark_delivered((other, "p2")),
            lambda: mark_delivered((cid, "p1"), (other, "p2")),
            lambda: mark_delivered((cid, "p1"), user="onno"),
            lambda: client.mark_read(cid, "ossi", token=token),
            lambda: client.send_message(cid, "ossi", "hi", token=token),
            lambda: client.query_channel(cid, token=token),
            lambda: client.call("GET", "/app", token=token),
            lambda: client.call("GET", "/webhooks/failed", token=token)):
        assert refused(attempt, 403)["code"] == 17
    for claims in ({"user_id": "ossi", "scope": "read", "channel_cid": cid, "exp": int(time.time()) + 60},
                   {"user_id": "ossi", "scope": "delivery", "channel_cid": cid}):
        made = make_token(server.api_secret, claims=claims)
        refused(lambda: client.call("POST", "/channels/delivered", {"latest_delivered_messages": [
            {"cid": cid, "id": "p1"}]}, token=made), 401)
    for message in ("p1", "p2"):
        assert not receipt(client, message, "ossi").get("delivered_at"), message
    # As Stream refuses a connection: its only frame is the error, then it closes (1000).
    with connect(client.socket_url("ossi", token=token), open_timeout=10) as socket:
        error = json.loads(socket.recv(timeout=10))["error"]
        assert error["StatusCode"] == 403 and "delivery" in error["message"], error
        with pytest.raises(ConnectionClosed) as closed:
            socket.recv(timeout=10)
        assert closed.value.rcvd.code == 1000
    with connect(client.socket_url("ossi"), open_timeout=10) as ordinary:  # the user's own token may
        assert json.loads(ordinary.recv(timeout=10))["type"] == "health.check"

    mark_delivered((cid, "p1"))
    seen = receipt(client, "p1", "ossi", token=client.user_token("amy"))  # as the author sees it
    assert seen.get("delivered_at") and not seen.get("read_at"), seen
    assert not receipt(client, "p2", "ossi").get("delivered_at")

    # A reply shown only in its thread is not pushed; the next message is (the fence: one channel's
    # push calls come in order), and the reply counted in no unread count. onno's socket is closed now.
    client.send_message(cid, "amy", "in the thread", message_id="r1", parent_id="p1")
    client.send_message(cid, "amy", "and again", message_id="p3")
    calls = push.wait_for(lambda calls: "p3" in delivered_ids(calls), what="the push call of p3")
    assert "r1" not in {c.message_id for c in calls}, calls
    after = next(c for c in calls if c.message_id == "p3").event["recipients"]
    assert sorted((r["user_id"], r["unread_count"], r["total_unread_count"]) for r in after) == \
        [("onno", 2, 2), ("ossi", 2, 3)], after


# 6. A receiver that hangs holds no receipt


def test_a_hanging_receiver_holds_no_receipt_and_loses_nothing_on_a_graceful_stop(store, receivers):
    """While the receiver takes every call and never answers, with both of
    --webhook-concurrency's calls stuck in it, messages, deliveries and
    reads keep answering 2xx, and no third call is made. The server then
    stops gracefully (exit 0) with the calls still hanging, and once
    restarted sends every change's call, the stuck ones included, each
    channel's in order. (How fast receipts are with a dead receiver is for
    the benchmark.)"""
    release = threading.Event()

    def answer(call):
        release.wait(60)
        return 200

    receiver = receivers(answer)
    flags = ["--webhook", receiver.url, "--webhook-timeout", "60", "--webhook-concurrency", "2", *FAST]
    server = store.start(*flags)
    try:
        client = client_of(server)
        client.upsert_users("amy", "ben")
        cids = [f"messaging:hang{i}" for i in range(4)]
        for cid in cids:
            client.create_channel(cid, ["amy", "ben"], created_by="amy")
        stuck = receiver.wait_for(lambda calls: len(calls) >= 2, what="two calls stuck in the receiver")
        quick = Ticks(server.base_url, server.api_key, server.api_secret, timeout=5)
        for cid in cids:
            message = f"{cid.split(':')[1]}-m"
            quick.send_message(cid, "amy", "still here", message_id=message)
            quick.mark_delivered("ben", (cid, message))
            quick.mark_read(cid, "ben")
        assert len(receiver.snapshot()) == 2, receiver.snapshot()
        assert server.stop() == 0, server.output()
    finally:
        release.set()

    restart_index = len(receiver.snapshot())
    store.start(*flags)
    # Each receipt makes amy's message delivered to all, then read by all (R13): ben is every other member.
    expected = ["channel.created", "message.new", "message.delivered", "message.delivered_to_all", "message.read",
                "message.read_by_all"]
    calls = receiver.wait_for(
        lambda calls: len({c.delivery_id for c in calls[restart_index:] if c.delivered}) >= len(cids) * len(expected),
        what="every change's call after the restart")[restart_index:]
    for cid in cids:
        assert [c.type for c in calls if c.event["cid"] == cid and c.delivered] == expected, calls
    assert {c.delivery_id for c in stuck} <= {c.delivery_id for c in calls if c.delivered}
