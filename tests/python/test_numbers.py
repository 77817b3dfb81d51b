"""Every integer the OpenAPI document lets a client send, sent at the edges, on both stores.

As `test_ids.py` sweeps ids, this sweeps numbers, read from the document
itself: every query parameter, JSON-in-a-query parameter (`payload`) and
request body property whose schema is an integer. A new integer in the
document is swept without touching this file, and one without both a
`minimum` and a `maximum` fails the test instead: a number a client sends
is checked against its bounds before any arithmetic sees it (an overflow
traps, and a trap stops the whole server, every connection with it).

Each slot gets, in the operation's own seed example: -1, 0, 2^31, 2^53,
Int64.max, Int64.min, one past each of Int64's ends, 1e309, a fraction and a
string. With a server token and with a user token, the answer is a 2xx or a
4xx in Stream's error format, never a 5xx; a whole number outside the slot's
bounds is a 400 (code 4) whose message names the field and the range
(`from MIN to MAX`); anything not a whole number of JSON is a 400 naming the
field. The process is alive at the end and still serves the seeded data.
"""

import json
import urllib.parse

import pytest
import requests
from test_fuzz import SEED_CHANNEL
from test_ids import SCHEMAS, SERVER_ONLY, example, get_at, operations, plain, seeded_server, send, set_at
from wire import Ticks

INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1
# Each edge: the JSON text sent, and the whole number it is (None: not a whole number).
EDGES = {
    "-1": -1,
    "0": 0,
    "2^31": 2 ** 31,
    "2^53": 2 ** 53,
    "int64-max": INT64_MAX,
    "int64-min": INT64_MIN,
    "int64-max+1": INT64_MAX + 1,
    "int64-min-1": INT64_MIN - 1,
    "1e309": None,
    "fraction": None,
    "string": None,
}
TEXT = {"1e309": "1e309", "fraction": "1.5", "string": '"7"'}
MARK = "@@number@@"


def resolve(schema):
    while "$ref" in schema:
        schema = SCHEMAS[schema["$ref"].rsplit("/", 1)[1]]
    return schema


def integer_slots(schema, path=(), depth=0):
    """(path, schema) of every integer inside `schema` (0 for an array's first item)."""
    if depth > 8:
        return
    schema = resolve(schema)
    kinds = schema.get("type")
    if kinds == "integer" or (isinstance(kinds, list) and "integer" in kinds):
        yield path, schema
        return
    for keyword in ("allOf", "anyOf", "oneOf"):
        for branch in schema.get(keyword, []):
            yield from integer_slots(branch, path, depth + 1)
    if isinstance(schema.get("items"), dict):
        yield from integer_slots(schema["items"], path + (0,), depth + 1)
    for name, sub in schema.get("properties", {}).items():
        yield from integer_slots(sub, path + (name,), depth + 1)


def targets():
    """Every integer slot of every operation: (operation, place, parameter name, path inside, schema)."""
    found = []
    for _, _, operation, parameters in operations():
        op = operation["operationId"]
        for parameter in parameters:
            if parameter["in"] != "query":
                continue
            if "content" in parameter:
                for inside, schema in integer_slots(parameter["content"]["application/json"]["schema"]):
                    found.append((op, "query-json", parameter["name"], inside, schema))
            else:
                for inside, schema in integer_slots(parameter["schema"]):
                    found.append((op, "query", parameter["name"], inside, schema))
        body = operation.get("requestBody", {}).get("content", {}).get("application/json")
        if body:
            for inside, schema in integer_slots(body["schema"]):
                found.append((op, "body", None, inside, schema))
    return found


TARGETS = targets()


def field_name(target):
    """The name a message about the slot must use: its own key (or the parameter's)."""
    _, _, name, inside, _ = target
    keys = [step for step in inside if isinstance(step, str)]
    return keys[-1] if keys else name


