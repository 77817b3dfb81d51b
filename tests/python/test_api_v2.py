"""Stream's API v2 (the `getstream` SDKs) on both stores: the endpoints
Ticks serves at `/api/v2/…` answer in v2's shapes, checked against the
JSON Schemas of the OpenAPI document (`V2…` components, written from the
facts of Stream's v2 document), and agree with the same data read in v1.

Every v2 call here uses the server token `getstream` 7 signs: no claims at
all (`{}`).
"""

import json
import time
from datetime import datetime, timezone
from pathlib import Path

import jsonschema_rs
import pytest
from conftest import served
from wire import Ticks, _b64, make_token

DOCUMENT = json.loads(
    (Path(__file__).resolve().parents[2] / "Sources" / "TicksServer" / "OpenAPI" / "openapi.json").read_text())


def schema_errors(schema, body):
    """Where `body` breaks `schema` (whose `$ref`s name the document's components)."""
    schema = {**schema, "components": DOCUMENT["components"]}
    return [f"{'/'.join(map(str, error.instance_path))}: {error.message}"
            for error in jsonschema_rs.validator_for(schema).iter_errors(body)]


def validate(body, schema_name):
    """Raises unless `body` is valid against the document's `schema_name`."""
    errors = schema_errors({"$ref": f"#/components/schemas/{schema_name}"}, body)
    assert not errors, f"{schema_name}: {errors[:5]}"


def answer_schema(method, path, status):
    """The document's schema of the answer `status` to `method` `path` (a template, `{id}`)."""
    response = DOCUMENT["paths"][path][method.lower()]["responses"][str(status)]
    return response["content"]["application/json"]["schema"]


def call(api, method, template, body=None, params=None, token=None, **values):
    """`api.raw` at `template` filled with `values`; the answer must be 2xx and
    valid against what the document says that operation answers."""
    response = api.raw(method, template.format(**values), body=body, params=params, token=token)
    assert 200 <= response.status_code < 300, (method, template, response.text)
    errors = schema_errors(answer_schema(method, template, response.status_code), response.json())
    assert not errors, (method, template, errors[:5])
    return response.json()


def no_claims_token(secret):
    """`getstream` 7.0.0's server token: HS256 over an empty payload."""
    return make_token(secret)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(request, tmp_path_factory):
    with served(request.param, "apiv2", tmp_path_factory) as process:
        yield process


@pytest.fixture
def api(server):
    client = Ticks(server.base_url, server.api_key, server.api_secret)
    client.server_token = no_claims_token(server.api_secret)
    return client


