"""The chat surface around receipts, against the real binary, on SQLite and
(when TICKS_TEST_POSTGRES_URL is set) PostgreSQL: distinct channels, channel
updates, truncation, deletion and tasks, member queries and updates, partial
user updates, message edits, deletes and gets, and unread counts.

Each request is what Stream's Python SDK (stream-chat) sends for the call
(`SDK` below): `"user": {"id": ...}` rather than `user_id`, plain string
members in `data.members`, `"message": null` on a channel update,
`?hard_delete=False` with Python's capital letter. Errors must be in
Stream's format. What each change does to unread counts and receipts has a
test of its own (docs/receipt-rules.md, "Deleting, editing, truncating").
"""

import json
import random
import re
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import served
from test_nodes import Socket
from websockets.sync.client import connect
from wire import Ticks

# Stream's error codes by status.
INPUT, NOT_ALLOWED, NOT_FOUND = 4, 17, 16
DISTINCT_ID = re.compile(r"^!members-[A-Za-z0-9_-]{43}$")


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(request, tmp_path_factory):
    """One server per store for the module (the tests use fresh ids)."""
    with served(request.param, "surface", tmp_path_factory) as process:
        yield process


@pytest.fixture
def api(server):
    """wire.Ticks with the server token."""
    return Ticks(server.base_url, server.api_key, server.api_secret)


@pytest.fixture
def sdk(api):
    """Stream's Python SDK's requests, with the server token."""
    return SDK(api)


@pytest.fixture
def sockets(server, api):
    """Opens users' WebSockets (test_nodes.Socket); closes them afterwards."""
    opened = []

    def open_socket(user):
        socket = Socket(server, api, user)
        opened.append(socket)
        return socket

    yield open_socket
    for socket in opened:
        socket.close()


@pytest.fixture
def group(api, unique):
    """alice (the creator), bob and carol in messaging:<unique>; dave in no channel."""

    class Group:
        alice, bob, carol, dave = (f"{unique}-{name}" for name in ("alice", "bob", "carol", "dave"))
        cid = f"messaging:{unique}-g"
        path = f"/channels/messaging/{unique}-g"

    api.upsert_users(Group.alice, Group.bob, Group.carol, Group.dave)
    api.create_channel(Group.cid, [Group.alice, Group.bob, Group.carol], created_by=Group.alice)
    return Group


class SDK:
    """The requests Stream's Python SDK makes (stream_chat.client.StreamChat
    and stream_chat.channel.Channel), each answered with the `requests`
    response whatever its status. `as_user` makes them with a user token, as
    a client-side SDK would."""

    def __init__(self, api, token=None):
        self.api = api
        self.token = token

    def as_user(self, user_id):
        return SDK(self.api, self.api.user_token(user_id))

    def send(self, method, path, body=None, params=None):
        return self.api.raw(method, path, body, token=self.token, params=params)

    def send_raw(self, method, path, data: bytes):
        """A body sent as it is (malformed JSON)."""
        return self.api.session.request(
            method, self.api.base_url + path, params={"api_key": self.api.api_key}, data=data,
            headers={"Authorization": self.token or self.api.server_token, "stream-auth-type": "jwt"},
            timeout=self.api.timeout)

    # Channel

    def create_distinct(self, channel_type, members, created_by):
        """`client.channel(type, data={"members": members}).create(created_by)`."""
        body = {"state": False, "data": {"members": list(members), "created_by": {"id": created_by}},
                "watch": False, "presence": False}
        return self.send("POST", f"/channels/{channel_type}/query", body)

    def query(self, cid, data=None, **options):
        """`channel.query(**options)`."""
        return self.send("POST", f"{channel_url(cid)}/query", {"state": True, "data": data or {}, **options})

    def update(self, cid, channel_data, update_message=None):
        """`channel.update(channel_data)`: the message is sent, null."""
        return self.send("POST", channel_url(cid), {"data": channel_data, "message": update_message})

    def update_partial(self, cid, to_set=None, to_unset=None):
        return self.send("PATCH", channel_url(cid), {"set": to_set or {}, "unset": to_unset or []})

    def delete(self, cid, hard=False):
        """`channel.delete(hard)`: `requests` writes the bool as Python does, `False`/`True`."""
        return self.send("DELETE", channel_url(cid), params={"hard_delete": hard})

    def truncate(self, cid, **options):
        return self.send("POST", f"{channel_url(cid)}/truncate", options)

    def query_members(self, cid, filter_conditions, sort=None, **options):
        channel_type, channel_id = cid.split(":", 1)
        payload = {"id": channel_id, "type": channel_type, "filter_conditions": filter_conditions,
                   "sort": sort or [], **options}
        return self.send("GET", "/members", params={"payload": json.dumps(payload)})

    def update_member_partial(self, cid, user_id, to_set=None, to_unset=None):
        return self.send("PATCH", f"{channel_url(cid)}/member/{user_id}",
                         {"set": to_set or {}, "unset": to_unset or []})

    def get_messages(self, cid, message_ids):
        return self.send("GET", f"{channel_url(cid)}/messages", params={"ids": ",".join(message_ids)})

    def send_message(self, cid, message, user_id):
        return self.send("POST", f"{channel_url(cid)}/message", {"message": {**message, "user": {"id": user_id}}})

    def mark_read(self, cid, user_id, **data):
        return self.send("POST", f"{channel_url(cid)}/read", {**data, "user": {"id": user_id}})

    # Client

    def update_message(self, message):
        return self.send("POST", f"/messages/{message['id']}", {"message": message})

    def update_message_partial(self, message_id, updates, user_id, **options):
        return self.send("PUT", f"/messages/{message_id}", {**updates, "user": {"id": user_id}, **options})

    def delete_message(self, message_id, **options):
        return self.send("DELETE", f"/messages/{message_id}", params=options)

    def get_message(self, message_id):
        return self.send("GET", f"/messages/{message_id}")

    def receipts(self, message_id):
        """Ticks' own: the exact receipts of one message."""
        return self.send("GET", f"/messages/{message_id}/receipts")

    def update_users_partial(self, updates):
        return self.send("PATCH", "/users", {"users": updates})

    def delete_channels(self, cids, **options):
        return self.send("POST", "/channels/delete", {**options, "cids": cids})

    def get_task(self, task_id):
        return self.send("GET", f"/tasks/{task_id}")

    def unread_counts(self, user_id=None):
        """`client.unread_counts(user_id)`; without a user id, as a user token asks."""
        return self.send("GET", "/unread", params={"user_id": user_id} if user_id else None)

    def unread_counts_batch(self, user_ids):
        return self.send("POST", "/unread_batch", {"user_ids": user_ids})


def channel_url(cid):
    channel_type, channel_id = cid.split(":", 1)
    return f"/channels/{channel_type}/{channel_id}"


def ok(response, status=200):
    """The JSON body of a response that must have `status`."""
    assert response.status_code == status, f"{response.status_code} {response.text}"
    body = response.json()
    assert "duration" in body, body
    return body


