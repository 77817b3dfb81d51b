"""Every identifier the OpenAPI document lets a client send, sent hostile, on both stores.

The sweep reads the document itself: every path parameter, query parameter
(JSON in a query parameter included) and request body property whose schema
is one of the shared id schemas (`Id`, `ChannelId`, `ChannelTypeName`, `Cid`,
`DeliveryId`, by `$ref` or by the same `pattern`), and every map key named by
one (`propertyNames`). A new id in the document is swept without touching
this file; an id-named parameter or property (`…_id`, `…ids`, `…cid`) the
document gives no id schema fails the test instead.

Each slot gets, in the operation's own seed example (so that everything else
in the request is valid and the id is what the server must refuse): U+0000,
another control character, one character too many, invalid UTF-8 (`%FF` in a
path or query; a lone surrogate `\\ud800` and a raw 0xFF byte in JSON),
and look-alikes (a Cyrillic letter, a full-width one, a trailing space, a
zero-width joiner). With a server token every answer must be 400 with code 4
in Stream's error format; with a user token 400, or 403 where the operation
is refused to users before its input is read. Never a 5xx, and the two stores
must answer alike. Afterwards the seeded channel, messages and users read
back unchanged.
"""

import contextlib
import json
import re
import secrets
import urllib.parse

import pytest
import requests
from conftest import TicksProcess, store_arguments
from test_fuzz import DOCUMENT, DOOMED_CHANNEL, SEED_CHANNEL, SEED_USERS, seed
from wire import Ticks

SPEC = json.loads(DOCUMENT.read_text())
SCHEMAS = SPEC["components"]["schemas"]
ID_SCHEMAS = ["Id", "ChannelId", "ChannelTypeName", "Cid", "DeliveryId"]
RULES = {name: SCHEMAS[name] for name in ID_SCHEMAS}
BY_PATTERN = {}
for _name, _rule in RULES.items():
    BY_PATTERN.setdefault(_rule["pattern"], _name)  # ChannelTypeName before DeliveryId: the same rule
# Parameters and properties named like this must have an id schema.
ID_NAME = re.compile(r"(^|_)(id|ids|cid|cids)$|^id_lt$")
METHODS = ("get", "post", "put", "patch", "delete")
SERVER_ARGS = ("--demo", "--host", "127.0.0.1", "--rate-limits", "off")
HOSTILE_MARK = "@@hostile@@"

# Operations that refuse a user token whatever the input (server tokens only).
SERVER_ONLY = {"CreateChannelType", "UpdateChannelType", "DeleteChannels", "GetTask", "DeleteUser", "DeleteUsers",
               "ListFailedWebhooks", "RetryFailedWebhooks", "UnreadCountsBatch", "RecountUnread"}
SERVER_ONLY |= {name + "V2" for name in SERVER_ONLY}  # the same operations at API v2's paths


def resolve(schema):
    """The schema a `$ref` names (one level at a time) and the id schema's name if it is one."""
    name = None
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        if name in RULES:
            return schema, name
        schema = SCHEMAS[name]
    if "pattern" in schema and schema["pattern"] in BY_PATTERN:
        return schema, BY_PATTERN[schema["pattern"]]
    return schema, None


def id_slots(schema, path=(), depth=0):
    """(path, rule name) of every id inside `schema`; a path is keys, 0 for an array's first
    item, and ("key",) for a map's first key. Also ("untyped", path) for id-named strings
    without an id schema."""
    if depth > 8:
        return
    schema, rule = resolve(schema)
    if rule:
        yield path, rule
        return
    for keyword in ("allOf", "anyOf", "oneOf"):
        for branch in schema.get(keyword, []):
            yield from id_slots(branch, path, depth + 1)
    if "items" in schema and isinstance(schema["items"], dict):
        yield from id_slots(schema["items"], path + (0,), depth + 1)
    for name, sub in schema.get("properties", {}).items():
        sub_schema, sub_rule = resolve(sub)
        if ID_NAME.search(name) and not sub_rule and not any(
                resolve(branch)[1] for branch in sub_schema.get("allOf", []) + sub_schema.get("anyOf", [])) \
                and sub_schema.get("type") in ("string", "array", None) and not sub_schema.get("items", {}).get("$ref"):
            yield ("untyped", path + (name,)), None
        yield from id_slots(sub, path + (name,), depth + 1)
    if isinstance(schema.get("propertyNames"), dict) and resolve(schema["propertyNames"])[1]:
        yield path + (("key",),), resolve(schema["propertyNames"])[1]
    if isinstance(schema.get("additionalProperties"), dict):
        yield from id_slots(schema["additionalProperties"], path + (("value",),), depth + 1)