def test_every_integer_in_the_document_has_bounds():
    unbounded = [f"{op} {place} {name or ''}{list(inside)}" for op, place, name, inside, schema in TARGETS
                 if "minimum" not in schema or "maximum" not in schema]
    assert not unbounded, "integers a client sends without a minimum and a maximum:\n" + "\n".join(unbounded)
    places = {place for _, place, _, _, _ in TARGETS}
    assert {"query", "query-json", "body"} <= places, places
    assert len(TARGETS) >= 25, f"the sweep found only {len(TARGETS)} integers: is the document read right?"


def skeleton(schema):
    """An object with the required properties of `schema`, each its const, first enum value or example."""
    schema = resolve(schema)
    made = {}
    for name in schema.get("required", []):
        sub = resolve(schema.get("properties", {}).get(name, {}))
        for source in ("const", "enum", "examples", "default"):
            if source in sub:
                made[name] = sub[source][0] if source in ("enum", "examples") else sub[source]
                break
    return made


def with_parents(document, inside, schema_at):
    """`document` with every object on the way to `inside` present, holding its required properties
    (an array's first item made from its item schema when the example has none)."""
    for depth in range(1, len(inside)):
        if get_at(document, inside[:depth]) is None and isinstance(inside[depth], str):
            document = set_at(document, inside[:depth], skeleton(schema_at(inside[:depth])))
    return document


def json_with(document, inside, edge, schema_at=None):
    """JSON text of `document` with the edge's text at `inside`."""
    if schema_at:
        document = with_parents(document, inside, schema_at)
    marked = json.dumps(set_at(document, inside, MARK))
    return marked.replace(json.dumps(MARK), TEXT.get(edge, str(EDGES[edge]))).encode()


def schema_of(root, inside):
    """The schema at `inside` of `root` (through `$ref`s, arrays' items and `allOf`)."""
    schema = resolve(root)
    for step in inside:
        if isinstance(step, int):
            schema = resolve(schema.get("items", {}))
        else:
            branches = [schema] + [resolve(b) for b in schema.get("allOf", [])]
            schema = resolve(next((b["properties"][step] for b in branches if step in b.get("properties", {})), {}))
    return schema


def build_request(base_url, api_key, target, edge):
    """The operation's seed request with one integer at an edge: (method, url, body bytes or None)."""
    op, place, name, inside, _ = target
    path, method, operation, parameters = next(o for o in operations() if o[2]["operationId"] == op)
    url_path, query = path, [("api_key", urllib.parse.quote(api_key, safe=""))]
    for parameter in parameters:
        if parameter["in"] not in ("path", "query"):
            continue
        holder = parameter["content"]["application/json"] if "content" in parameter else parameter
        seeded = example(holder)
        is_target = place != "body" and parameter["name"] == name and parameter["in"] == "query"
        if is_target and "content" in parameter:
            root = parameter["content"]["application/json"]["schema"]
            encoded = json_with(seeded or {}, inside, edge, lambda at: schema_of(root, at))
            text = urllib.parse.quote_from_bytes(encoded, safe="")
        elif is_target:
            raw = TEXT.get(edge, str(EDGES[edge]))
            text = urllib.parse.quote(raw.strip('"') + ("x" if edge == "string" else ""), safe="")
        elif seeded is None:
            continue
        elif "content" in parameter:
            text = urllib.parse.quote(json.dumps(seeded), safe="")
        else:
            values = seeded if isinstance(seeded, list) else [seeded]
            text = ",".join(urllib.parse.quote(plain(v), safe="") for v in values)
        if parameter["in"] == "path":
            url_path = url_path.replace("{" + parameter["name"] + "}", text)
        else:
            query.append((parameter["name"], text))
    data = None
    body_holder = operation.get("requestBody", {}).get("content", {}).get("application/json")
    if body_holder:
        body = example(body_holder) or {}
        if place == "body":
            data = json_with(body, inside, edge, lambda at: schema_of(body_holder["schema"], at))
        else:
            data = json.dumps(body).encode()
    return method.upper(), base_url + url_path + "?" + "&".join(f"{k}={v}" for k, v in query), data