def refused(response, status, code):
    """Stream's error body, checked."""
    assert response.status_code == status, f"{response.status_code} {response.text}"
    body = response.json()
    assert (body["StatusCode"], body["code"]) == (status, code), body
    assert body["message"] and "more_info" in body and "duration" in body, body
    assert isinstance(body["details"], list) and all(isinstance(d, int) for d in body["details"]), body
    return body


def read_state(api, cid, user):
    """`user`'s entry in the channel query's `read`, as they see it."""
    state = api.query_channel(cid, user=user, messages_limit=300)
    return next(read for read in state["read"] if read["user"]["id"] == user)


def unread(api, user):
    """GET /unread for `user` (server token): total and {cid: count}."""
    counts = api.call("GET", "/unread", params={"user_id": user})
    return counts["total_unread_count"], {entry["channel_id"]: entry["unread_count"] for entry in counts["channels"]}


def hello(api, user):
    """The `me` of the first frame of a fresh connection: the totals the socket starts from."""
    with connect(api.socket_url(user), open_timeout=10) as socket:
        first = json.loads(socket.recv(timeout=10))
    assert first["type"] == "health.check", first
    return first["me"]


def send(api, cid, user, *message_ids):
    for message_id in message_ids:
        api.send_message(cid, user, f"text of {message_id}", message_id=message_id)


# Distinct channels


def test_distinct_channel_is_the_same_for_the_same_members_in_any_order(sdk, group):
    created = ok(sdk.create_distinct("messaging", [group.bob, group.alice], group.alice), 201)
    channel = created["channel"]
    assert DISTINCT_ID.match(channel["id"]), channel["id"]
    assert channel["cid"] == f"messaging:{channel['id']}"
    assert channel["member_count"] == 2
    assert {m["user_id"] for m in created["members"]} == {group.alice, group.bob}

    again = ok(sdk.as_user(group.bob).create_distinct("messaging", [group.alice, group.bob], group.bob))
    assert again["channel"]["id"] == channel["id"]
    # Other members, another channel.
    other = ok(sdk.create_distinct("messaging", [group.alice, group.bob, group.carol], group.alice), 201)
    assert other["channel"]["id"] != channel["id"] and DISTINCT_ID.match(other["channel"]["id"])
    # Once made, the SDK queries it by its id.
    assert ok(sdk.query(channel["cid"], user={"id": group.alice}))["channel"]["id"] == channel["id"]


def test_distinct_channel_refuses_too_few_members_and_outsiders(sdk, group):
    refused(sdk.create_distinct("messaging", [group.alice], group.alice), 400, INPUT)
    refused(sdk.send("POST", "/channels/messaging/query", {"data": {"members": "nope"}}), 400, INPUT)
    refused(sdk.send("POST", "/channels/messaging/query", {"data": {"members": [group.alice, "bad id!"]}}), 400, INPUT)
    ok(sdk.create_distinct("messaging", [group.alice, group.bob], group.alice), 201)
    # dave may not look into alice and bob's channel, nor create it in alice's name.
    refused(sdk.as_user(group.dave).create_distinct("messaging", [group.alice, group.bob], group.dave), 403, NOT_ALLOWED)
    refused(sdk.as_user(group.dave).create_distinct("messaging", [group.alice, group.bob], group.alice), 403,
            NOT_ALLOWED)


def test_distinct_channel_mark_read_and_receipts_work_like_any_channel(api, sdk, group, sockets, unique):
    cid = ok(sdk.create_distinct("messaging", [group.alice, group.bob], group.alice), 201)["channel"]["cid"]
    alice_socket = sockets(group.alice)
    first, second = f"{unique}-d1", f"{unique}-d2"
    ok(sdk.send_message(cid, {"id": first, "text": "one"}, group.alice), 201)
    ok(sdk.send_message(cid, {"id": second, "text": "two"}, group.alice), 201)
    assert read_state(api, cid, group.bob)["unread_messages"] == 2
    assert unread(api, group.bob) == (2, {cid: 2})

    api.mark_delivered(group.bob, (cid, second))
    delivered = alice_socket.wait_for(lambda e: e["type"] == "message.delivered")
    assert (delivered["cid"], delivered["last_delivered_message_id"]) == (cid, second)

    event = ok(sdk.as_user(group.bob).mark_read(cid, group.bob, message_id=first))["event"]
    assert (event["type"], event["cid"], event["last_read_message_id"]) == ("message.read", cid, first)
    read = alice_socket.wait_for(lambda e: e["type"] == "message.read")
    assert (read["user"]["id"], read["last_read_message_id"]) == (group.bob, first)

    bob = read_state(api, cid, group.bob)
    assert (bob["unread_messages"], bob["first_unread_message_id"], bob["last_read_message_id"]) == (1, second, first)
    assert unread(api, group.bob) == (1, {cid: 1})
    receipts = ok(sdk.receipts(first))
    assert (receipts["read_count"], receipts["delivered_count"]) == (1, 1)
    assert [r["user"]["id"] for r in receipts["receipts"]] == [group.bob]
    assert ok(sdk.receipts(second))["read_count"] == 0
    assert ok(sdk.receipts(second))["delivered_count"] == 1

    ok(sdk.mark_read(cid, group.bob))
    assert unread(api, group.bob) == (0, {})
    assert ok(sdk.receipts(second))["read_count"] == 1


# Channel updates


def test_update_channel_data_replaces_custom_fields_and_sends_channel_updated(sdk, group, sockets):
    bob_socket = sockets(group.bob)
    ok(sdk.update_partial(group.cid, {"color": "red", "topic": "trip"}))
    answer = ok(sdk.update(group.cid, {"topic": "plans", "size": 3}))
    assert answer["channel"]["topic"] == "plans" and answer["channel"]["size"] == 3
    assert "color" not in answer["channel"]
    assert answer["channel"]["cid"] == group.cid
    assert {m["user_id"] for m in answer["members"]} == {group.alice, group.bob, group.carol}
    event = bob_socket.wait_for(lambda e: e["type"] == "channel.updated" and e["channel"].get("topic") == "plans")
    assert event["cid"] == group.cid and "color" not in event["channel"]
    # The channel as anyone reads it afterwards.
    assert "color" not in ok(sdk.query(group.cid, user={"id": group.bob}))["channel"]
    # The creator may update it with a user token.
    assert ok(sdk.as_user(group.alice).update(group.cid, {"topic": "by alice"}))["channel"]["topic"] == "by alice"


def test_partial_channel_update_sets_and_unsets_and_sends_channel_updated(sdk, group, sockets):
    carol_socket = sockets(group.carol)
    answer = ok(sdk.as_user(group.alice).update_partial(group.cid, {"color": "blue", "nested": {"a": 1}}))
    assert (answer["channel"]["color"], answer["channel"]["nested"]) == ("blue", {"a": 1})
    event = carol_socket.wait_for(lambda e: e["type"] == "channel.updated")
    assert event["cid"] == group.cid and event["channel"]["color"] == "blue"
    assert event["user"]["id"] == group.alice

    answer = ok(sdk.update_partial(group.cid, {"size": 2}, ["color"]))
    assert "color" not in answer["channel"] and answer["channel"]["size"] == 2 and answer["channel"]["nested"] == {"a": 1}


