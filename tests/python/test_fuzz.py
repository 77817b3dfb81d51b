"""Fuzzes the HTTP API with Schemathesis against the OpenAPI document.

Each store (SQLite, and PostgreSQL when TICKS_TEST_POSTGRES_URL is set),
fuzzed side by side, gets a fresh `ticks serve --demo` on loopback with rate limits off, seeded through
the API with the objects the document's examples name (users fuzz-alice,
fuzz-bob and fuzz-carol, channel messaging:fuzz-general, messages fuzz-m1 and
fuzz-m2, fuzz-bob's reply fuzz-r1 in fuzz-m1's thread, fuzz-bob's voice note
fuzz-voice; and channel messaging:fuzz-doomed with message fuzz-doomed-m1, which the examples of the
deleting and truncating operations name so that they leave the other
examples' objects alone). Schemathesis then sends every operation
but the WebSocket's, valid and invalid requests alike, first with fuzz-alice's
user token and then with a server token, and checks each answer: no 5xx, a
documented status, content type, headers and body. The operations that delete
or truncate come last (DESTRUCTIVE: again with each token), so that they do
not take the seeded channel and messages away from the others. Afterwards the
server must still be running and answer /health.

TICKS_FUZZ_EXAMPLES sets the examples per operation and phase (more finds
more, slower); TICKS_FUZZ_SEED the seed (fixed, so a run can be repeated);
TICKS_FUZZ_SKIP a comma-separated list of operationIds to leave out (while a
known bug in one of them is being fixed); TICKS_FUZZ_ONLY a comma-separated list
of the only operationIds to fuzz (to reproduce a failure quickly); TICKS_FUZZ_TIMES
a file to which each call appends its time, phase and operation (where a run's
time goes: most of it is the fuzzer's own generation, not the server).
"""

import concurrent.futures
import contextlib
import copy
import importlib.util
import json
import os
import secrets
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest
import requests
from conftest import POSTGRES_URL, TicksProcess, store_arguments
from wire import Ticks

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT = ROOT / "Sources" / "TicksServer" / "OpenAPI" / "openapi.json"

# How every fuzzed server runs: the demo (for POST /demo/token) on loopback only, and
# no rate limits, which would otherwise answer the fuzzer's volume with 429s.
SERVER_ARGS = ("--demo", "--host", "127.0.0.1", "--rate-limits", "off")

EXAMPLES = int(os.environ.get("TICKS_FUZZ_EXAMPLES", "100"))
SEED = int(os.environ.get("TICKS_FUZZ_SEED", "20261125"))
SKIPPED = [name.strip() for name in os.environ.get("TICKS_FUZZ_SKIP", "").split(",") if name.strip()]
ONLY = [name.strip() for name in os.environ.get("TICKS_FUZZ_ONLY", "").split(",") if name.strip()]

# What the fuzzer checks in every answer.
CHECKS = ",".join([
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
])

SEED_USERS = ["fuzz-alice", "fuzz-bob", "fuzz-carol"]
SEED_CHANNEL = "messaging:fuzz-general"
SEED_MESSAGES = ["fuzz-m1", "fuzz-m2", "fuzz-voice"]
SEED_REPLY = "fuzz-r1"  # fuzz-bob's, in the thread of fuzz-m1
DOOMED_CHANNEL = "messaging:fuzz-doomed"

# Operations that delete or truncate, fuzzed after every other operation has
# been fuzzed with both tokens.
DESTRUCTIVE = ["DeleteChannel", "DeleteChannels", "TruncateChannel", "DeleteMessage", "DeleteUser", "DeleteUsers"]
DESTRUCTIVE += [name + "V2" for name in DESTRUCTIVE if name != "DeleteUser"]  # API v2's paths (no DeleteUser there)