def example(holder):
    """The first example's value of a parameter or media type."""
    examples = holder.get("examples") or {}
    if examples:
        return next(iter(examples.values()))["value"]
    return holder.get("example")


def operations():
    for path, item in SPEC["paths"].items():
        shared = item.get("parameters", [])
        for method in METHODS:
            if method in item:
                operation = item[method]
                # An operation's parameter overrides a path item's of the same name and place.
                own = {(p["name"], p["in"]) for p in operation.get("parameters", [])}
                parameters = [p for p in shared if (p["name"], p["in"]) not in own] + operation.get("parameters", [])
                yield path, method, operation, parameters


def targets():
    """Every id slot of every operation: (operation, place, name, path inside, rule)."""
    found, untyped = [], []
    for path, method, operation, parameters in operations():
        op = operation["operationId"]
        for parameter in parameters:
            if parameter["in"] not in ("path", "query"):
                continue
            if "content" in parameter:  # JSON in a query parameter
                schema = parameter["content"]["application/json"]["schema"]
                for inside, rule in id_slots(schema):
                    (untyped if rule is None else found).append((op, "query-json", parameter["name"], inside, rule))
                continue
            slots = list(id_slots(parameter["schema"]))
            if not slots and (parameter["in"] == "path" or ID_NAME.search(parameter["name"])):
                untyped.append((op, parameter["in"], parameter["name"], (), None))
            for inside, rule in slots:
                (untyped if rule is None else found).append((op, parameter["in"], parameter["name"], inside, rule))
        body = operation.get("requestBody", {}).get("content", {}).get("application/json")
        if body:
            for inside, rule in id_slots(body["schema"]):
                (untyped if rule is None else found).append((op, "body", None, inside, rule))
    return found, untyped


TARGETS, UNTYPED = targets()


def test_every_id_in_the_document_has_an_id_schema():
    assert not UNTYPED, f"ids without an id schema (pattern and maxLength): {UNTYPED}"
    places = {place for _, place, _, _, _ in TARGETS}
    assert {"path", "query", "query-json", "body"} <= places, places
    assert len(TARGETS) > 60, f"the sweep found only {len(TARGETS)} ids: is the document read right?"


def lookalike_cyrillic(value):
    table = {"a": "а", "e": "е", "o": "о", "c": "с", "p": "р", "x": "х", "i": "і"}
    for index, char in enumerate(value):
        if char in table:
            return value[:index] + table[char] + value[index + 1:]
    return "а" + value


def fullwidth(value):
    for index, char in enumerate(value):
        if char.isascii() and char.isalnum():
            return value[:index] + chr(ord(char) + 0xFEE0) + value[index + 1:]
    return value + "ａ"


def overlong(rule, value):
    limit = RULES[rule]["maxLength"]
    if rule == "Cid":
        kind = value.split(":", 1)[0] if ":" in value else "messaging"
        return f"{kind}:" + "a" * (limit - len(kind))
    return value + "a" * (limit + 1 - len(value))


# What each hostile value is made of: a text (for every place), or ("raw", bytes-maker) for
# invalid UTF-8, which cannot be a Python str.
def hostile_values(rule, value):
    return {
        "nul": value[:1] + "\x00" + value[1:],
        "control": value + "\x1f",
        "newline": value + "\n",
        "overlong": overlong(rule, value),
        "invalid-utf8": ("raw", lambda encoded: encoded[:1] + b"\xff" + encoded[1:]),
        "lone-surrogate": ("surrogate", None),
        "cyrillic": lookalike_cyrillic(value),
        "fullwidth": fullwidth(value),
        "trailing-space": value + " ",
        "zero-width-joiner": value[:1] + "\u200d" + value[1:],
    }