def test_channel_updates_refuse_bad_input_unknown_channels_and_outsiders(sdk, group, unique):
    refused(sdk.send("PATCH", channel_url(group.cid), {"set": ["color"], "unset": []}), 400, INPUT)
    refused(sdk.update_partial(group.cid), 400, INPUT)
    refused(sdk.update_partial(group.cid, {"color": "x"}, ["color"]), 400, INPUT)
    refused(sdk.update_partial(group.cid, {"member_count": 9}), 400, INPUT)
    refused(sdk.update(group.cid, {"members": [group.alice]}), 400, INPUT)
    refused(sdk.send("POST", channel_url(group.cid), {"data": "text", "message": None}), 400, INPUT)
    refused(sdk.send_raw("PATCH", channel_url(group.cid), b'{"set": {"color": '), 400, INPUT)
    refused(sdk.send_raw("POST", channel_url(group.cid), b"[1, 2]"), 400, INPUT)
    unknown = f"messaging:{unique}-nowhere"
    refused(sdk.update_partial(unknown, {"color": "x"}), 404, NOT_FOUND)
    refused(sdk.update(unknown, {"color": "x"}), 404, NOT_FOUND)
    refused(sdk.as_user(group.dave).update_partial(group.cid, {"color": "x"}), 403, NOT_ALLOWED)
    refused(sdk.as_user(group.dave).update(group.cid, {"color": "x"}), 403, NOT_ALLOWED)
    # An ordinary member may not change the channel either.
    refused(sdk.as_user(group.bob).update_partial(group.cid, {"color": "x"}), 403, NOT_ALLOWED)
    refused(sdk.as_user(group.bob).update(group.cid, {"color": "x"}), 403, NOT_ALLOWED)
    refused(sdk.as_user(group.bob).send("PATCH", channel_url(group.cid),
                                        {"set": {"color": "x"}, "user": {"id": group.alice}}), 403, NOT_ALLOWED)


# Deleting channels


def test_delete_channel_soft_as_the_sdk_sends_it_and_hard_with_a_server_token(api, sdk, group, unique):
    send(api, group.cid, group.alice, f"{unique}-m1")
    answer = ok(sdk.as_user(group.alice).delete(group.cid))  # ?hard_delete=False
    assert answer["channel"]["cid"] == group.cid and answer["channel"]["deleted_at"]
    refused(sdk.update_partial(group.cid, {"x": 1}), 404, NOT_FOUND)
    refused(sdk.get_message(f"{unique}-m1"), 404, NOT_FOUND)
    refused(sdk.delete(group.cid), 404, NOT_FOUND)
    # Created again, it starts afresh: no members but those named, none of the old messages.
    again = ok(sdk.query(group.cid, data={"members": [group.alice, group.bob], "created_by": {"id": group.alice}}), 201)
    assert again["messages"] == [] and {m["user_id"] for m in again["members"]} == {group.alice, group.bob}

    # Hard deletes need a server token, even the creator's.
    refused(sdk.as_user(group.alice).delete(group.cid, hard=True), 403, NOT_ALLOWED)
    assert ok(sdk.delete(group.cid, hard=True))["channel"]["cid"] == group.cid
    refused(sdk.delete(group.cid, hard=True), 404, NOT_FOUND)
    fresh = ok(sdk.query(group.cid, data={"members": [group.bob], "created_by": {"id": group.bob}}), 201)
    assert fresh["messages"] == [] and [m["user_id"] for m in fresh["members"]] == [group.bob]


def test_delete_channel_refuses_bad_input_and_those_who_may_not(sdk, group, unique):
    refused(sdk.send("DELETE", channel_url(group.cid), params={"hard_delete": "maybe"}), 400, INPUT)
    refused(sdk.send("DELETE", "/channels/messaging/bad%20id"), 400, INPUT)
    refused(sdk.delete(f"messaging:{unique}-nowhere"), 404, NOT_FOUND)
    refused(sdk.as_user(group.dave).delete(group.cid), 403, NOT_ALLOWED)
    refused(sdk.as_user(group.bob).delete(group.cid), 403, NOT_ALLOWED)
    assert ok(sdk.query(group.cid, user={"id": group.bob}))["channel"]["cid"] == group.cid


def test_channel_deleted_reaches_the_members(sdk, group, sockets):
    bob_socket = sockets(group.bob)
    ok(sdk.delete(group.cid, hard=True))
    event = bob_socket.wait_for(lambda e: e["type"] == "channel.deleted")
    assert event["cid"] == group.cid and event["channel"]["cid"] == group.cid
    assert event["channel"]["deleted_at"]


def test_bulk_delete_answers_a_task_with_a_result_per_cid(api, sdk, group, unique, sockets):
    other = f"messaging:{unique}-other"
    api.create_channel(other, [group.alice, group.bob], created_by=group.alice)
    missing = f"messaging:{unique}-missing"
    bob_socket = sockets(group.bob)
    answer = ok(sdk.delete_channels([group.cid, other, missing], hard_delete=True), 201)
    task = ok(sdk.get_task(answer["task_id"]))
    assert task["task_id"] == answer["task_id"] and task["status"] == "completed"
    assert task["created_at"] and task["updated_at"]
    assert task["result"][group.cid]["status"] == "ok" and task["result"][other]["status"] == "ok"
    assert task["result"][missing]["status"] == "error" and task["result"][missing]["error"]
    bob_socket.wait_for(lambda e: e["type"] == "channel.deleted" and e["cid"] == other)
    refused(sdk.update_partial(other, {"x": 1}), 404, NOT_FOUND)


def test_bulk_delete_and_tasks_refuse_bad_input_users_and_unknown_ids(sdk, group, unique):
    refused(sdk.as_user(group.alice).delete_channels([group.cid]), 403, NOT_ALLOWED)
    refused(sdk.delete_channels([]), 400, INPUT)
    refused(sdk.delete_channels(["no-colon"]), 400, INPUT)
    refused(sdk.send("POST", "/channels/delete", {"cids": group.cid}), 400, INPUT)
    refused(sdk.get_task(f"{unique}-no-such-task"), 404, NOT_FOUND)
    task_id = ok(sdk.delete_channels([f"messaging:{unique}-missing"]), 201)["task_id"]
    refused(sdk.as_user(group.alice).get_task(task_id), 403, NOT_ALLOWED)
    # The refused calls deleted nothing.
    ok(sdk.update_partial(group.cid, {"still": True}))


# Truncating


