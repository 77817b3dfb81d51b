"""Stream's own Python SDK (`stream-chat`) driving the real `ticks` binary.

This is how teams will first try Ticks: the calls below are the SDK's public
methods, unchanged, pointed at Ticks with `base_url`.
"""

from datetime import datetime

import pytest
from stream_chat.base.exceptions import StreamAPIException


def parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def reads_by_user(state) -> dict:
    return {read["user"]["id"]: read for read in state["read"]}


def receipts(client, message_id) -> dict:
    return client.get(f"messages/{message_id}/receipts")


def make_group(client, unique, members=("alice", "bob", "carol"), channel_type="messaging"):
    users = [{"id": f"{unique}-{name}", "name": name.title()} for name in members]
    client.upsert_users(users)
    ids = [user["id"] for user in users]
    channel = client.channel(channel_type, f"{unique}-group", data={"members": ids})
    channel.create(ids[0])
    return channel, ids


def test_sent_delivered_read_with_exact_times(client, unique):
    channel, (alice, bob, carol) = make_group(client, unique)
    sent = channel.send_message({"id": f"{unique}-m1", "text": "Tickets booked"}, alice)
    assert sent["message"]["id"] == f"{unique}-m1"
    assert sent["message"]["user"]["id"] == alice
    assert sent["message"]["cid"] == channel.cid

    # ✓ sent: stored, nobody else has it.
    nothing = receipts(client, f"{unique}-m1")
    assert nothing["receipts"] == []
    assert (nothing["read_count"], nothing["delivered_count"]) == (0, 0)

    # ✓✓ delivered to bob.
    client.mark_delivered_simple(bob, f"{unique}-m1", channel.cid)
    delivered = receipts(client, f"{unique}-m1")
    assert [r["user"]["id"] for r in delivered["receipts"]] == [bob]
    assert delivered["receipts"][0]["delivered_at"]
    assert "read_at" not in delivered["receipts"][0] or delivered["receipts"][0]["read_at"] is None
    assert (delivered["read_count"], delivered["delivered_count"]) == (0, 1)

    # blue ✓✓: bob reads it, then carol; each with their own time, newest first.
    channel.mark_read(bob, message_id=f"{unique}-m1")
    channel.mark_read(carol)
    read = receipts(client, f"{unique}-m1")
    assert [r["user"]["id"] for r in read["receipts"]] == [carol, bob]
    assert (read["read_count"], read["delivered_count"]) == (2, 2)
    by_user = {r["user"]["id"]: r for r in read["receipts"]}
    assert parse_time(by_user[bob]["delivered_at"]) < parse_time(by_user[bob]["read_at"])
    assert parse_time(by_user[bob]["read_at"]) < parse_time(by_user[carol]["read_at"])
    # R1: carol's read also delivered it to her, at the same moment.
    assert by_user[carol]["delivered_at"] == by_user[carol]["read_at"]

    # The channel's read states say the same.
    state = channel.query(user_id=alice)
    reads = reads_by_user(state)
    assert reads[bob]["last_read_message_id"] == f"{unique}-m1"
    assert reads[bob]["unread_messages"] == 0
    assert reads[bob]["last_delivered_message_id"] == f"{unique}-m1"
    assert reads[alice]["unread_messages"] == 0  # R4: own messages are never unread


def test_mark_read_up_to_a_message_and_mark_unread(client, unique):
    channel, (alice, bob, _) = make_group(client, unique)
    for n in range(1, 5):
        channel.send_message({"id": f"{unique}-m{n}", "text": f"message {n}"}, alice)

    # R3: up to and including m2.
    event = channel.mark_read(bob, message_id=f"{unique}-m2")["event"]
    assert event["type"] == "message.read"
    assert event["user"]["id"] == bob
    assert event["last_read_message_id"] == f"{unique}-m2"
    bob_read = reads_by_user(channel.query(user_id=bob))[bob]
    assert bob_read["unread_messages"] == 2
    assert bob_read["first_unread_message_id"] == f"{unique}-m3"

    # R2: an older target changes nothing.
    channel.mark_read(bob, message_id=f"{unique}-m1")
    assert reads_by_user(channel.query(user_id=bob))[bob]["last_read_message_id"] == f"{unique}-m2"

    # Mark unread from m2: the cursor moves to m1.
    channel.mark_unread(bob, message_id=f"{unique}-m2")
    bob_read = reads_by_user(channel.query(user_id=bob))[bob]
    assert bob_read["last_read_message_id"] == f"{unique}-m1"
    assert bob_read["unread_messages"] == 3
    assert bob_read["first_unread_message_id"] == f"{unique}-m2"
    assert receipts(client, f"{unique}-m2")["read_count"] == 0
    assert receipts(client, f"{unique}-m1")["read_count"] == 1