def judge(target, edge, label, status, text, body):
    """What is wrong with the answer, or None."""
    op, _, _, _, schema = target
    if status >= 500:
        return "a 5xx"
    stream_format = isinstance(body, dict) and isinstance(body.get("code"), int) \
        and isinstance(body.get("message"), str) and body.get("StatusCode") == status
    if 200 <= status < 300:
        return None if isinstance(body, dict) else "a 2xx without a JSON object"
    if not 400 <= status < 500 or not stream_format:
        return "not a 4xx in Stream's format"
    if label == "user" and op in SERVER_ONLY and status == 403:
        return None  # refused to users before the input is read
    value = EDGES[edge]
    outside = value is None or not schema["minimum"] <= value <= schema["maximum"]
    if outside and (status != 400 or body["code"] != 4):
        return "a value outside the bounds must be a 400 with code 4"
    if outside and field_name(target) not in body["message"]:
        return f"the message does not name the field {field_name(target)!r}"
    in_int64 = value is not None and INT64_MIN <= value <= INT64_MAX
    if outside and in_int64 and f"from {schema['minimum']} to {schema['maximum']}" not in body["message"]:
        return f"the message does not give the range from {schema['minimum']} to {schema['maximum']}"
    return None


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def swept_server(request, tmp_path_factory):
    with seeded_server(request.param, "numbers", tmp_path_factory) as swept:
        yield swept


def test_every_integer_takes_its_edges_on_both_stores(swept_server):
    store, server = swept_server
    client = Ticks(server.base_url, server.api_key, server.api_secret)
    tokens = {"server": client.server_token, "user": client.user_token("fuzz-alice")}
    session = requests.Session()
    wrong, sent = [], 0
    for target in TARGETS:
        for edge in EDGES:
            for label, token in tokens.items():
                method, url, data = build_request(server.base_url, server.api_key, target, edge)
                status, text, body = send(session, method, url, data, token)
                sent += 1
                problem = judge(target, edge, label, status, text, body)
                if problem:
                    wrong.append(f"{store} {label} {edge} {target[0]} {target[1]} {target[2] or ''}"
                                 f"{list(target[3])}: {problem}: {status} {text[:200]!r}  {method} {url}"
                                 f" {data[:200] if data else ''!r}")
                assert server.process.poll() is None, \
                    f"the server died on {method} {url} {data!r}:\n" + server.output()[-3000:]
    assert not wrong, f"{len(wrong)} of {sent} answers were wrong:\n" + "\n".join(wrong[:40])
    assert requests.get(server.base_url + "/health", timeout=10).json()["status"] == "ok"
    state = client.query_channel(SEED_CHANNEL, user="fuzz-bob", messages_limit=10)
    assert [m["id"] for m in state["messages"]] == ["fuzz-m1", "fuzz-m2", "fuzz-voice"]


@pytest.mark.parametrize("path", ["/members", "/api/v2/chat/members"])
def test_a_members_autocomplete_at_the_largest_offset_is_refused_and_the_server_lives(swept_server, path):
    """Issue 55's crash: `offset + limit` in the autocomplete's page loop trapped at Int64.max."""
    _, server = swept_server
    client = Ticks(server.base_url, server.api_key, server.api_secret)
    member = client.user_token("fuzz-alice")
    for offset, wanted in ((INT64_MAX, 400), (10_001, 400), (10_000, 200), (0, 200)):
        payload = {"type": "messaging", "id": SEED_CHANNEL.split(":")[1],
                   "filter_conditions": {"name": {"$autocomplete": "a"}}, "offset": offset, "limit": 1}
        response = requests.get(server.base_url + path, params={"api_key": server.api_key,
                                                                 "payload": json.dumps(payload)},
                                headers={"Authorization": member, "stream-auth-type": "jwt"}, timeout=30)
        assert response.status_code == wanted, response.text
        if wanted == 400:
            assert response.json()["code"] == 4
            assert "offset must be an integer from 0 to 10000" in response.json()["message"]
        assert server.process.poll() is None, server.output()[-3000:]
    assert requests.get(server.base_url + "/health", timeout=10).status_code == 200