def test_truncate_answers_the_channel_and_sends_channel_truncated(api, sdk, group, sockets, unique):
    send(api, group.cid, group.alice, f"{unique}-m1", f"{unique}-m2")
    carol_socket = sockets(group.carol)
    channel = ok(sdk.as_user(group.alice).truncate(group.cid, message=None), 201)["channel"]
    assert channel["cid"] == group.cid and channel["truncated_at"]
    event = carol_socket.wait_for(lambda e: e["type"] == "channel.truncated")
    assert event["cid"] == group.cid and event["channel"]["truncated_at"] == channel["truncated_at"]
    assert event["user"]["id"] == group.alice
    assert ok(sdk.query(group.cid, user={"id": group.bob}))["messages"] == []
    assert ok(sdk.get_messages(group.cid, [f"{unique}-m1", f"{unique}-m2"]))["messages"] == []
    # The channel goes on.
    send(api, group.cid, group.bob, f"{unique}-m3")
    assert [m["id"] for m in ok(sdk.query(group.cid, user={"id": group.bob}))["messages"]] == [f"{unique}-m3"]

    ok(sdk.truncate(group.cid, hard_delete=True, skip_push=True), 201)
    refused(sdk.get_message(f"{unique}-m3"), 404, NOT_FOUND)


def test_truncate_refuses_bad_input_unknown_channels_and_those_who_may_not(sdk, group, unique):
    refused(sdk.truncate(group.cid, truncated_at="2026-01-01T00:00:00Z"), 400, INPUT)
    refused(sdk.truncate(group.cid, message={"text": "bye"}), 400, INPUT)
    refused(sdk.truncate(group.cid, hard_delete="yes"), 400, INPUT)
    refused(sdk.truncate(f"messaging:{unique}-nowhere"), 404, NOT_FOUND)
    refused(sdk.as_user(group.dave).truncate(group.cid), 403, NOT_ALLOWED)
    refused(sdk.as_user(group.bob).truncate(group.cid), 403, NOT_ALLOWED)
    refused(sdk.as_user(group.alice).truncate(group.cid, user={"id": group.bob}), 403, NOT_ALLOWED)


def test_truncation_sets_every_unread_count_to_zero(api, sdk, group, unique):
    elsewhere = f"messaging:{unique}-elsewhere"
    api.create_channel(elsewhere, [group.alice, group.bob], created_by=group.alice)
    send(api, group.cid, group.alice, f"{unique}-m1", f"{unique}-m2", f"{unique}-m3")
    send(api, elsewhere, group.alice, f"{unique}-e1")
    ok(sdk.mark_read(group.cid, group.carol, message_id=f"{unique}-m1"))
    assert unread(api, group.bob) == (4, {group.cid: 3, elsewhere: 1})
    assert unread(api, group.carol) == (2, {group.cid: 2})

    ok(sdk.truncate(group.cid), 201)
    for member in (group.alice, group.bob, group.carol):
        read = read_state(api, group.cid, member)
        assert read["unread_messages"] == 0 and "first_unread_message_id" not in read, read
    assert unread(api, group.bob) == (1, {elsewhere: 1})
    assert unread(api, group.carol) == (0, {})
    me = hello(api, group.bob)
    assert (me["total_unread_count"], me["unread_channels"]) == (1, 1)
    batch = ok(sdk.unread_counts_batch([group.bob, group.carol]), 201)["counts_by_user"]
    assert batch[group.bob]["total_unread_count"] == 1 and batch[group.carol]["total_unread_count"] == 0

    # What comes after counts again, from zero.
    send(api, group.cid, group.alice, f"{unique}-m4")
    assert read_state(api, group.cid, group.bob)["unread_messages"] == 1
    assert read_state(api, group.cid, group.bob)["first_unread_message_id"] == f"{unique}-m4"
    assert unread(api, group.bob) == (2, {group.cid: 1, elsewhere: 1})


def test_receipts_of_a_truncated_message_are_gone(api, sdk, group, unique):
    send(api, group.cid, group.alice, f"{unique}-m1")
    api.mark_delivered(group.bob, (group.cid, f"{unique}-m1"))
    ok(sdk.mark_read(group.cid, group.carol))
    assert ok(sdk.receipts(f"{unique}-m1"))["read_count"] == 1

    ok(sdk.truncate(group.cid), 201)
    refused(sdk.receipts(f"{unique}-m1"), 404, NOT_FOUND)
    refused(sdk.as_user(group.alice).receipts(f"{unique}-m1"), 404, NOT_FOUND)
    refused(sdk.get_message(f"{unique}-m1"), 404, NOT_FOUND)
    # Nor can a receipt be given for it.
    refused(sdk.mark_read(group.cid, group.bob, message_id=f"{unique}-m1"), 400, INPUT)

    # A message after the truncation has receipts of its own, from nobody yet.
    send(api, group.cid, group.alice, f"{unique}-m2")
    fresh = ok(sdk.receipts(f"{unique}-m2"))
    assert (fresh["read_count"], fresh["delivered_count"], fresh["receipts"]) == (0, 0, [])
    ok(sdk.mark_read(group.cid, group.bob))
    assert [r["user"]["id"] for r in ok(sdk.receipts(f"{unique}-m2"))["receipts"]] == [group.bob]


# Members


def test_query_members_filters_pages_and_finds_distinct_channels(sdk, group):
    everyone = ok(sdk.query_members(group.cid, {}))["members"]
    assert [m["user_id"] for m in everyone] == [group.alice, group.bob, group.carol]
    assert everyone[0]["role"] == "owner" and everyone[0]["user"]["id"] == group.alice
    chosen = ok(sdk.query_members(group.cid, {"id": {"$in": [group.carol, group.bob, group.dave]}}))["members"]
    assert [m["user_id"] for m in chosen] == [group.bob, group.carol]
    page = ok(sdk.query_members(group.cid, {}, limit=1, offset=1))["members"]
    assert [m["user_id"] for m in page] == [group.bob]
    assert ok(sdk.query_members(group.cid, {"id": {"$in": []}}))["members"] == []
    # A member asks too.
    assert len(ok(sdk.as_user(group.bob).query_members(group.cid, {}))["members"]) == 3

    # A distinct channel named by its members, as the SDK does for a channel without an id.
    ok(sdk.create_distinct("messaging", [group.alice, group.bob], group.alice), 201)
    payload = {"type": "messaging", "id": None, "members": [group.bob, group.alice], "filter_conditions": {},
               "sort": []}
    found = ok(sdk.send("GET", "/members", params={"payload": json.dumps(payload)}))["members"]
    assert {m["user_id"] for m in found} == {group.alice, group.bob}


def test_query_members_refuses_bad_payloads_unknown_channels_and_outsiders(sdk, group, unique):
    refused(sdk.send("GET", "/members"), 400, INPUT)
    refused(sdk.send("GET", "/members", params={"payload": "{"}), 400, INPUT)
    refused(sdk.send("GET", "/members", params={"payload": json.dumps({"id": "x"})}), 400, INPUT)
    refused(sdk.query_members(group.cid, {"name": "Bob"}), 400, INPUT)
    refused(sdk.query_members(group.cid, {}, limit=0), 400, INPUT)
    refused(sdk.query_members(group.cid, {}, offset=-1), 400, INPUT)
    refused(sdk.query_members(f"messaging:{unique}-nowhere", {}), 404, NOT_FOUND)
    refused(sdk.as_user(group.dave).query_members(group.cid, {}), 403, NOT_ALLOWED)


