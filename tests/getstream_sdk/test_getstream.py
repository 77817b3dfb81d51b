"""`getstream` 7 (Stream's API v2) driving Ticks: the SDK's public methods,
unchanged, pointed at Ticks with `base_url`."""

from datetime import datetime, timedelta, timezone

import pytest
from getstream.exceptions import StreamApiException
from getstream.models import (
    ChannelInput,
    ChannelMemberRequest,
    MessageRequest,
    QueryMembersPayload,
    QueryUsersPayload,
    SortParamRequest,
    UpdateUserPartialRequest,
    UserRequest,
)


def cid(channel):
    return f"{channel.channel_type}:{channel.channel_id}"


def people(client, unique, *names):
    ids = [f"{unique}-{name}" for name in names]
    client.update_users(users={user: UserRequest(id=user, name=user.split("-")[1].title()) for user in ids})
    return ids


def conversation(client, unique, *names):
    ids = people(client, unique, *names)
    channel = client.chat.channel("messaging", f"{unique}-chat")
    channel.get_or_create(data=ChannelInput(
        created_by_id=ids[0], members=[ChannelMemberRequest(user_id=user) for user in ids], custom={"topic": "trip"}))
    return channel, ids


def test_users_upsert_query_and_partial_update(client, unique):
    alice, bob = f"{unique}-alice", f"{unique}-bob"
    upserted = client.update_users(users={
        alice: UserRequest(id=alice, name="Alice", custom={"team": "blue"}), bob: UserRequest(id=bob)})
    assert upserted.data.users[alice].custom == {"team": "blue"}
    assert abs(upserted.data.users[alice].created_at - datetime.now(timezone.utc)) < timedelta(minutes=10)
    client.update_users_partial(users=[UpdateUserPartialRequest(id=alice, set={"nickname": "Al"}, unset=["team"])])
    found = client.query_users(QueryUsersPayload(filter_conditions={"id": {"$in": [alice, bob]}}))
    assert [user.id for user in found.data.users] == [alice, bob]
    assert found.data.users[0].custom == {"nickname": "Al"} and found.data.users[0].name == "Alice"


def test_a_channel_created_queried_and_its_messages(client, unique):
    channel, (alice, bob) = conversation(client, unique, "alice", "bob")
    state = channel.get_or_create()
    assert state.data.channel.custom == {"topic": "trip"}
    assert sorted(member.user_id for member in state.data.members) == [alice, bob]
    sent = channel.send_message(message=MessageRequest(id=f"{unique}-m1", text="Tickets booked", user_id=alice,
                                                        custom={"mood": "happy"}))
    assert sent.data.message.custom == {"mood": "happy"} and sent.data.message.user.id == alice
    got = client.chat.get_message(id=f"{unique}-m1")
    assert got.data.message.text == "Tickets booked" and got.data.message.channel.cid == cid(channel)
    listed = client.chat.query_channels(filter_conditions={"members": {"$in": [bob]}}, user_id=bob,
                                        sort=[SortParamRequest(field="last_message_at", direction=-1)])
    assert [found.channel.cid for found in listed.data.channels] == [cid(channel)]
    assert listed.data.channels[0].messages[-1].id == f"{unique}-m1"


def test_receipts_and_unread_counts(client, unique):
    channel, (alice, bob) = conversation(client, unique, "alice", "bob")
    for n in (1, 2):
        channel.send_message(message=MessageRequest(id=f"{unique}-m{n}", text=f"m{n}", user_id=alice))
    assert client.chat.unread_counts(user_id=bob).data.total_unread_count == 2
    client.chat.mark_delivered(user_id=bob, latest_delivered_messages=[{"cid": cid(channel), "id": f"{unique}-m2"}])
    read = channel.mark_read(user_id=bob, message_id=f"{unique}-m1")
    assert read.data.event.last_read_message_id == f"{unique}-m1" and read.data.event.user.id == bob
    counts = client.chat.unread_counts(user_id=bob).data
    assert counts.total_unread_count == 1 and counts.channels[0].channel_id == cid(channel)
    state = channel.get_or_create().data
    reads = {read.user.id: read for read in state.read}
    assert reads[bob].last_read_message_id == f"{unique}-m1" and reads[bob].last_delivered_message_id == f"{unique}-m2"
    channel.mark_unread(user_id=bob, message_id=f"{unique}-m1")
    batch = client.chat.unread_counts_batch(user_ids=[alice, bob]).data.counts_by_user
    assert (batch[alice].total_unread_count, batch[bob].total_unread_count) == (0, 2)
    client.chat.mark_channels_read(user_id=bob)
    assert client.chat.unread_counts(user_id=bob).data.total_unread_count == 0


def test_app_settings_and_rate_limits(client):
    app = client.get_app()
    assert "messaging" in app.data.app.channel_configs
    assert app.data.app.channel_configs["messaging"].read_events is True
    limits = client.get_rate_limits(server_side=True)
    assert "MarkRead" in limits.data.server_side