def default_value(rule):
    return RULES[rule]["examples"][0]


def get_at(container, inside):
    for step in inside:
        if container is None:
            return None
        if step == ("key",):
            return next(iter(container), None) if isinstance(container, dict) else None
        if step == ("value",):
            container = next(iter(container.values()), None) if isinstance(container, dict) else None
        elif isinstance(step, int):
            container = container[0] if isinstance(container, list) and container else None
        else:
            container = container.get(step) if isinstance(container, dict) else None
    return container


def set_at(container, inside, new):
    """`container` with `new` at `inside` (made where missing); a map key is replaced."""
    if not inside:
        return new
    step, rest = inside[0], inside[1:]
    if step == ("key",):
        items = list(container.items()) if isinstance(container, dict) and container else [("x", {})]
        return {new: items[0][1], **dict(items[1:])}
    if step == ("value",):
        items = list(container.items()) if isinstance(container, dict) and container else [("x", None)]
        return {items[0][0]: set_at(items[0][1], rest, new), **dict(items[1:])}
    if isinstance(step, int):
        items = list(container) if isinstance(container, list) and container else [None]
        return [set_at(items[0], rest, new), *items[1:]]
    base = dict(container) if isinstance(container, dict) else {}
    base[step] = set_at(base.get(step), rest, new)
    return base


def encode_json(document, hostile):
    """JSON bytes of `document` with HOSTILE_MARK replaced by `hostile` (a text or a raw form)."""
    text = json.dumps(document).encode()
    marked = json.dumps(HOSTILE_MARK).encode()[1:-1]
    if isinstance(hostile, tuple):
        kind, make = hostile
        # `document` held the valid value with the mark in front of it: the raw form breaks it.
        start = text.index(marked)
        end = text.index(b'"', start)
        valid = text[start + len(marked):end]
        replacement = make(valid) if kind == "raw" else valid[:1] + b"\\ud800" + valid[1:]
        return text[:start] + replacement + text[end:]
    return text.replace(marked, json.dumps(hostile).encode()[1:-1])


def url_text(value, hostile):
    """`hostile` (made from the valid `value`) as percent-encoded URL text."""
    if isinstance(hostile, tuple):
        kind, make = hostile
        if kind == "raw":
            return urllib.parse.quote_from_bytes(make(value.encode()), safe="")
        # A surrogate's UTF-8 form (CESU-8), which is not UTF-8 either.
        return urllib.parse.quote(value[:1], safe="") + "%ED%A0%80" + urllib.parse.quote(value[1:], safe="")
    return urllib.parse.quote(hostile, safe="")


def hostile_json(document, inside, value, hostile):
    """JSON bytes of `document` with `hostile` (made from the valid `value`) at `inside`."""
    if isinstance(hostile, tuple):
        return encode_json(set_at(document, inside, HOSTILE_MARK + value), hostile)
    return json.dumps(set_at(document, inside, hostile)).encode()


def plain(value):
    return str(value).lower() if isinstance(value, bool) else str(value)