def test_partial_member_update_sets_unsets_and_sends_member_updated(sdk, group, sockets):
    alice_socket = sockets(group.alice)
    member = ok(sdk.as_user(group.bob).update_member_partial(group.cid, group.bob, {"nickname": "B", "muted": True}))
    member = member["channel_member"]
    assert (member["user_id"], member["nickname"], member["muted"]) == (group.bob, "B", True)
    event = alice_socket.wait_for(lambda e: e["type"] == "member.updated")
    assert event["cid"] == group.cid and event["member"]["user_id"] == group.bob and event["member"]["nickname"] == "B"

    member = ok(sdk.update_member_partial(group.cid, group.bob, {"channel_role": "channel_moderator"}, ["muted"]))
    member = member["channel_member"]
    assert (member["channel_role"], member["role"], member["nickname"]) == ("channel_moderator", "moderator", "B")
    assert "muted" not in member
    listed = ok(sdk.query_members(group.cid, {"id": {"$in": [group.bob]}}))["members"][0]
    assert (listed["nickname"], listed["channel_role"]) == ("B", "channel_moderator")
    # The creator manages everyone's data.
    assert ok(sdk.as_user(group.alice).update_member_partial(group.cid, group.carol, {"tag": 1}))[
        "channel_member"]["tag"] == 1


def test_partial_member_update_refuses_bad_input_unknown_members_and_those_who_may_not(sdk, group, unique):
    refused(sdk.update_member_partial(group.cid, group.bob), 400, INPUT)
    refused(sdk.update_member_partial(group.cid, group.bob, {"channel_role": "owner"}), 400, INPUT)
    refused(sdk.update_member_partial(group.cid, group.bob, None, ["channel_role"]), 400, INPUT)
    refused(sdk.update_member_partial(group.cid, group.bob, {"banned": True}), 400, INPUT)
    refused(sdk.send("PATCH", f"{channel_url(group.cid)}/member/{group.bob}", {"set": "x"}), 400, INPUT)
    refused(sdk.update_member_partial(group.cid, group.dave, {"x": 1}), 404, NOT_FOUND)
    refused(sdk.update_member_partial(f"messaging:{unique}-nowhere", group.bob, {"x": 1}), 404, NOT_FOUND)
    refused(sdk.as_user(group.dave).update_member_partial(group.cid, group.dave, {"x": 1}), 403, NOT_ALLOWED)
    refused(sdk.as_user(group.carol).update_member_partial(group.cid, group.bob, {"x": 1}), 403, NOT_ALLOWED)
    refused(sdk.as_user(group.bob).update_member_partial(group.cid, group.bob, {"channel_role": "channel_moderator"}),
            403, NOT_ALLOWED)


# Users


def test_partial_user_update_sets_and_unsets_fields(sdk, group):
    ok(sdk.update_users_partial([{"id": group.bob, "set": {"name": "Bob", "city": "Oslo", "age": 30}}]))
    answer = ok(sdk.update_users_partial([
        {"id": group.bob, "set": {"city": "Bergen"}, "unset": ["age"]},
        {"id": group.carol, "set": {"name": "Carol"}},
    ]))
    bob, carol = answer["users"][group.bob], answer["users"][group.carol]
    assert (bob["id"], bob["name"], bob["city"]) == (group.bob, "Bob", "Bergen") and "age" not in bob
    assert carol["name"] == "Carol" and carol["role"] == "user"
    queried = {u["id"]: u for u in ok(sdk.send("GET", "/users", params={"payload": json.dumps(
        {"filter_conditions": {"id": {"$in": [group.bob]}}, "sort": []})}))["users"]}
    assert queried[group.bob]["city"] == "Bergen" and "age" not in queried[group.bob]
    # A user updates themselves; a server token gives roles.
    assert ok(sdk.as_user(group.bob).update_users_partial([{"id": group.bob, "set": {"city": "Tromsø"}}]))[
        "users"][group.bob]["city"] == "Tromsø"
    assert ok(sdk.update_users_partial([{"id": group.dave, "set": {"role": "admin"}}]))["users"][group.dave][
        "role"] == "admin"


def test_partial_user_update_refuses_bad_input_others_and_unknown_users(sdk, group, unique):
    refused(sdk.as_user(group.bob).update_users_partial([{"id": group.alice, "set": {"name": "x"}}]), 403, NOT_ALLOWED)
    refused(sdk.as_user(group.bob).update_users_partial([{"id": group.bob, "set": {"role": "admin"}}]), 403,
            NOT_ALLOWED)
    refused(sdk.update_users_partial([]), 400, INPUT)
    refused(sdk.update_users_partial([{"id": group.bob}]), 400, INPUT)
    refused(sdk.update_users_partial([{"id": group.bob, "set": {"id": "other"}}]), 400, INPUT)
    refused(sdk.update_users_partial([{"id": group.bob, "set": {"a": 1}}, {"id": group.bob, "set": {"b": 1}}]), 400,
            INPUT)
    refused(sdk.update_users_partial([{"set": {"a": 1}}]), 400, INPUT)
    refused(sdk.send("PATCH", "/users", {"users": {group.bob: {"set": {"a": 1}}}}), 400, INPUT)
    # A user that does not exist: Stream's input error (a user named in a body must exist first).
    refused(sdk.update_users_partial([{"id": f"{unique}-nobody", "set": {"name": "x"}}]), 400, INPUT)


# Messages


def test_update_message_replaces_text_and_custom_data_and_sends_message_updated(api, sdk, group, sockets, unique):
    message_id = f"{unique}-m1"
    ok(sdk.send_message(group.cid, {"id": message_id, "text": "hello", "mood": "happy"}, group.alice), 201)
    bob_socket = sockets(group.bob)
    edited = ok(sdk.as_user(group.alice).update_message(
        {"id": message_id, "text": "hello, all", "place": "here", "user": {"id": group.alice}}), 201)["message"]
    assert (edited["id"], edited["text"], edited["type"], edited["place"]) == (message_id, "hello, all", "regular",
                                                                              "here")
    assert "mood" not in edited and edited["message_text_updated_at"] and edited["user"]["id"] == group.alice
    event = bob_socket.wait_for(lambda e: e["type"] == "message.updated")
    assert (event["cid"], event["message"]["id"], event["message"]["text"]) == (group.cid, message_id, "hello, all")
    assert event["user"]["id"] == group.alice
    stored = ok(sdk.get_message(message_id))["message"]
    assert stored["text"] == "hello, all" and stored["created_at"] < stored["updated_at"]
    # A server token edits anyone's message.
    assert ok(sdk.update_message({"id": message_id, "text": "by the server"}), 201)["message"]["text"] == "by the server"