def test_errors_read_as_stream_errors(client, unique):
    with pytest.raises(StreamApiException) as refused:
        client.chat.get_message(id=f"{unique}-nowhere")
    assert (refused.value.status_code, refused.value.code, refused.value.details) == (404, 16, [])


def test_channel_lifecycle_members_and_channel_types(client, unique):
    channel, (alice, bob) = conversation(client, unique, "alice", "bob")
    (carol,) = people(client, unique, "carol")
    updated = channel.update(add_members=[ChannelMemberRequest(user_id=carol)])
    assert sorted(member.user_id for member in updated.data.members) == sorted([alice, bob, carol])
    assert channel.update_channel_partial(set={"color": "red"}).data.channel.custom == {"topic": "trip", "color": "red"}
    members = client.chat.query_members(QueryMembersPayload(type="messaging", id=f"{unique}-chat", filter_conditions={}))
    assert len(members.data.members) == 3
    assert channel.update_member_partial(user_id=bob, set={"nick": "B"}).data.channel_member.custom == {"nick": "B"}

    for message_id in (f"{unique}-m1", f"{unique}@m2"):
        channel.send_message(message=MessageRequest(id=message_id, text="hi", user_id=alice))
    many = channel.get_many_messages(ids=[f"{unique}-m1", f"{unique}@m2"])
    assert [message.id for message in many.data.messages] == [f"{unique}-m1", f"{unique}@m2"]
    edited = client.chat.update_message(id=f"{unique}-m1", message=MessageRequest(text="edited", user_id=alice))
    assert edited.data.message.text == "edited"
    assert client.chat.update_message_partial(id=f"{unique}-m1", set={"k": 2}, user_id=alice).data.message.custom == {"k": 2}
    channel.send_message(message=MessageRequest(id=f"{unique}-r1", text="re", user_id=bob, parent_id=f"{unique}-m1"))
    assert [reply.id for reply in client.chat.get_replies(parent_id=f"{unique}-m1").data.messages] == [f"{unique}-r1"]
    assert client.chat.delete_message(id=f"{unique}@m2").data.message.deleted_at is not None
    assert channel.truncate().data.channel.truncated_at is not None
    assert channel.delete().data.channel.deleted_at is not None
    other = client.chat.channel("messaging", f"{unique}-other")
    other.get_or_create(data=ChannelInput(created_by_id=alice))
    task = client.chat.delete_channels(cids=[cid(other)])
    assert client.get_task(id=task.data.task_id).data.status == "completed"

    name = f"t{unique}"
    created = client.chat.create_channel_type(name=name, automod="disabled", automod_behavior="flag", max_message_length=1000)
    assert created.data.commands == ["giphy", "ban", "unban", "mute", "unmute"]
    assert [command.name for command in client.chat.get_channel_type(name=name).data.commands] == created.data.commands
    changed = client.chat.update_channel_type(name=name, automod="disabled", automod_behavior="flag", max_message_length=2000)
    assert changed.data.max_message_length == 2000
    assert name in client.chat.list_channel_types().data.channel_types


def test_mark_unread_by_thread_and_by_timestamp(client, unique):
    channel, (alice, bob) = conversation(client, unique, "alice", "bob")
    for n in (1, 2, 3):
        channel.send_message(message=MessageRequest(id=f"{unique}-m{n}", text=f"m{n}", user_id=alice))
    channel.send_message(message=MessageRequest(id=f"{unique}-r1", text="re", user_id=alice, parent_id=f"{unique}-m1"))
    channel.mark_read(user_id=bob)
    channel.mark_read(user_id=bob, thread_id=f"{unique}-m1")
    assert client.chat.unread_counts(user_id=bob).data.total_unread_count == 0
    m2 = client.chat.get_message(id=f"{unique}-m2").data.message.created_at
    channel.mark_unread(user_id=bob, message_timestamp=m2)
    counts = client.chat.unread_counts(user_id=bob).data
    assert (counts.total_unread_count, counts.total_unread_threads_count) == (2, 0)
    channel.mark_unread(user_id=bob, thread_id=f"{unique}-m1")
    counts = client.chat.unread_counts(user_id=bob).data
    assert (counts.total_unread_count, counts.total_unread_threads_count) == (2, 1)
    assert [thread.parent_message_id for thread in counts.threads] == [f"{unique}-m1"]


def test_delete_users_with_their_conversations(client, unique):
    channel, (alice, bob) = conversation(client, unique, "alice", "bob")
    channel.send_message(message=MessageRequest(id=f"{unique}-m1", text="bye", user_id=alice))
    task = client.delete_users(user_ids=[alice], user="hard", messages="hard", conversations="hard")
    done = client.get_task(id=task.data.task_id).data
    assert done.status == "completed" and done.result == {alice: {"status": "ok"}}
    found = client.query_users(QueryUsersPayload(filter_conditions={"id": {"$in": [alice, bob]}}))
    assert [user.id for user in found.data.users] == [bob]
    assert client.chat.query_channels(filter_conditions={"members": {"$in": [bob]}}, user_id=bob).data.channels == []