def nanoseconds(rfc3339):
    """v1's time as v2 writes it."""
    parsed = datetime.strptime(rfc3339, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    return (int(parsed.timestamp()) * 1_000_000 + parsed.microsecond) * 1000


def test_the_no_claims_token_acts_as_the_server(api, server):
    assert make_token(server.api_secret) == api.server_token
    assert api.call("PATCH", "/api/v2/app", {"reciprocal_read_receipts": False}) is not None
    refused = api.raw("GET", "/api/v2/app", token=make_token("x" * 48))
    assert refused.status_code == 401
    validate(refused.json(), "Error")


def test_upsert_query_and_partial_update_in_v2_shapes(api, unique):
    alice, bob = f"{unique}-alice", f"{unique}-bob"
    upserted = api.call("POST", "/api/v2/users", {"users": {
        alice: {"id": alice, "name": "Alice", "custom": {"team": "blue", "level": 3}, "language": "fr", "teams": []},
        bob: {"id": bob, "custom": {}}}})
    validate(upserted, "V2UsersByID")
    mine = upserted["users"][alice]
    assert mine["custom"] == {"team": "blue", "level": 3} and "team" not in mine
    assert isinstance(mine["created_at"], int) and abs(mine["created_at"] / 1e9 - time.time()) < 600

    # The same user in v1: custom data at the top level, times as RFC 3339, the same instant.
    v1 = api.call("GET", "/users", params={"payload": json.dumps({"filter_conditions": {"id": {"$in": [alice]}}})})
    assert v1["users"][0]["team"] == "blue" and "custom" not in v1["users"][0]
    assert nanoseconds(v1["users"][0]["created_at"]) == mine["created_at"]

    # A partial update names custom fields flat, in v2 as in v1.
    patched = api.call("PATCH", "/api/v2/users", {"users": [{"id": alice, "set": {"nickname": "Al"}, "unset": ["level"]}]})
    validate(patched, "V2UsersByID")
    assert patched["users"][alice]["custom"] == {"team": "blue", "nickname": "Al"}

    # getstream sends the query payload with every unset field as null.
    payload = {"filter_conditions": {"id": {"$in": [alice, bob]}}, "limit": None, "offset": None, "sort": None,
               "presence": None, "include_deactivated_users": None, "user_id": None, "user": None}
    found = api.call("GET", "/api/v2/users", params={"payload": json.dumps(payload)})
    validate(found, "V2UserList")
    assert [user["id"] for user in found["users"]] == [alice, bob]


def test_full_users_carry_their_unread_counts(api, unique):
    alice, bob = f"{unique}-alice", f"{unique}-bob"
    api.call("POST", "/users", {"users": {alice: {"id": alice}, bob: {"id": bob}}})
    api.call("POST", f"/channels/messaging/{unique}/query",
             {"data": {"created_by_id": alice, "members": [alice, bob]}})
    for n in range(3):
        api.call("POST", f"/channels/messaging/{unique}/message", {"message": {"id": f"{unique}-m{n}", "text": "hi", "user_id": alice}})
    found = api.call("GET", "/api/v2/users",
                     params={"payload": json.dumps({"filter_conditions": {"id": {"$in": [alice, bob]}}})})
    validate(found, "V2UserList")
    counts = {user["id"]: (user["unread_count"], user["total_unread_count"], user["unread_channels"]) for user in found["users"]}
    assert counts == {alice: (0, 0, 0), bob: (3, 3, 1)}
    # As GET /unread says.
    assert api.call("GET", "/unread", params={"user_id": bob})["total_unread_count"] == 3


def test_custom_data_in_v2_may_not_name_a_field_of_its_own(api, unique):
    for body in ({"users": {unique: {"id": unique, "custom": {"name": "x"}}}},
                 {"users": {unique: {"id": unique, "custom": {"privacy_settings": {}}}}},
                 {"users": {unique: {"id": unique, "custom": "blue"}}},
                 {"users": {unique: {"id": unique, "custom": ["blue"]}}}):
        refused = api.raw("POST", "/api/v2/users", body=body)
        assert refused.status_code == 400, refused.text
        validate(refused.json(), "Error")


def test_app_and_rate_limits_in_v2(api, server, unique):
    for token in (None, api.user_token(f"{unique}-someone")):
        response = api.raw("GET", "/api/v2/app", token=token)
        assert response.status_code == 200, response.text
        assert response.text.startswith('{"app":') and "rate_limit" not in response.text
        app = response.json()
        validate(app, "V2GetApplicationResponse")
        configs = app["app"]["channel_configs"]
        assert configs["messaging"]["commands"] == ["giphy", "ban", "unban", "mute", "unmute"]
        assert isinstance(configs["messaging"]["created_at"], int)
    quotas = api.call("GET", "/api/v2/rate_limits", params={"server_side": "true", "android": "false"})
    validate(quotas, "V2Quotas")
    assert "server_side" in quotas and "android" not in quotas


def test_v2_errors_and_paths_not_served_in_v2(api):
    for method, path, status in (("GET", "/api/v2/users", 400), ("DELETE", "/api/v2/users", 405),
                                 ("POST", "/api/v2/chat/channels/messaging/x/truncate", 404), ("GET", "/api/v2/nothing", 404)):
        response = api.raw(method, path)
        assert response.status_code == status, (method, path, response.text)
        body = response.json()
        validate(body, "Error")
        assert body["details"] == [] and body["StatusCode"] == status


def test_a_conversation_in_v2_shapes(api, unique):
    """getstream's seven basic calls and the other receipt calls, each answer
    validated; the same facts read back in v1."""
    alice, bob, cid = f"{unique}-alice", f"{unique}-bob", f"messaging:{unique}"
    api.call("POST", "/api/v2/users", {"users": {alice: {"id": alice}, bob: {"id": bob}}})
    created = api.call("POST", f"/api/v2/chat/channels/messaging/{unique}/query", {"data": {
        "created_by_id": alice, "custom": {"topic": "trip"},
        "members": [{"user_id": alice, "channel_role": "channel_member"}, {"user_id": bob, "custom": {}}]}})
    validate(created, "V2ChannelState")
    assert created["channel"]["custom"] == {"topic": "trip"} and created["threads"] == []
    assert api.call("POST", f"/channels/messaging/{unique}/query", {})["channel"]["topic"] == "trip"

    sent = api.call("POST", f"/api/v2/chat/channels/messaging/{unique}/message", {"message": {
        "id": f"{unique}-m1", "text": "hi", "user_id": alice, "custom": {"mood": "happy"},
        "attachments": [{"type": "image", "image_url": "https://example.com/a.png"}]}})
    validate(sent["message"], "V2Message")
    assert sent["message"]["custom"] == {"mood": "happy"} and sent["message"]["attachments"][0]["custom"] == {}

    read = api.call("POST", f"/api/v2/chat/channels/messaging/{unique}/read", {"user_id": bob, "message_id": f"{unique}-m1"})
    validate(read["event"], "V2MarkReadEvent")
    assert read["event"]["last_read_message_id"] == f"{unique}-m1" and isinstance(read["event"]["created_at"], int)

    queried = api.call("POST", "/api/v2/chat/channels", {
        "filter_conditions": {"cid": cid}, "user_id": bob, "sort": [{"field": "last_message_at", "direction": -1}],
        "limit": None, "state": True, "watch": None})
    assert len(queried["channels"]) == 1
    validate(queried["channels"][0], "V2ChannelState")
    reads = {state["user"]["id"]: state for state in queried["channels"][0]["read"]}
    assert reads[bob]["unread_messages"] == 0 and isinstance(reads[bob]["last_read"], int)

    api.call("POST", f"/api/v2/chat/channels/messaging/{unique}/unread", {"user_id": bob, "message_id": f"{unique}-m1"})
    counts = api.call("GET", "/api/v2/chat/unread", params={"user_id": bob})
    validate(counts, "V2UnreadCounts")
    assert counts["total_unread_count"] == 1 and counts["channels"][0]["channel_id"] == cid
    batch = api.call("POST", "/api/v2/chat/unread_batch", {"user_ids": [alice, bob]})
    for user_counts in batch["counts_by_user"].values():
        validate(user_counts, "V2UnreadCounts")

    got = api.call("GET", f"/api/v2/chat/messages/{unique}-m1")
    validate(got["message"], "V2Message")
    assert got["message"]["channel"]["cid"] == cid
    api.call("POST", "/api/v2/chat/channels/delivered", {"latest_delivered_messages": [{"cid": cid, "id": f"{unique}-m1"}]},
             params={"user_id": bob})
    api.call("POST", "/api/v2/chat/channels/read", {"user_id": bob})
    assert api.call("GET", "/unread", params={"user_id": bob})["total_unread_count"] == 0


def test_a_private_read_is_left_out_of_v2s_read_states(api, unique):
    """v2 requires last_read in a read state: a member whose reads are private
    (R10) is not in `read` for others, rather than given a made-up time."""
    alice, bob = f"{unique}-alice", f"{unique}-bob"
    api.call("POST", "/users", {"users": {alice: {"id": alice},
                                          bob: {"id": bob, "privacy_settings": {"read_receipts": {"enabled": False}}}}})
    api.call("POST", f"/channels/messaging/{unique}/query", {"data": {"created_by_id": alice, "members": [alice, bob]}})
    as_alice = api.user_token(alice)
    state = api.call("POST", f"/api/v2/chat/channels/messaging/{unique}/query", {}, token=as_alice)
    validate(state, "V2ChannelState")
    assert [read["user"]["id"] for read in state["read"]] == [alice]
    v1 = api.call("POST", f"/channels/messaging/{unique}/query", {}, token=as_alice)
    assert sorted(read["user"]["id"] for read in v1["read"]) == sorted([alice, bob])


def test_channels_members_messages_and_types_in_v2(api, unique):
    """The rest of what Ticks serves in v2, each answer checked against the
    document's schema for that operation."""
    alice, bob, carol = (f"{unique}-{name}" for name in ("alice", "bob", "carol"))
    api.call("POST", "/users", {"users": {user: {"id": user} for user in (alice, bob, carol)}})
    chat = "/api/v2/chat/channels/{type}/{id}"
    kw = {"type": "messaging", "id": unique}
    call(api, "POST", chat + "/query", {"data": {"created_by_id": alice, "members": [{"user_id": alice}, {"user_id": bob}]}}, **kw)
    updated = call(api, "POST", chat, {"add_members": [{"user_id": carol}], "data": {"custom": {"topic": "trip"}}}, **kw)
    assert updated["channel"]["custom"] == {"topic": "trip"}
    assert sorted(member["user_id"] for member in updated["members"]) == sorted([alice, bob, carol])
    partial = call(api, "PATCH", chat, {"set": {"color": "red"}}, **kw)
    assert partial["channel"]["custom"] == {"topic": "trip", "color": "red"}
    members = call(api, "GET", "/api/v2/chat/members",
                   params={"payload": json.dumps({"type": "messaging", "id": unique, "filter_conditions": {}})})
    assert len(members["members"]) == 3
    member = call(api, "PATCH", chat + "/member", {"set": {"nick": "B"}}, params={"user_id": bob}, **kw)
    assert member["channel_member"]["custom"] == {"nick": "B"} and member["channel_member"]["user_id"] == bob

    # Two messages, one of whose ids getstream escapes twice in a list (`@`).
    for message_id in (f"{unique}-m1", f"{unique}@m2"):
        call(api, "POST", chat + "/message", {"message": {"id": message_id, "text": "hi", "user_id": alice}}, **kw)
    many = call(api, "GET", chat + "/messages", params={"ids": f"{unique}-m1,{unique}%40m2"}, **kw)
    assert [message["id"] for message in many["messages"]] == [f"{unique}-m1", f"{unique}@m2"]
    message = "/api/v2/chat/messages/{id}"
    edited = call(api, "POST", message, {"message": {"text": "edited", "user_id": alice, "custom": {"k": 1}}}, id=f"{unique}-m1")
    assert edited["message"]["text"] == "edited" and edited["message"]["custom"] == {"k": 1}
    call(api, "PUT", message, {"set": {"k": 2}, "user_id": alice}, id=f"{unique}-m1")
    call(api, "POST", chat + "/message", {"message": {"id": f"{unique}-r1", "text": "re", "user_id": bob,
                                                      "parent_id": f"{unique}-m1"}}, **kw)
    replies = call(api, "GET", message + "/replies", id=f"{unique}-m1")
    assert [reply["id"] for reply in replies["messages"]] == [f"{unique}-r1"]
    deleted = call(api, "DELETE", message, id=f"{unique}@m2")
    assert deleted["message"]["type"] == "deleted" and isinstance(deleted["message"]["deleted_at"], int)
    truncated = call(api, "POST", chat + "/truncate", {}, **kw)
    assert isinstance(truncated["channel"]["truncated_at"], int)
    gone = call(api, "DELETE", chat, **kw)
    assert isinstance(gone["channel"]["deleted_at"], int)
    call(api, "POST", "/api/v2/chat/channels/{type}/{id}/query", {"data": {"created_by_id": alice}}, type="messaging", id=f"{unique}-2")
    task = call(api, "POST", "/api/v2/chat/channels/delete", {"cids": [f"messaging:{unique}-2"]})
    status = call(api, "GET", "/api/v2/tasks/{id}", id=task["task_id"])
    assert status["status"] == "completed" and isinstance(status["created_at"], int)

    types = "/api/v2/chat/channeltypes"
    created = call(api, "POST", types, {"name": f"t{unique}", "automod": "disabled", "automod_behavior": "flag",
                                        "max_message_length": 1000, "read_events": True})
    assert created["commands"] == ["giphy", "ban", "unban", "mute", "unmute"]
    got = call(api, "GET", types + "/{name}", name=f"t{unique}")
    assert [command["name"] for command in got["commands"]] == created["commands"] and got["grants"] == {}
    changed = call(api, "PUT", types + "/{name}", {"automod": "disabled", "automod_behavior": "flag",
                                                   "max_message_length": 2000}, name=f"t{unique}")
    assert changed["max_message_length"] == 2000 and changed["commands"] == created["commands"]
    listed = call(api, "GET", types)
    assert f"t{unique}" in listed["channel_types"]


def test_a_hard_deleted_creator_still_answers_in_v2_shapes(api, unique):
    """A hard-deleted user stays named as a channel's creator (found by the
    fuzzer); v2 requires a user's times, and the epoch (0) stands for unknown."""
    alice, bob = f"{unique}-alice", f"{unique}-bob"
    api.call("POST", "/users", {"users": {user: {"id": user} for user in (alice, bob)}})
    chat = "/api/v2/chat/channels/{type}/{id}"
    kw = {"type": "messaging", "id": unique}
    call(api, "POST", chat + "/query", {"data": {"created_by_id": alice, "members": [{"user_id": bob}]}}, **kw)
    call(api, "POST", chat + "/message", {"message": {"id": f"{unique}-m1", "text": "hi", "user_id": alice}}, **kw)
    api.call("DELETE", f"/users/{alice}", params={"hard_delete": "true"})

    state = call(api, "POST", chat + "/query", {"state": True}, **kw)
    assert state["channel"]["created_by"]["id"] == alice
    assert state["channel"]["created_by"]["created_at"] == 0 == state["channel"]["created_by"]["updated_at"]
    truncated = call(api, "POST", chat + "/truncate", {"user_id": bob}, **kw)
    assert truncated["channel"]["created_by"]["created_at"] == 0


def test_delete_users_in_v2_as_getstream_sends_it(api, unique):
    """`getstream`'s `delete_users`: every mode field it knows, unset ones as null."""
    alice, bob = f"{unique}-alice", f"{unique}-bob"
    api.call("POST", "/users", {"users": {user: {"id": user} for user in (alice, bob)}})
    call(api, "POST", "/api/v2/chat/channels/{type}/{id}/query",
         {"data": {"created_by_id": alice, "members": [{"user_id": alice}, {"user_id": bob}]}}, type="messaging", id=unique)
    task = call(api, "POST", "/api/v2/users/delete", {
        "user_ids": [alice], "user": "hard", "messages": "hard", "conversations": "hard", "calls": None, "files": None,
        "new_call_owner_id": None, "new_channel_owner_id": None})
    status = call(api, "GET", "/api/v2/tasks/{id}", id=task["task_id"])
    assert status["status"] == "completed" and status["result"] == {alice: {"status": "ok"}}
    found = call(api, "GET", "/api/v2/users", params={"payload": json.dumps({"filter_conditions": {"id": {"$in": [alice, bob]}}})})
    assert [user["id"] for user in found["users"]] == [bob]
    assert call(api, "GET", "/api/v2/chat/unread", params={"user_id": bob})["channels"] == []
    refused = api.raw("POST", "/api/v2/users/delete", body={"user_ids": [bob], "user": "pruning"})
    assert refused.status_code == 400
    validate(refused.json(), "Error")


def test_mark_unread_by_thread_and_by_timestamp_in_v2(api, unique):
    alice, bob = f"{unique}-alice", f"{unique}-bob"
    api.call("POST", "/users", {"users": {user: {"id": user} for user in (alice, bob)}})
    chat = "/api/v2/chat/channels/{type}/{id}"
    kw = {"type": "messaging", "id": unique}
    call(api, "POST", chat + "/query", {"data": {"created_by_id": alice, "members": [{"user_id": alice}, {"user_id": bob}]}}, **kw)
    sent = [call(api, "POST", chat + "/message", {"message": {"id": f"{unique}-m{n}", "text": "hi", "user_id": alice}}, **kw)
            for n in (1, 2, 3)]
    call(api, "POST", chat + "/message", {"message": {"id": f"{unique}-r1", "text": "re", "user_id": alice,
                                                      "parent_id": f"{unique}-m1"}}, **kw)
    call(api, "POST", chat + "/read", {"user_id": bob}, **kw)
    call(api, "POST", chat + "/read", {"user_id": bob, "thread_id": f"{unique}-m1"}, **kw)

    # From m2's time, in v2's nanoseconds: m2 and m3 are unread again.
    call(api, "POST", chat + "/unread", {"user_id": bob, "message_timestamp": sent[1]["message"]["created_at"]}, **kw)
    counts = call(api, "GET", "/api/v2/chat/unread", params={"user_id": bob})
    assert counts["total_unread_count"] == 2 and counts["total_unread_threads_count"] == 0
    # The thread: its reply is unread again; the channel's count stays.
    call(api, "POST", chat + "/unread", {"user_id": bob, "thread_id": f"{unique}-m1"}, **kw)
    counts = call(api, "GET", "/api/v2/chat/unread", params={"user_id": bob})
    assert counts["total_unread_count"] == 2 and counts["total_unread_threads_count"] == 1
    assert [thread["parent_message_id"] for thread in counts["threads"]] == [f"{unique}-m1"]
    for body in ({"user_id": bob}, {"user_id": bob, "message_id": f"{unique}-m1", "thread_id": f"{unique}-m1"},
                 {"user_id": bob, "message_timestamp": "2026-11-29T00:00:00Z", "thread_id": f"{unique}-m1"}):
        refused = api.raw("POST", chat.format(**kw) + "/unread", body=body)
        assert refused.status_code == 400, body
        validate(refused.json(), "Error")