def test_partial_message_update_sets_and_unsets(sdk, group, sockets, unique):
    message_id = f"{unique}-m1"
    ok(sdk.send_message(group.cid, {"id": message_id, "text": "hi", "a": 1, "b": 2}, group.alice), 201)
    carol_socket = sockets(group.carol)
    edited = ok(sdk.update_message_partial(message_id, {"set": {"text": "hi there", "c": 3}, "unset": ["a"]},
                                           group.alice), 201)["message"]
    assert (edited["text"], edited["b"], edited["c"]) == ("hi there", 2, 3) and "a" not in edited
    event = carol_socket.wait_for(lambda e: e["type"] == "message.updated")
    assert event["message"]["text"] == "hi there" and event["user"]["id"] == group.alice
    # Custom data alone keeps the text.
    edited = ok(sdk.as_user(group.alice).update_message_partial(message_id, {"set": {"d": 4}}, group.alice), 201)
    assert edited["message"]["text"] == "hi there" and edited["message"]["d"] == 4


def test_message_updates_refuse_bad_input_others_and_unknown_ids(sdk, group, unique):
    message_id = f"{unique}-m1"
    ok(sdk.send_message(group.cid, {"id": message_id, "text": "hi"}, group.alice), 201)
    refused(sdk.update_message({"id": f"{unique}-nope", "text": "x"}), 404, NOT_FOUND)
    refused(sdk.update_message_partial(f"{unique}-nope", {"set": {"text": "x"}}, group.alice), 404, NOT_FOUND)
    refused(sdk.send("POST", f"/messages/{message_id}", {"message": None}), 400, INPUT)
    refused(sdk.send("POST", f"/messages/{message_id}", {}), 400, INPUT)
    refused(sdk.update_message({"id": message_id, "text": ""}), 400, INPUT)
    refused(sdk.send("POST", f"/messages/{message_id}", {"message": {"id": f"{unique}-other", "text": "x"}}), 400,
            INPUT)
    refused(sdk.update_message_partial(message_id, {"set": {}}, group.alice), 400, INPUT)
    refused(sdk.update_message_partial(message_id, {"set": {"text": 5}}, group.alice), 400, INPUT)
    refused(sdk.update_message_partial(message_id, {"unset": ["text"]}, group.alice), 400, INPUT)
    refused(sdk.update_message_partial(message_id, {"set": {"user_id": group.bob}}, group.alice), 400, INPUT)
    # A user token acting for someone else; another member's message; a non-member.
    refused(sdk.as_user(group.bob).update_message({"id": message_id, "text": "x", "user": {"id": group.alice}}), 403,
            NOT_ALLOWED)
    refused(sdk.as_user(group.bob).update_message_partial(message_id, {"set": {"text": "x"}}, group.alice), 403,
            NOT_ALLOWED)
    refused(sdk.as_user(group.bob).update_message({"id": message_id, "text": "x"}), 403, NOT_ALLOWED)
    refused(sdk.as_user(group.dave).update_message_partial(message_id, {"set": {"text": "x"}}, group.dave), 403,
            NOT_ALLOWED)
    assert ok(sdk.get_message(message_id))["message"]["text"] == "hi"


@pytest.mark.parametrize("hard", [False, True])
def test_delete_message_answers_it_deleted_and_sends_message_deleted(api, sdk, group, sockets, unique, hard):
    message_id = f"{unique}-m1"
    ok(sdk.send_message(group.cid, {"id": message_id, "text": "oops", "extra": 1}, group.alice), 201)
    bob_socket = sockets(group.bob)
    deleted = ok(sdk.as_user(group.alice).delete_message(message_id, hard=hard))["message"]  # ?hard=False / True
    assert (deleted["id"], deleted["type"]) == (message_id, "deleted") and deleted["deleted_at"]
    event = bob_socket.wait_for(lambda e: e["type"] == "message.deleted")
    assert (event["cid"], event["message"]["id"], event["hard_delete"]) == (group.cid, message_id, hard)
    assert event["message"]["type"] == "deleted" and event["user"]["id"] == group.alice
    listed = ok(sdk.query(group.cid, user={"id": group.bob}))["messages"]
    if hard:
        assert deleted["text"] == "" and "extra" not in deleted
        refused(sdk.get_message(message_id), 404, NOT_FOUND)
        refused(sdk.receipts(message_id), 404, NOT_FOUND)
        assert listed == []
        refused(sdk.delete_message(message_id), 404, NOT_FOUND)
    else:
        assert [(m["id"], m["type"]) for m in listed] == [(message_id, "deleted")]
        assert ok(sdk.get_message(message_id))["message"]["type"] == "deleted"
        ok(sdk.receipts(message_id))


def test_delete_message_refuses_bad_input_others_and_unknown_ids(sdk, group, unique):
    message_id = f"{unique}-m1"
    ok(sdk.send_message(group.cid, {"id": message_id, "text": "keep"}, group.bob), 201)
    refused(sdk.delete_message(f"{unique}-nope"), 404, NOT_FOUND)
    refused(sdk.delete_message(message_id, hard="perhaps"), 400, INPUT)
    refused(sdk.delete_message(message_id, delete_for_me=True), 400, INPUT)
    refused(sdk.as_user(group.carol).delete_message(message_id), 403, NOT_ALLOWED)
    refused(sdk.as_user(group.dave).delete_message(message_id), 403, NOT_ALLOWED)
    refused(sdk.as_user(group.carol).delete_message(message_id, deleted_by=group.bob), 403, NOT_ALLOWED)
    assert ok(sdk.get_message(message_id))["message"]["type"] == "regular"
    # The channel's creator may delete a member's message.
    assert ok(sdk.as_user(group.alice).delete_message(message_id))["message"]["type"] == "deleted"


def test_deleting_a_deleted_message_again_keeps_its_deleted_at(sdk, group, unique):
    message_id = f"{unique}-m1"
    ok(sdk.send_message(group.cid, {"id": message_id, "text": "twice"}, group.alice), 201)
    first = ok(sdk.delete_message(message_id))["message"]["deleted_at"]
    second = ok(sdk.delete_message(message_id))["message"]["deleted_at"]
    assert second == first
    assert ok(sdk.get_message(message_id))["message"]["deleted_at"] == first
    assert ok(sdk.get_messages(group.cid, [message_id]))["messages"][0]["deleted_at"] == first


def test_get_many_messages_returns_those_still_there_oldest_first(api, sdk, group, unique):
    first, second, third, gone = (f"{unique}-{name}" for name in ("m1", "m2", "m3", "m4"))
    send(api, group.cid, group.alice, first, second, third, gone)
    ok(sdk.delete_message(second))
    ok(sdk.delete_message(gone, hard=True))
    messages = ok(sdk.as_user(group.bob).get_messages(group.cid, [third, gone, f"{unique}-nope", second, first]))
    messages = messages["messages"]
    assert [(m["id"], m["type"]) for m in messages] == [(first, "regular"), (second, "deleted"), (third, "regular")]
    assert messages[0]["text"] == f"text of {first}" and messages[0]["user"]["id"] == group.alice
    assert messages[0]["cid"] == group.cid