# Ids no client could have made: every id the fuzzer fills from a dictionary gets
# them now and then, and `with_a_hostile_id` puts one into a quarter of the cases
# that have an id.
#
# Why Schemathesis never sent `GET /channeltypes/a%00b` or
# `{"delivery_ids": ["a\u0000b"]}` (issue 22) on its own: in positive mode it draws
# ids from their `pattern` (the id's own alphabet, never U+0000) and takes only the
# dictionary entries that match the schema; in negative mode it breaks a pattern by
# appending "*" to a valid value, or with one non-matching text per pattern that the
# coverage phase caches for the whole run; Hypothesis' text strategy draws U+0000 too
# rarely for 100 examples per operation, most of which go to other mutations (a
# missing field, a wrong type). The dictionaries' hostile entries did not change that
# (a run of 500 cases of the three operations against the old server still missed
# the 500s): Schemathesis offers the entries that break the schema to negative cases
# only, and few of those carry one where a store would see it.
#
# What finds them: the hooks below (Schemathesis loads this file through
# SCHEMATHESIS_HOOKS, see `run_schemathesis`) replace one id (a path parameter, or a
# body field bound to an id dictionary) with one of HOSTILE_IDS in one case in
# HOSTILE_SHARE that has an id, positive and negative cases alike, in every phase,
# with both tokens. A positive case so changed stays correct to check: every
# operation documents 400, which the server answers (code 4) before a store sees the
# id. Against the old server on PostgreSQL a run of GetChannelType,
# UpdateChannelType and RetryFailedWebhooks alone (TICKS_FUZZ_ONLY) finds all three
# 500s. tests/python/test_ids.py still sends each hostile id, and invalid UTF-8, to
# every id of the document on both stores, which no random run guarantees.
HOSTILE_IDS = [
    "fuzz\u0000alice", "fuzz-alice\u001f", "fuzz-\u0430lice", "\uff46uzz-alice", "fuzz-alice ", "fuzz\u200d-alice",
    "f" * 65, "f" * 256, "a\u0000b", "\u0000",
]

# Values the fuzzer substitutes now and then for generated ones, so that random
# requests also reach the seeded objects, texts that are hard to store, and ids
# no client could have made (used by negative cases only: they break the schema).
DICTIONARIES = {
    "users": [*SEED_USERS, *HOSTILE_IDS],
    "messages": [*SEED_MESSAGES, *HOSTILE_IDS],
    "cids": [SEED_CHANNEL, "livestream:fuzz-general", "messaging:fuzz-none",
             "messaging:fuzz\u0000general", "messaging:fuzz-gener\u0430l", "m\u0435ssaging:fuzz-general",
             "messaging:fuzz-general ", "messaging:" + "g" * 256],
    "types": ["messaging", "team", "livestream", "fuzz-type", *HOSTILE_IDS],
    "path-ids": ["fuzz-general", *SEED_MESSAGES, *HOSTILE_IDS],
    "replies": [SEED_REPLY, *HOSTILE_IDS],
    "delivery-ids": ["3f1c2a9e-0000-4000-8000-000000000000", *HOSTILE_IDS],
    "hostile-ids": HOSTILE_IDS,
    "texts": ["\u0000", "nul \u0000 inside", "\u202eright to left", "e\u0301", "👍🏽", "\ufeff",
              "𝒳" * 5000, "𝒳" * 5001, "x" * 20000],
}
BINDINGS = {
    "path.type": ("types", 0.5),
    "path.id": ("path-ids", 0.5),
    "path.name": ("types", 0.5),
    "query.user_id": ("users", 0.5),
    "body.user_id": ("users", 0.5),
    "body.user.id": ("users", 0.5),
    "body.message_id": ("messages", 0.5),
    "body.message.id": ("messages", 0.2),
    "body.message.user.id": ("users", 0.5),
    "body.message.text": ("texts", 0.3),
    "body.latest_delivered_messages[*].cid": ("cids", 0.5),
    "body.latest_delivered_messages[*].id": ("messages", 0.5),
    "body.data.members[*]": ("users", 0.5),
    "body.data.created_by.id": ("users", 0.5),
    "body.add_members[*]": ("users", 0.5),
    "body.remove_members[*]": ("users", 0.3),
    "body.add_moderators[*]": ("users", 0.5),
    "body.demote_moderators[*]": ("users", 0.5),
    "body.messages.id_lt": ("messages", 0.5),
    "body.message.parent_id": ("messages", 0.5),
    "body.thread_id": ("messages", 0.5),
    "query.id_lt": ("replies", 0.5),
    "path.user_id": ("users", 0.5),
    "query.deleted_by": ("users", 0.5),
    "body.user_ids[*]": ("users", 0.5),
    "body.users[*].id": ("users", 0.5),
    "body.channel_cids[*]": ("cids", 0.5),
    "body.delivery_ids[*]": ("delivery-ids", 0.5),
    "body.name": ("hostile-ids", 0.5),
}