def build_request(base_url, api_key, target, value_name):
    """The operation's seed request with one id made hostile: (method, url, body bytes or None)."""
    op, place, name, inside, rule = target
    path, method, operation, parameters = next(o for o in operations() if o[2]["operationId"] == op)
    given = {}
    for parameter in parameters:
        if parameter["in"] in ("path", "query"):
            holder = parameter["content"]["application/json"] if "content" in parameter else parameter
            if example(holder) is not None or parameter.get("required") or parameter["name"] == name:
                given[parameter["name"], parameter["in"]] = (parameter, example(holder))
    body_holder = operation.get("requestBody", {}).get("content", {}).get("application/json")
    body = (example(body_holder) or {}) if body_holder else None
    where = {"query-json": "query"}.get(place, place)
    if place == "body":
        current = get_at(body, inside)
    elif place == "query-json":
        current = get_at(given[name, where][1], inside)
    else:
        current = given[name, where][1]
        current = current[0] if isinstance(current, list) and current else current
    # The id the example has there (or the id schema's example where it has none).
    value = current if isinstance(current, str) and current else default_value(rule)
    hostile = hostile_values(rule, value)[value_name]

    url_path, query = path, [("api_key", urllib.parse.quote(api_key, safe=""))]
    for (pname, location), (parameter, seeded) in given.items():
        is_target = (pname, location) == (name, where)
        if "content" in parameter:
            document = seeded if seeded is not None else {}
            encoded = hostile_json(document, inside, value, hostile) if is_target else json.dumps(document).encode()
            text = urllib.parse.quote_from_bytes(encoded, safe="")
        elif is_target:
            rest = seeded[1:] if isinstance(seeded, list) else []  # form, explode false: comma-separated
            text = ",".join([url_text(value, hostile)] + [urllib.parse.quote(plain(v), safe="") for v in rest])
        elif seeded is None:
            continue
        else:
            values = seeded if isinstance(seeded, list) else [seeded]
            text = ",".join(urllib.parse.quote(plain(v), safe="") for v in values)
        if location == "path":
            url_path = url_path.replace("{" + pname + "}", text)
        else:
            query.append((pname, text))
    data = None
    if body is not None:
        data = hostile_json(body, inside, value, hostile) if place == "body" else json.dumps(body).encode()
    return method.upper(), base_url + url_path + "?" + "&".join(f"{k}={v}" for k, v in query), data


@contextlib.contextmanager
def seeded_server(store, prefix, tmp_path_factory):
    """A demo server on `store` with the fuzzer's seed (the objects the document's examples name):
    (store, server); it must exit cleanly if it is still running at the end."""
    with store_arguments(store, prefix) as store_args:
        server = TicksProcess(tmp_path_factory.mktemp(f"{prefix}-{store}"), api_key=f"{prefix}key",
                              api_secret=secrets.token_urlsafe(48), extra_args=[*SERVER_ARGS, *store_args])
        try:
            seed(Ticks(server.base_url, server.api_key, server.api_secret))
            yield store, server
        finally:
            running = server.process.poll() is None
            code = server.stop()
            assert not running or code == 0, server.output()[-5000:]


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def swept_server(request, tmp_path_factory):
    with seeded_server(request.param, "ids", tmp_path_factory) as swept:
        yield swept


# The answers of each store, to compare them.
ANSWERS = {}


def send(session, method, url, data, token):
    """The answer's status and body; a WebSocket's (`x-websocket`) from its first frame, an error."""
    if url.split("?")[0].endswith("/connect"):
        from websockets.sync.client import connect
        socket_url = "ws" + url[len("http"):] + "&stream-auth-type=jwt&authorization=" + urllib.parse.quote(token)
        from websockets.exceptions import InvalidStatus
        try:
            with connect(socket_url, open_timeout=30, close_timeout=10) as socket:
                frame = json.loads(socket.recv(timeout=30))
        except InvalidStatus as refused:  # refused before the upgrade: an HTTP answer
            response = refused.response
            text = response.body.decode(errors="replace")
            try:
                body = json.loads(text)
            except ValueError:
                body = None
            return response.status_code, text, body
        error = frame.get("error", {})
        return error.get("StatusCode", 200), json.dumps(error), error
    request = requests.Request(method, url, data=data, headers={
        "Authorization": token, "stream-auth-type": "jwt", "Content-Type": "application/json"})
    prepared = session.prepare_request(request)
    prepared.url = url  # exactly as built: requests would re-quote %FF and the like
    response = session.send(prepared, timeout=30)
    try:
        body = response.json()
    except ValueError:
        body = None
    return response.status_code, response.text, body