def test_get_many_messages_refuses_bad_input_unknown_channels_and_outsiders(api, sdk, group, unique):
    send(api, group.cid, group.alice, f"{unique}-m1")
    refused(sdk.send("GET", f"{channel_url(group.cid)}/messages"), 400, INPUT)
    refused(sdk.get_messages(group.cid, ["bad id"]), 400, INPUT)
    refused(sdk.get_messages(group.cid, [f"{unique}-{n}" for n in range(101)]), 400, INPUT)
    refused(sdk.get_messages(f"messaging:{unique}-nowhere", [f"{unique}-m1"]), 404, NOT_FOUND)
    refused(sdk.as_user(group.dave).get_messages(group.cid, [f"{unique}-m1"]), 403, NOT_ALLOWED)


# What deletes and edits do to receipts


@pytest.mark.parametrize("hard", [False, True])
def test_a_deleted_message_is_no_longer_unread(api, sdk, group, unique, hard):
    elsewhere = f"messaging:{unique}-elsewhere"
    api.create_channel(elsewhere, [group.alice, group.bob], created_by=group.alice)
    m1, m2, m3, e1 = (f"{unique}-{name}" for name in ("m1", "m2", "m3", "e1"))
    send(api, group.cid, group.alice, m1, m2, m3)
    send(api, elsewhere, group.alice, e1)
    assert unread(api, group.bob) == (4, {group.cid: 3, elsewhere: 1})
    assert read_state(api, group.cid, group.bob)["first_unread_message_id"] == m1

    ok(sdk.delete_message(m1, hard=hard))
    bob = read_state(api, group.cid, group.bob)
    assert (bob["unread_messages"], bob["first_unread_message_id"]) == (2, m2)
    assert read_state(api, group.cid, group.carol)["unread_messages"] == 2
    assert read_state(api, group.cid, group.alice)["unread_messages"] == 0
    assert unread(api, group.bob) == (3, {group.cid: 2, elsewhere: 1})

    # The only unread message of a channel: the channel leaves the unread channels.
    ok(sdk.delete_message(e1, hard=hard))
    assert unread(api, group.bob) == (2, {group.cid: 2})
    me = hello(api, group.bob)
    assert (me["total_unread_count"], me["unread_channels"]) == (2, 1)
    batch = ok(sdk.unread_counts_batch([group.bob]), 201)["counts_by_user"][group.bob]
    assert batch["total_unread_count"] == 2

    # Deleting it again changes nothing; reading to the end and marking unread never counts it.
    if not hard:
        ok(sdk.delete_message(m1))
    ok(sdk.mark_read(group.cid, group.bob))
    api.call("POST", f"{group.path}/unread", {"user": {"id": group.bob}, "message_id": m2})
    bob = read_state(api, group.cid, group.bob)
    assert (bob["unread_messages"], bob["first_unread_message_id"]) == (2, m2)
    assert unread(api, group.bob) == (2, {group.cid: 2})


def test_deleting_a_message_already_read_changes_no_count(api, sdk, group, unique):
    m1, m2 = f"{unique}-m1", f"{unique}-m2"
    send(api, group.cid, group.alice, m1, m2)
    ok(sdk.mark_read(group.cid, group.bob, message_id=m1))
    ok(sdk.mark_read(group.cid, group.carol))
    ok(sdk.delete_message(m1))
    assert read_state(api, group.cid, group.bob)["unread_messages"] == 1
    assert read_state(api, group.cid, group.carol)["unread_messages"] == 0
    assert unread(api, group.bob) == (1, {group.cid: 1})
    assert unread(api, group.carol) == (0, {})
    # Nor does deleting one's own message change one's own count.
    send(api, group.cid, group.bob, f"{unique}-b1")
    ok(sdk.delete_message(f"{unique}-b1"))
    assert unread(api, group.bob) == (0, {})
    assert read_state(api, group.cid, group.carol)["unread_messages"] == 0


def test_an_edit_keeps_receipts(api, sdk, group, unique):
    m1, m2 = f"{unique}-m1", f"{unique}-m2"
    send(api, group.cid, group.alice, m1, m2)
    api.mark_delivered(group.carol, (group.cid, m2))
    ok(sdk.mark_read(group.cid, group.bob, message_id=m1))
    before = {message_id: ok(sdk.receipts(message_id)) for message_id in (m1, m2)}
    assert (before[m1]["read_count"], before[m1]["delivered_count"]) == (1, 2)
    reads_before = {user: read_state(api, group.cid, user) for user in (group.bob, group.carol)}
    unread_before = {user: unread(api, user) for user in (group.bob, group.carol)}

    ok(sdk.update_message({"id": m1, "text": "edited", "user": {"id": group.alice}}), 201)
    ok(sdk.update_message_partial(m2, {"set": {"text": "edited too", "flag": True}}, group.alice), 201)
    for message_id in (m1, m2):
        after = ok(sdk.receipts(message_id))
        assert {k: v for k, v in after.items() if k != "duration"} == \
            {k: v for k, v in before[message_id].items() if k != "duration"}
    for user in (group.bob, group.carol):
        read = read_state(api, group.cid, user)
        for field in ("unread_messages", "first_unread_message_id", "last_read_message_id", "last_read",
                      "last_delivered_message_id", "last_delivered_at"):
            assert read.get(field) == reads_before[user].get(field), (user, field)
        assert unread(api, user) == unread_before[user]


@pytest.mark.parametrize("hard", [False, True])
def test_a_deleted_channel_leaves_no_unread_for_its_former_members(api, sdk, group, unique, hard):
    elsewhere = f"messaging:{unique}-elsewhere"
    api.create_channel(elsewhere, [group.alice, group.bob], created_by=group.alice)
    send(api, group.cid, group.alice, f"{unique}-m1", f"{unique}-m2")
    send(api, elsewhere, group.alice, f"{unique}-e1")
    assert unread(api, group.bob) == (3, {group.cid: 2, elsewhere: 1})
    assert unread(api, group.carol) == (2, {group.cid: 2})

    ok(sdk.delete(group.cid, hard=hard))
    assert unread(api, group.bob) == (1, {elsewhere: 1})
    assert unread(api, group.carol) == (0, {})
    me = hello(api, group.carol)
    assert (me["total_unread_count"], me["unread_channels"]) == (0, 0)
    me = hello(api, group.bob)
    assert (me["total_unread_count"], me["unread_channels"]) == (1, 1)
    batch = ok(sdk.unread_counts_batch([group.bob, group.carol]), 201)["counts_by_user"]
    assert (batch[group.bob]["total_unread_count"], batch[group.carol]["total_unread_count"]) == (1, 0)
    assert batch[group.carol]["channels"] == []
    refused(sdk.receipts(f"{unique}-m1"), 404, NOT_FOUND)

    # The same cid made again has nothing unread in it.
    api.create_channel(group.cid, [group.alice, group.bob, group.carol], created_by=group.alice)
    assert read_state(api, group.cid, group.carol)["unread_messages"] == 0
    assert unread(api, group.carol) == (0, {})
    send(api, group.cid, group.alice, f"{unique}-m3")
    assert unread(api, group.carol) == (1, {group.cid: 1})