# One case in HOSTILE_SHARE that has ids, valid or invalid, from every phase, gets one of its ids
# (a path parameter, or a body field bound to an id dictionary) replaced by one of
# HOSTILE_IDS (see `with_a_hostile_id`).
HOSTILE_SHARE = 4
HOSTILE_BODY_FIELDS = [key.removeprefix("body.").replace("[*]", ".*").split(".")
                       for key, (dictionary, _) in BINDINGS.items()
                       if key.startswith("body.") and dictionary != "texts"]


def id_slots(value, field):
    """(container, key) of every text in `value` at `field` (names, "*" for every item of a list)."""
    if not field:
        return []
    name, rest = field[0], field[1:]
    if name == "*":
        keys = range(len(value)) if isinstance(value, list) else []
    else:
        keys = [name] if isinstance(value, dict) and name in value else []
    return [slot for key in keys
            for slot in ([(value, key)] if not rest and isinstance(value[key], str) else id_slots(value[key], rest))]


def with_a_hostile_id(case, number):
    """`case`, or (when `number` is a multiple of HOSTILE_SHARE) `case` with one of its ids
    (which one, and which of HOSTILE_IDS, follow from `number` too) replaced by one of HOSTILE_IDS."""
    path_parameters = dict(case.path_parameters or {})
    body = copy.deepcopy(case.body) if isinstance(case.body, (dict, list)) else None
    slots = [(path_parameters, name) for name, value in sorted(path_parameters.items()) if isinstance(value, str)]
    slots += [slot for field in HOSTILE_BODY_FIELDS for slot in id_slots(body, field)]
    if not slots or number % HOSTILE_SHARE:
        return case
    container, key = slots[(number // HOSTILE_SHARE) % len(slots)]
    container[key] = HOSTILE_IDS[(number // HOSTILE_SHARE // len(slots)) % len(HOSTILE_IDS)]
    case.path_parameters = path_parameters
    if body is not None:
        case.body = body
    return case


# Whole numbers at the edges (issue 55: an offset of 2^63-1 overflowed `offset + limit` and
# killed the server; Hypothesis keeps to an integer's bounds in positive cases and goes just
# past them in negative ones, never to the ends of 64 bits). One case in HOSTILE_SHARE, another
# residue than the hostile ids', gets one integer of its query, its `payload` or its body
# replaced by one of these; tests/python/test_numbers.py sends each to every integer anyway.
EDGE_NUMBERS = [-1, 0, 2**31, 2**53, 2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 2**64]


def integer_slots(value):
    """(container, key) of every whole number (not a bool) in a JSON value."""
    if isinstance(value, dict):
        pairs = list(value.items())
    elif isinstance(value, list):
        pairs = list(enumerate(value))
    else:
        return []
    slots = []
    for key, item in pairs:
        if isinstance(item, int) and not isinstance(item, bool):
            slots.append((value, key))
        else:
            slots += integer_slots(item)
    return slots


def with_an_edge_number(case, number):
    """`case`, or (when `number` is 1 more than a multiple of HOSTILE_SHARE) `case` with one of its
    whole numbers (in its query, its `payload` JSON or its body) at one of EDGE_NUMBERS."""
    if number % HOSTILE_SHARE != 1:
        return case
    query = dict(case.query or {})
    body = copy.deepcopy(case.body) if isinstance(case.body, (dict, list)) else None
    payload, payload_text = None, isinstance(query.get("payload"), str)
    if payload_text:
        try:
            payload = json.loads(query["payload"])
        except ValueError:
            payload = None
    elif isinstance(query.get("payload"), (dict, list)):
        payload = copy.deepcopy(query["payload"])
    slots = integer_slots(body) + integer_slots(payload)
    slots += [(query, name) for name, value in sorted(query.items())
              if isinstance(value, int) and not isinstance(value, bool)
              or isinstance(value, str) and value.lstrip("-").isdigit()]
    if not slots:
        return case
    container, key = slots[(number // HOSTILE_SHARE) % len(slots)]
    edge = EDGE_NUMBERS[(number // HOSTILE_SHARE // len(slots)) % len(EDGE_NUMBERS)]
    container[key] = str(edge) if container is query else edge
    if payload is not None:
        query["payload"] = json.dumps(payload) if payload_text else payload
    case.query = query
    if body is not None:
        case.body = body
    return case


def drawn_by_hypothesis(case):
    return case.meta is not None and case.meta.phase.name == "fuzzing"


if __name__ == "_schemathesis_hooks":  # loaded by Schemathesis (SCHEMATHESIS_HOOKS), not by pytest
    import schemathesis
    from hypothesis import strategies

    @schemathesis.hook
    def map_case(context, case):
        """The examples' and coverage phase's cases (no Hypothesis draws there): the number
        is a checksum of the case, so the same case is always sent the same way."""
        if drawn_by_hypothesis(case):
            return case
        number = zlib.crc32(repr((case.operation.label, case.path_parameters, case.query, case.body))
                            .encode("utf-8", "surrogatepass"))
        return with_an_edge_number(with_a_hostile_id(case, number), number)

    @schemathesis.hook
    def flatmap_case(context, case):
        """The fuzzing phase's cases: Hypothesis draws the number (so it replays and shrinks
        a failure like any other draw; a checksum would repeat itself on the many equal cases)."""
        if not drawn_by_hypothesis(case):
            return strategies.just(case)
        return strategies.integers(0, 2**32).map(
            lambda number: with_an_edge_number(with_a_hostile_id(case, number), number))

    @schemathesis.hook
    def after_call(context, case, response):
        """A heartbeat for `wait_while_progressing`: Schemathesis itself writes only when a
        phase ends, and the fuzzing phase can run for many minutes."""
        os.utime(os.environ["TICKS_FUZZ_HEARTBEAT"])
        if os.environ.get("TICKS_FUZZ_TIMES"):  # where a run spends its time: one line a call
            with open(os.environ["TICKS_FUZZ_TIMES"], "a") as times:
                times.write(f"{time.monotonic():.3f}\t{case.meta.phase.name if case.meta else '-'}"
                            f"\t{case.operation.label}\n")


def toml_string(text):
    """A TOML basic string: printable characters as they are, the rest escaped."""
    out = []
    for char in text:
        code = ord(char)
        if char in '"\\':
            out.append("\\" + char)
        elif code < 0x20 or 0x7F <= code < 0xA0 or 0xD800 <= code < 0xE000 or char in "\u2028\u2029\ufeff\u202e":
            out.append(f"\\u{code:04X}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def schemathesis_config(api_key, token):
    """schemathesis.toml: the credentials (the document's security schemes) and the dictionaries."""
    lines = [
        "[auth.openapi.api_key]", f"api_key = {toml_string(api_key)}",
        "[auth.openapi.JWT]", f"api_key = {toml_string(token)}",
        "[auth.openapi.stream-auth-type]", 'api_key = "jwt"',
    ]
    for name, values in DICTIONARIES.items():
        lines += [f"[dictionaries.{name}]", "values = [" + ", ".join(toml_string(v) for v in values) + "]"]
    # No values from earlier answers in the fuzzing phase's cases: collecting them took 43 % of a
    # run's time (the fuzzing phase of fuzz-alice's run: 279 s with them, 160 s without, the same
    # 7,800 requests, 2026-12-03, TICKS_FUZZ_TIMES), and the dictionaries already put the seeded
    # objects' ids into half the cases that have an id.
    lines += ["[phases.fuzzing.extra-data-sources]", "responses = false"]
    lines.append("[parameters]")
    for key, (dictionary, probability) in BINDINGS.items():
        lines.append(f'{toml_string(key)} = {{ dictionary = "{dictionary}", probability = {probability} }}')
    return "\n".join(lines) + "\n"


def run_schemathesis(base_url, api_key, token, work_dir, label, destructive=False):
    """Runs Schemathesis once over every operation but Connect and the DESTRUCTIVE ones,
    or (`destructive`) over the DESTRUCTIVE ones only; its exit code and output."""
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    config = work_dir / f"schemathesis-{label}.toml"
    config.write_text(schemathesis_config(api_key, token))
    command = [
        sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "--no-color",
        "run", str(DOCUMENT), "--url", base_url,
        "--exclude-operation-id", "Connect",  # the WebSocket (`x-websocket` in the document)
        # The destructive run: ONLY's destructive operations when it names some, else them all.
        *(argument for name in ([n for n in ONLY if n in DESTRUCTIVE] or DESTRUCTIVE if destructive else DESTRUCTIVE)
          for argument in ("--include-operation-id" if destructive else "--exclude-operation-id", name)),
        *(argument for name in SKIPPED for argument in ("--exclude-operation-id", name)),
        *(argument for name in ONLY if name not in DESTRUCTIVE and not destructive
          for argument in ("--include-operation-id", name)),
        "--phases", "examples,coverage,fuzzing",
        "--mode", "all",  # valid and invalid requests
        "--checks", CHECKS,
        "--max-examples", str(EXAMPLES),
        "--seed", str(SEED),
        "--generation-database", "none",  # no .hypothesis folder, no replays of earlier runs
        "--suppress-health-check", "all",
        "--workers", "1",  # hypothesis is not thread-safe here (AST recursion depth errors with 2)
        "--request-timeout", "30",
        "--output-sanitize", "false",  # throwaway credentials: keep the reproducing curl commands whole
    ]
    started = time.monotonic()
    environment = {**os.environ, "SCHEMATHESIS_HOOKS": str(Path(__file__).resolve()),  # the hooks above
                   "PYTHONUNBUFFERED": "1",  # each line reaches the log as it is written (the watchdog reads it)
                   "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parent),
                                                  *filter(None, [os.environ.get("PYTHONPATH")])])}
    log, heartbeat = work_dir / f"schemathesis-{label}.log", work_dir / f"schemathesis-{label}.heartbeat"
    heartbeat.touch()
    environment["TICKS_FUZZ_HEARTBEAT"] = str(heartbeat)  # touched after each call (`after_call`)
    with log.open("wb") as sink:
        process = subprocess.Popen(command, cwd=work_dir, env=environment, stdout=sink, stderr=subprocess.STDOUT)
        returncode = wait_while_progressing(process, log, heartbeat)
    output = log.read_text(errors="replace")
    return returncode, f"--- schemathesis as {label} ({time.monotonic() - started:.0f}s, exit " \
                       f"{returncode}): {' '.join(command)}\n{output}"


# Each request Schemathesis makes touches the run's heartbeat file (the `after_call` hook), and
# one request takes well under a second unloaded. A run that neither calls nor writes for this
# long is stuck (a request that never answers is cut at --request-timeout, 30 s), so it is
# stopped and reported. There is no bound on the whole run: how long its thousands of requests
# take depends on how busy the machine is (under scripts/test-under-load one run took more than
# 30 minutes, 2026-12-03), not on whether the server works.
STALLED_AFTER_SECONDS = 600


def wait_while_progressing(process, *watched, stalled_after=STALLED_AFTER_SECONDS, poll=5):
    """`process`'s exit code once it ends, or -9 once none of the `watched` files has changed
    (size or modification time) for `stalled_after` seconds: the process is then killed, and a
    last line in the first of them (its log) says why."""
    def signature():
        return [(path.stat().st_size, path.stat().st_mtime_ns) for path in watched]
    seen, changed = None, time.monotonic()
    while process.poll() is None:
        if (now := signature()) != seen:
            seen, changed = now, time.monotonic()
        elif time.monotonic() - changed > stalled_after:
            process.kill()
            process.wait()
            with watched[0].open("a") as sink:
                sink.write(f"\n--- stopped: nothing for {stalled_after} s (the run is stuck)\n")
            return -9
        time.sleep(poll)
    return process.returncode


def seed(client):
    """The objects the document's examples name."""
    client.upsert_users(*({"id": user, "name": user.split("-")[1].title()} for user in SEED_USERS))
    client.create_channel(SEED_CHANNEL, ["fuzz-alice", "fuzz-bob"], created_by="fuzz-alice")
    client.send_message(SEED_CHANNEL, "fuzz-alice", "Hello", message_id="fuzz-m1")
    client.send_message(SEED_CHANNEL, "fuzz-bob", "Hi Alice", message_id="fuzz-m2")
    client.mark_delivered("fuzz-bob", (SEED_CHANNEL, "fuzz-m1"))
    client.mark_read(SEED_CHANNEL, "fuzz-bob", message_id="fuzz-m1")
    client.send_message(SEED_CHANNEL, "fuzz-bob", "In the thread", message_id=SEED_REPLY, parent_id="fuzz-m1")
    # MarkPlayed's example: fuzz-bob's voice note, for fuzz-alice to play (R14).
    client.send_message(SEED_CHANNEL, "fuzz-bob", "", message_id="fuzz-voice",
                        attachments=[{"type": "voiceRecording", "asset_url": "https://example.com/fuzz.m4a"}])
    client.create_channel(DOOMED_CHANNEL, ["fuzz-alice", "fuzz-bob"], created_by="fuzz-alice")
    client.send_message(DOOMED_CHANNEL, "fuzz-bob", "Soon gone", message_id="fuzz-doomed-m1")
    # DeleteUser's example: a member of the doomed channel with a message there.
    client.upsert_users({"id": "fuzz-doomed-user", "name": "Doomed"})
    client.update_members(DOOMED_CHANNEL, add=["fuzz-doomed-user"])
    client.send_message(DOOMED_CHANNEL, "fuzz-doomed-user", "Bye", message_id="fuzz-doomed-m2")


@pytest.fixture
def schemathesis_installed():
    if importlib.util.find_spec("schemathesis") is None:
        if os.environ.get("CI"):
            pytest.fail("CI must run the fuzz tests: schemathesis is not installed (scripts/test installs it)")
        pytest.skip("schemathesis is not installed (scripts/test installs it)")


def fuzzed_stores():
    """The stores to fuzz: SQLite, and PostgreSQL when there is a test database (CI must have one:
    `store_arguments` fails there without it)."""
    return ["sqlite"] + (["postgres"] if POSTGRES_URL or os.environ.get("CI") else [])


@pytest.fixture
def fuzzed_servers(tmp_path, schemathesis_installed):
    """A seeded demo server on each store (`fuzzed_stores`), by store; each stopped (and its schema
    dropped) afterwards, and each that was still running must stop gracefully."""
    with contextlib.ExitStack() as stack:
        servers = {}
        for store in fuzzed_stores():
            store_args = stack.enter_context(store_arguments(store, "fuzz"))
            server = TicksProcess(tmp_path / store / "server", api_key="fuzzkey",
                                  api_secret=secrets.token_urlsafe(48), extra_args=[*SERVER_ARGS, *store_args])
            stack.callback(stop_gracefully, server)
            seed(Ticks(server.base_url, server.api_key, server.api_secret))
            servers[store] = server
        yield servers


def stop_gracefully(server):
    """Stops `server`; the test reports a server that died, one still running must exit 0."""
    running = server.process.poll() is None
    code = server.stop()
    assert not running or code == 0, server_log(server)


def server_log(server):
    """What the server wrote: its errors and crash reports first, then the end of it."""
    lines = server.output().splitlines()
    notable = [line for line in lines if "Fatal error" in line or "request failed" in line][:20]
    return "\n".join(["--- ticks' errors:", *notable, "--- the end of ticks' output:", *lines[-150:]])


def fuzz(server, work_dir):
    """Every pass over `server` (ONLY and SKIPPED choose), first with fuzz-alice's token, then with
    a server token; what went wrong, or None."""
    client = Ticks(server.base_url, server.api_key, server.api_secret)
    # The user first, while the seeded channel types are as they were: the server
    # token's run changes channel types (max_message_length, read_events, ...).
    tokens = [("fuzz-alice", client.user_token("fuzz-alice")), ("server", client.server_token)]
    passes = [destructive for destructive in (False, True)
              if not ONLY or any((name in DESTRUCTIVE) == destructive for name in ONLY)]
    if set(DESTRUCTIVE) <= set(SKIPPED):
        passes = [destructive for destructive in passes if not destructive]
    runs = []
    for destructive in passes:
        for label, token in tokens:
            runs.append(run_schemathesis(server.base_url, server.api_key, token, work_dir,
                                         label + ("-destructive" if destructive else ""), destructive))
            if server.process.poll() is not None:
                break
        if server.process.poll() is not None:
            break
    report = "\n\n".join(output for _, output in runs)
    if server.process.poll() is not None:
        return f"ticks exited with {server.process.returncode}\n{report}\n{server_log(server)}"
    health = requests.get(server.base_url + "/health", timeout=10)
    if health.status_code != 200 or health.json()["status"] != "ok":
        return f"/health after fuzzing: {health.status_code} {health.text}"
    failed = [output for code, output in runs if code != 0]
    return "\n\n".join(failed) + "\n" + server_log(server) if failed else None


def test_the_api_survives_fuzzing_and_answers_as_documented(fuzzed_servers, tmp_path):
    # The stores side by side: the fuzzer, one Python process at most of a core, takes the time
    # (the server under a quarter of one), so on two cores both take about as long as one did.
    with concurrent.futures.ThreadPoolExecutor(len(fuzzed_servers)) as pool:
        outcomes = {store: pool.submit(fuzz, server, tmp_path / store) for store, server in fuzzed_servers.items()}
        problems = {store: outcome.result() for store, outcome in outcomes.items()}
    assert not any(problems.values()), "\n\n".join(
        f"=== {store}:\n{problem}" for store, problem in problems.items() if problem)


def test_a_stuck_fuzzer_is_stopped_a_progressing_one_is_not_and_a_finished_one_reports_its_exit(tmp_path):
    log, heartbeat = tmp_path / "stuck.log", tmp_path / "stuck.heartbeat"
    heartbeat.touch()
    with log.open("wb") as sink:
        stuck = subprocess.Popen([sys.executable, "-c", "print('started', flush=True); import time; time.sleep(600)"],
                                 stdout=sink, stderr=subprocess.STDOUT)
        assert wait_while_progressing(stuck, log, heartbeat, stalled_after=1, poll=0.2) == -9
    assert stuck.returncode is not None
    assert log.read_text().startswith("started") and "nothing for 1 s" in log.read_text()
    # Silent on its output for 14 s but touching its heartbeat: not stuck (10 s leaves a loaded
    # machine time to start Python before the first touch).
    log, heartbeat = tmp_path / "beating.log", tmp_path / "beating.heartbeat"
    heartbeat.touch()
    beating = f"import os, sys, time\nfor _ in range(40):\n    time.sleep(0.35); os.utime({str(heartbeat)!r})\nsys.exit(3)"
    with log.open("wb") as sink:
        finished = subprocess.Popen([sys.executable, "-c", beating], stdout=sink)
        assert wait_while_progressing(finished, log, heartbeat, stalled_after=10, poll=0.1) == 3
def test_the_server_serves_this_document(tmp_path):
    """GET /openapi.json is the document in the repository (the fuzzer reads the file)."""
    server = TicksProcess(tmp_path / "server", api_key="fuzzkey", api_secret=secrets.token_urlsafe(48))
    try:
        served = requests.get(server.base_url + "/openapi.json", timeout=10)
        assert served.status_code == 200, served.text
        assert served.json() == json.loads(DOCUMENT.read_text()), \
            "the binary serves another document than Sources/TicksServer/OpenAPI/openapi.json: rebuild it"
    finally:
        assert server.stop() == 0, server.output()