def test_every_id_refuses_hostile_values_on_both_stores(swept_server):
    store, server = swept_server
    client = Ticks(server.base_url, server.api_key, server.api_secret)
    tokens = {"server": client.server_token, "user": client.user_token("fuzz-alice")}
    session = requests.Session()
    before = stored_state(client)
    wrong, answers = [], {}
    for target in TARGETS:
        for value_name in hostile_values(target[4], "a:b"):
            for label, token in tokens.items():
                method, url, data = build_request(server.base_url, server.api_key, target, value_name)
                status, text, body = send(session, method, url, data, token)
                key = (target[0], target[1], target[2], repr(target[3]), value_name, label)
                answers[key] = status
                allowed = {400} if label == "server" or target[0] not in SERVER_ONLY else {400, 403}
                if label == "server" and target[0] == "Connect":
                    allowed = {400, 403}  # a socket needs a user token: 403 unless the request is refused first
                stream_format = isinstance(body, dict) and isinstance(body.get("code"), int) \
                    and isinstance(body.get("message"), str) and body.get("StatusCode") == status
                code_ok = status != 400 or (stream_format and body["code"] == 4)
                if status not in allowed or not stream_format or not code_ok:
                    wrong.append(f"{store} {label} {value_name} {target[0]} {target[1]} {target[2] or ''}"
                                 f"{list(target[3])}: {status} {text[:200]!r}  {method} {url}"
                                 f" {data[:200] if data else ''!r}")
    ANSWERS[store] = answers
    assert server.process.poll() is None, server.output()[-5000:]
    summary = sorted({" ".join(line.split(" ")[3:6]).split(":")[0] for line in wrong})
    assert not wrong, f"{len(wrong)} of {len(answers)} answers were wrong, at:\n" + "\n".join(summary) + "\n" + "\n".join(wrong[:40])

    # The data is intact: the seeded users, channel, messages and read states read back as before.
    assert requests.get(server.base_url + "/health", timeout=10).json()["status"] == "ok"
    assert stored_state(client) == before
    users = client.query_users({"id": {"$in": SEED_USERS}})["users"]
    assert {user["id"]: user.get("name") for user in users} == {"fuzz-alice": "Alice", "fuzz-bob": "Bob",
                                                                  "fuzz-carol": "Carol"}
    state = client.query_channel(SEED_CHANNEL, user="fuzz-bob", messages_limit=10)
    assert [(m["id"], m["text"]) for m in state["messages"]] == [
        ("fuzz-m1", "Hello"), ("fuzz-m2", "Hi Alice"), ("fuzz-voice", "")]


def stored_state(client):
    """What the sweep must leave as it was: users, channel types, and each seeded channel's
    members, messages and read states."""
    users = client.query_users({"id": {"$in": SEED_USERS + ["fuzz-doomed-user"]}})["users"]
    types = client.call("GET", "/channeltypes")["channel_types"]
    channels = {}
    for cid in (SEED_CHANNEL, DOOMED_CHANNEL):
        state = client.query_channel(cid, messages_limit=100)
        channels[cid] = {
            "members": sorted((m["user_id"], m.get("channel_role")) for m in state["members"]),
            "messages": [(m["id"], m["text"], m.get("type"), m.get("reply_count")) for m in state["messages"]],
            "read": sorted((r["user"]["id"], r.get("last_read_message_id"), r.get("unread_messages"))
                           for r in state["read"]),
            "data": {k: v for k, v in state["channel"].items() if k not in ("config",)},
        }
    return {"users": sorted(json.dumps(u, sort_keys=True) for u in users),
            "types": json.dumps(types, sort_keys=True), "channels": channels}


def test_both_stores_answer_alike():
    if set(ANSWERS) != {"sqlite", "postgres"}:
        pytest.skip("the sweep did not run on both stores")
    differ = [(key, ANSWERS["sqlite"][key], ANSWERS["postgres"].get(key))
              for key in ANSWERS["sqlite"] if ANSWERS["sqlite"][key] != ANSWERS["postgres"].get(key)]
    assert not differ, differ[:50]