def test_add_and_remove_members(client, unique):
    channel, (alice, bob, carol) = make_group(client, unique, members=("alice", "bob", "carol"))
    dave = f"{unique}-dave"
    client.upsert_user({"id": dave})
    channel.send_message({"id": f"{unique}-m1", "text": "before dave"}, alice)

    # R5: dave joins having read and received what is already there.
    added = channel.add_members([dave])
    assert dave in [m["user"]["id"] for m in added["members"]]
    dave_read = reads_by_user(channel.query(user_id=dave))[dave]
    assert dave_read["unread_messages"] == 0
    assert dave_read["last_read_message_id"] == f"{unique}-m1"

    # R6: a message read only by bob goes back to sent when bob leaves.
    channel.send_message({"id": f"{unique}-m2", "text": "after dave"}, alice)
    channel.mark_read(bob)
    assert [r["user"]["id"] for r in receipts(client, f"{unique}-m2")["receipts"]] == [bob]
    channel.remove_members([bob])
    after = receipts(client, f"{unique}-m2")
    assert after["receipts"] == []
    assert after["read_count"] == 0
    members = [m["user"]["id"] for m in channel.query(user_id=alice)["members"]]
    assert sorted(members) == sorted([alice, carol, dave])


def test_retried_send_is_not_duplicated(client, unique):
    channel, (alice, _, _) = make_group(client, unique)
    first = channel.send_message({"id": f"{unique}-m1", "text": "once"}, alice)
    again = channel.send_message({"id": f"{unique}-m1", "text": "once"}, alice)
    assert again["message"]["created_at"] == first["message"]["created_at"]
    messages = channel.query(user_id=alice, messages={"limit": 10})["messages"]
    assert [m["id"] for m in messages] == [f"{unique}-m1"]


def test_channel_type_without_delivery_events(client, unique):
    type_name = f"{unique}quiet"
    created = client.create_channel_type({"name": type_name})
    # A type made through the API: read events on, delivery events off (as Stream).
    assert created["read_events"] is True
    assert created["delivery_events"] is False
    assert client.get_channel_type(type_name)["name"] == type_name

    channel, (alice, bob, _) = make_group(client, unique, channel_type=type_name)
    channel.send_message({"id": f"{unique}-m1", "text": "hi"}, alice)
    # R9: accepted and ignored.
    client.mark_delivered_simple(bob, f"{unique}-m1", channel.cid)
    assert receipts(client, f"{unique}-m1")["delivered_count"] == 0

    # R8: with read events off nobody else sees bob's read.
    client.update_channel_type(type_name, read_events=False)
    channel.mark_read(bob)
    assert receipts(client, f"{unique}-m1")["receipts"] == []
    assert bob not in reads_by_user(channel.query(user_id=alice))
    # ...but bob keeps his own read state.
    assert reads_by_user(channel.query(user_id=bob))[bob]["unread_messages"] == 0


def test_private_read_receipts(client, unique):
    channel, (alice, bob, _) = make_group(client, unique)
    client.upsert_user({"id": bob, "privacy_settings": {"read_receipts": {"enabled": False}}})
    channel.send_message({"id": f"{unique}-m1", "text": "hi"}, alice)
    channel.mark_read(bob)
    # R10: alice does not see bob's read; bob's own counts are kept.
    assert receipts(client, f"{unique}-m1")["read_count"] == 0
    assert reads_by_user(channel.query(user_id=alice)).get(bob, {}).get("last_read_message_id") is None
    assert reads_by_user(channel.query(user_id=bob))[bob]["unread_messages"] == 0


def test_query_channels_and_users(client, unique):
    channel, (alice, bob, _) = make_group(client, unique)
    channel.send_message({"id": f"{unique}-m1", "text": "hi"}, alice)
    found = client.query_channels({"members": {"$in": [bob]}, "cid": channel.cid}, user_id=bob)
    assert [c["channel"]["cid"] for c in found["channels"]] == [channel.cid]
    assert reads_by_user(found["channels"][0])[bob]["unread_messages"] == 1
    users = client.query_users({"id": {"$in": [alice, bob]}})["users"]
    assert sorted(u["id"] for u in users) == sorted([alice, bob])
    message = client.get_message(f"{unique}-m1")["message"]
    assert message["text"] == "hi"
    assert message["channel"]["cid"] == channel.cid


def test_errors_come_back_in_streams_format(client, unique):
    channel, (alice, _, _) = make_group(client, unique)
    with pytest.raises(StreamAPIException) as missing:
        client.get_message(f"{unique}-nope")
    assert missing.value.status_code == 404
    assert missing.value.error_code == 16

    # A server token may send for a non-member (docs/api.md), but not for a user who does not exist.
    with pytest.raises(StreamAPIException) as unknown_user:
        channel.send_message({"text": "let me in"}, f"{unique}-nobody")
    assert unknown_user.value.status_code == 400
    assert unknown_user.value.error_code == 4

    with pytest.raises(StreamAPIException) as unknown_message:
        channel.mark_read(alice, message_id=f"{unique}-nope")
    assert unknown_message.value.status_code == 400
    assert unknown_message.value.error_code == 4

    # The server keeps serving.
    assert channel.send_message({"text": "still here"}, alice)["message"]["text"] == "still here"