def test_bulk_deleted_channels_leave_no_unread(api, sdk, group, unique):
    other = f"messaging:{unique}-other"
    api.create_channel(other, [group.alice, group.bob], created_by=group.alice)
    send(api, group.cid, group.alice, f"{unique}-m1")
    send(api, other, group.alice, f"{unique}-o1", f"{unique}-o2")
    assert unread(api, group.bob) == (3, {group.cid: 1, other: 2})
    ok(sdk.delete_channels([group.cid, other]), 201)
    assert unread(api, group.bob) == (0, {})
    me = hello(api, group.bob)
    assert (me["total_unread_count"], me["unread_channels"]) == (0, 0)


# Unread counts


def test_unread_counts_for_a_user_and_in_batch(api, sdk, group, unique):
    send(api, group.cid, group.alice, f"{unique}-m1", f"{unique}-m2")
    counts = ok(sdk.unread_counts(group.bob))
    assert counts["total_unread_count"] == 2
    assert [(c["channel_id"], c["unread_count"]) for c in counts["channels"]] == [(group.cid, 2)]
    assert counts["channels"][0]["last_read"]
    assert counts["channel_type"] == [{"channel_type": "messaging", "channel_count": 1, "unread_count": 2}]
    for field in ("total_unread_threads_count", "threads", "total_unread_count_by_team"):
        assert field in counts, field
    # A user token reads its own.
    mine = ok(sdk.as_user(group.bob).unread_counts())
    assert mine["total_unread_count"] == 2
    assert ok(sdk.as_user(group.bob).unread_counts(group.bob))["total_unread_count"] == 2
    assert ok(sdk.unread_counts(group.alice))["total_unread_count"] == 0
    assert ok(sdk.unread_counts(group.alice))["channels"] == []

    batch = ok(sdk.unread_counts_batch([group.bob, group.alice, f"{unique}-nobody"]), 201)["counts_by_user"]
    assert set(batch) == {group.bob, group.alice}
    assert batch[group.bob]["total_unread_count"] == 2 and batch[group.alice]["total_unread_count"] == 0
    assert [(c["channel_id"], c["unread_count"]) for c in batch[group.bob]["channels"]] == [(group.cid, 2)]


def test_unread_counts_refuse_other_users_bad_input_and_unknown_users(sdk, group, unique):
    refused(sdk.as_user(group.bob).unread_counts(group.alice), 403, NOT_ALLOWED)
    refused(sdk.as_user(group.bob).unread_counts_batch([group.bob]), 403, NOT_ALLOWED)
    refused(sdk.unread_counts(), 400, INPUT)
    refused(sdk.unread_counts("bad id"), 400, INPUT)
    refused(sdk.unread_counts(f"{unique}-nobody"), 404, NOT_FOUND)
    refused(sdk.unread_counts_batch([]), 400, INPUT)
    refused(sdk.unread_counts_batch(["bad id"]), 400, INPUT)
    refused(sdk.send("POST", "/unread_batch", {"user_ids": group.bob}), 400, INPUT)
    refused(sdk.send("POST", "/unread_batch", {}), 400, INPUT)


# Races: a count kept with every change must stay exact when changes meet.


def _trial_channels(api, unique, name, count, alice, bob):
    cids = [f"messaging:{unique}-{name}{n}" for n in range(count)]
    for cid in cids:
        api.create_channel(cid, [alice, bob], created_by=alice)
    return cids


def test_deletes_racing_with_marks_read_leave_exact_unread_counts(server, api, unique):
    """bob reads the first half of each channel (and then keeps marking it
    read) while alice's messages in the second half are deleted: afterwards
    exactly the second half's survivors are unread, in each channel and in
    bob's totals, whichever of each delete and mark came first."""
    alice, bob = f"{unique}-alice", f"{unique}-bob"
    api.upsert_users(alice, bob)
    channels, length, deleted = 12, 40, 18
    cids = _trial_channels(api, unique, "del", channels, alice, bob)
    ids = {cid: [f"{unique}-{n}-m{i}" for i in range(length)] for n, cid in enumerate(cids)}
    doomed = {cid: random.Random(cid).sample(ids[cid][length // 2:], deleted) for cid in cids}

    def race(cid):
        send(Ticks(server.base_url, server.api_key, server.api_secret), cid, alice, *ids[cid])
        deleting = threading.Event()
        deleting.set()

        def deleter():
            own = Ticks(server.base_url, server.api_key, server.api_secret)
            try:
                for message_id in doomed[cid]:
                    own.call("DELETE", f"/messages/{message_id}")
            finally:
                deleting.clear()

        def reader():
            own = Ticks(server.base_url, server.api_key, server.api_secret)
            for message_id in ids[cid][:length // 2]:
                own.mark_read(cid, bob, message_id=message_id)
            while deleting.is_set():
                own.mark_read(cid, bob, message_id=ids[cid][length // 2 - 1])

        threads = [threading.Thread(target=deleter), threading.Thread(target=reader)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(race, cids))

    expected = length // 2 - deleted
    kept = {cid: read_state(api, cid, bob)["unread_messages"] for cid in cids}
    assert kept == {cid: expected for cid in cids}, "a deleted message is still counted in the channel"
    total, by_channel = unread(api, bob)
    assert by_channel == {cid: expected for cid in cids}
    assert total == expected * channels, "a deleted message is still counted in the user's total"


def test_unread_total_matches_the_channels_after_concurrent_sends_and_reads(server, api, unique):
    """alice sends while bob keeps marking read: GET /unread's total must be
    the sum of its channels, and each channel's count the messages after
    bob's read cursor."""
    alice, bob = f"{unique}-alice", f"{unique}-bob"
    api.upsert_users(alice, bob)
    channels, length = 8, 30
    cids = _trial_channels(api, unique, "send", channels, alice, bob)

    def race(cid):
        def sender():
            own = Ticks(server.base_url, server.api_key, server.api_secret)
            for i in range(length):
                own.send_message(cid, alice, "x", message_id=f"{cid.split(':')[1]}-m{i}")

        def reader():
            own = Ticks(server.base_url, server.api_key, server.api_secret)
            for _ in range(length):
                own.mark_read(cid, bob)

        threads = [threading.Thread(target=sender), threading.Thread(target=reader)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(race, cids))

    truth = {}
    for cid in cids:
        state = api.query_channel(cid, user=bob, messages_limit=300)
        read = next(r for r in state["read"] if r["user"]["id"] == bob)
        ids = [m["id"] for m in state["messages"]]
        position = ids.index(read["last_read_message_id"]) if read.get("last_read_message_id") else -1
        truth[cid] = (read["unread_messages"], len(ids) - position - 1)
    assert {cid: kept for cid, (kept, _) in truth.items()} == {cid: real for cid, (_, real) in truth.items()}
    total, by_channel = unread(api, bob)
    assert total == sum(by_channel.values()), "total_unread_count is not the sum of the channels' counts"
    assert hello(api, bob)["total_unread_count"] == total
