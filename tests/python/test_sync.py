"""What a whole-app client needs from the server, against the real binary on
SQLite and (when TICKS_TEST_POSTGRES_URL is set) PostgreSQL: the channel
list's order (`sort`), the notices that tell a user's devices of channels
they join or leave, and POST /sync after time offline.
"""


import pytest
from conftest import served
from test_nodes import Socket
from wire import APIError, Ticks


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(request, tmp_path_factory):
    with served(request.param, "sync", tmp_path_factory) as process:
        yield process


@pytest.fixture
def api(server):
    return Ticks(server.base_url, server.api_key, server.api_secret)


def names(unique, *people):
    return [f"{unique}-{person}" for person in people]


def test_the_channel_list_order_and_pages(api, unique):
    alice, bob = names(unique, "alice", "bob")
    api.upsert_users(alice, bob)
    cids = [f"messaging:{unique}-{index}" for index in range(4)]
    for cid in cids:
        api.create_channel(cid, [alice, bob], created_by=alice)
    api.send_message(cids[1], bob, "newest", message_id=f"{unique}-m1")
    token = api.user_token(alice)

    def page(**body):
        return [c["channel"]["cid"] for c in api.call("POST", "/channels", body, token=token)["channels"]]

    assert page() == [cids[1], cids[3], cids[2], cids[0]]
    assert page(sort=[{"field": "created_at", "direction": 1}]) == cids
    assert page(sort=[{"field": "last_message_at", "direction": -1}], limit=2, offset=2) == [cids[2], cids[0]]
    with pytest.raises(APIError) as refused:
        page(sort=[{"field": "has_unread"}])
    assert refused.value.status == 400 and refused.value.body["code"] == 4


def test_a_user_hears_of_channels_they_join_and_leave_on_every_device(server, api, unique):
    alice, bob, carol = names(unique, "alice", "bob", "carol")
    api.upsert_users(alice, bob, carol)
    phone, laptop = Socket(server, api, carol), Socket(server, api, carol)
    watcher = Socket(server, api, alice)
    try:
        cid = f"messaging:{unique}-new"
        api.create_channel(cid, [alice, carol], created_by=alice, topic="launch")
        for socket in (phone, laptop, watcher):
            added = socket.wait_for(lambda e: e["type"] == "notification.added_to_channel" and e["cid"] == cid)
            assert added["channel"]["topic"] == "launch"
        api.update_members(cid, remove=[carol])
        removed = phone.wait_for(lambda e: e["type"] == "notification.removed_from_channel")
        assert removed["cid"] == cid and removed["member"]["user_id"] == carol
    finally:
        for socket in (phone, laptop, watcher):
            socket.close()


def test_sync_tells_what_was_missed_in_time_order(api, unique):
    alice, bob, carol = names(unique, "alice", "bob", "carol")
    api.upsert_users(alice, bob, carol)
    cid = f"messaging:{unique}-trip"
    api.create_channel(cid, [alice, bob, carol], created_by=alice)
    last = api.send_message(cid, alice, "before", message_id=f"{unique}-m0")["created_at"]

    api.send_message(cid, bob, "while away", message_id=f"{unique}-m1")
    api.mark_read(cid, carol)
    api.call("DELETE", f"/messages/{unique}-m0")
    token = api.user_token(alice)
    answer = api.call("POST", "/sync", {"channel_cids": [cid, f"messaging:{unique}-none"], "last_sync_at": last,
                                         "with_inaccessible_cids": True}, token=token)
    types = [e["type"] for e in answer["events"]]
    # In the order they happened; the unknown channel's notice has the time of the answer: last.
    # Two reads: bob's sending moved his cursor (R4), then carol read.
    assert sorted(types) == sorted(["message.new", "message.read", "message.read", "message.deleted",
                                    "channel.updated", "notification.removed_from_channel"]), types
    assert types.index("message.new") < types.index("message.read") < types.index("message.deleted"), types
    assert types[-1] == "notification.removed_from_channel"
    assert [e["created_at"] for e in answer["events"]] == sorted(e["created_at"] for e in answer["events"])
    by_type = {e["type"]: e for e in answer["events"] if e["cid"] == cid}
    assert by_type["message.new"]["message"]["text"] == "while away"
    assert by_type["message.new"]["unread_count"] == 1
    assert [e["user"]["id"] for e in answer["events"] if e["type"] == "message.read"] == [bob, carol]
    assert by_type["message.read"]["user"]["id"] == carol
    assert by_type["message.read"]["last_read_message_id"] == f"{unique}-m1"
    assert by_type["message.deleted"]["message"]["type"] == "deleted"
    times = [e["created_at"] for e in answer["events"] if e["cid"] == cid]
    assert times == sorted(times)
    assert answer["inaccessible_cids"] == [f"messaging:{unique}-none"]
    assert answer["reload_cids"] == [] and answer["remaining_cids"] == []

    # Bad requests are Stream-format 400s, and a user cannot sync for another.
    for body in ({"channel_cids": [cid]}, {"channel_cids": [], "last_sync_at": last},
                 {"channel_cids": [cid], "last_sync_at": "2020-01-01T00:00:00Z"}):
        with pytest.raises(APIError) as refused:
            api.call("POST", "/sync", body, token=token)
        assert refused.value.status == 400 and refused.value.body["code"] == 4
    with pytest.raises(APIError) as refused:
        api.call("POST", "/sync", {"channel_cids": [cid], "last_sync_at": last, "user_id": bob}, token=token)
    assert refused.value.status == 403
