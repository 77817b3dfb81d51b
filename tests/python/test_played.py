"""Played (R14) over the wire on SQLite and PostgreSQL: messages keep their
attachments, `POST /messages/{id}/played` keeps a member's first play of a
voice note or video, `message.played` goes to those who may see the player's
reads, receipts list `played_at` and `played_count`, and a channel type's
`played_events` turns it off.
"""

import secrets

import pytest
from conftest import TicksProcess, served, store_arguments
from test_nodes import Socket
from wire import APIError, Ticks

VOICE = [{"type": "voiceRecording", "asset_url": "https://example.com/a.m4a", "duration": 3.2}]


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(request, tmp_path_factory):
    with served(request.param, "played", tmp_path_factory) as process:
        yield process


@pytest.fixture
def api(server):
    return Ticks(server.base_url, server.api_key, server.api_secret)


def names(unique, *people):
    return [f"{unique}-{person}" for person in people]


def play(api, message_id, user, token=None):
    """The answer's status and body (as the user with a user token, else naming them)."""
    body = {} if token else {"user_id": user}
    response = api.raw("POST", f"/messages/{message_id}/played", body, token=token)
    return response.status_code, response.json()


def played(api, message_id, viewer=None):
    """{user id: played_at} and played_count, as `viewer` (the server token when None) sees them."""
    answer = api.receipts(message_id, token=api.user_token(viewer) if viewer else None)
    return {r["user"]["id"]: r["played_at"] for r in answer["receipts"] if r.get("played_at")}, answer["played_count"]


def test_attachments_are_kept_and_returned_on_every_read(api, unique):
    alice, bob = names(unique, "alice", "bob")
    api.upsert_users(alice, bob)
    cid = f"messaging:{unique}"
    api.create_channel(cid, [alice, bob], created_by=alice)
    mid = f"{unique}-v"
    sent = api.send_message(cid, alice, "", message_id=mid, attachments=VOICE, mood="calm")
    assert sent["attachments"] == VOICE and sent["mood"] == "calm"
    assert "attachments" not in {k for k in sent if k == "mood"}
    got = api.call("GET", f"/messages/{mid}")["message"]
    assert got["attachments"] == VOICE and got["mood"] == "calm"
    state = api.query_channel(cid, user=bob)
    assert [m["attachments"] for m in state["messages"]] == [VOICE]
    # An edit of the text keeps them.
    api.call("POST", f"/messages/{mid}", {"message": {"text": "listen", "user_id": alice}})
    assert api.call("GET", f"/messages/{mid}")["message"]["attachments"] == VOICE
    plain = api.send_message(cid, alice, "text only")
    assert plain["attachments"] == []


def test_bad_attachments_and_empty_messages_are_refused(api, unique):
    alice, bob = names(unique, "alice", "bob")
    api.upsert_users(alice, bob)
    cid = f"messaging:{unique}"
    api.create_channel(cid, [alice, bob], created_by=alice)
    for attachments in ([{"type": "audio"}] * 31, [{"type": "audio", "asset_url": "x" * 20000}], ["nope"], [{}]):
        with pytest.raises(APIError) as refused:
            api.send_message(cid, alice, "hi", attachments=attachments)
        assert refused.value.status == 400 and refused.value.body["code"] == 4
    with pytest.raises(APIError) as refused:
        api.send_message(cid, alice, "")
    assert refused.value.status == 400


def test_the_first_play_is_kept_told_once_and_counted(server, api, unique):
    alice, bob, carol = names(unique, "alice", "bob", "carol")
    api.upsert_users(alice, bob, carol)
    cid = f"messaging:{unique}"
    api.create_channel(cid, [alice, bob, carol], created_by=alice)
    mid = f"{unique}-v"
    api.send_message(cid, alice, "", message_id=mid, attachments=VOICE)
    author, other = Socket(server, api, alice), Socket(server, api, carol)
    try:
        assert played(api, mid) == ({}, 0)
        status, first = play(api, mid, bob, token=api.user_token(bob))
        assert status == 201 and first["message_id"] == mid and first["played_at"]
        event = author.wait_for(lambda e: e["type"] == "message.played")
        assert (event["cid"], event["message_id"], event["user"]["id"], event["played_at"]) == (
            cid, mid, bob, first["played_at"])
        assert event["created_at"]
        other.wait_for(lambda e: e["type"] == "message.played")
        status, again = play(api, mid, bob)
        assert status == 200 and again["played_at"] == first["played_at"], "the first play is kept"
        assert played(api, mid) == ({bob: first["played_at"]}, 1)
        assert played(api, mid, viewer=alice) == ({bob: first["played_at"]}, 1)
        play(api, mid, carol, token=api.user_token(carol))
        assert played(api, mid)[1] == 2
        author.wait_for(lambda e: e["type"] == "message.played" and e["user"]["id"] == carol)
        # No second event for bob's repeat.
        assert [e["user"]["id"] for e in author.events if e["type"] == "message.played"] == [bob, carol]
    finally:
        author.close()
        other.close()


def test_a_private_reader_plays_privately(server, api, unique):
    alice, bob, finn = names(unique, "alice", "bob", "finn")
    api.upsert_users(alice, bob, {"id": finn, "privacy_settings": {"read_receipts": {"enabled": False}}})
    cid = f"messaging:{unique}"
    api.create_channel(cid, [alice, bob, finn], created_by=alice)
    mid = f"{unique}-v"
    api.send_message(cid, alice, "", message_id=mid, attachments=[{"type": "video", "asset_url": "https://e/v.mp4"}])
    author, own = Socket(server, api, alice), Socket(server, api, finn)
    try:
        status, answer = play(api, mid, finn, token=api.user_token(finn))
        assert status == 201
        own.wait_for(lambda e: e["type"] == "message.played")
        assert played(api, mid, viewer=finn) == ({finn: answer["played_at"]}, 1), "the player sees their own"
        assert played(api, mid, viewer=alice) == ({}, 0)
        assert played(api, mid, viewer=bob) == ({}, 0)
        # bob's public play reaches alice; finn's never did.
        play(api, mid, bob)
        author.wait_for(lambda e: e["type"] == "message.played")
        assert [e["user"]["id"] for e in author.events if e["type"] == "message.played"] == [bob]
    finally:
        author.close()
        own.close()


def test_who_may_play_what(api, unique):
    alice, bob, olga = names(unique, "alice", "bob", "olga")
    api.upsert_users(alice, bob, olga)
    cid = f"messaging:{unique}"
    api.create_channel(cid, [alice, bob], created_by=alice)
    voice, text = f"{unique}-v", f"{unique}-t"
    api.send_message(cid, alice, "", message_id=voice, attachments=VOICE)
    api.send_message(cid, alice, "hi", message_id=text, attachments=[{"type": "image", "asset_url": "https://e/p.png"}])
    cases = [
        (voice, alice, api.user_token(alice), 400),  # the author
        (text, bob, api.user_token(bob), 400),  # an image is not played
        (voice, olga, api.user_token(olga), 403),  # not a member
        (f"{unique}-nope", bob, api.user_token(bob), 404),
        ("bad id!", bob, api.user_token(bob), 400),
    ]
    for message_id, user, token, status in cases:
        response = api.raw("POST", f"/messages/{message_id}/played", {}, token=token)
        assert response.status_code == status, (message_id, user, response.text)
        assert response.json()["StatusCode"] == status
    # A server token must name the user.
    assert api.raw("POST", f"/messages/{voice}/played", {}).status_code == 400
    assert played(api, voice) == ({}, 0)


def test_a_channel_type_with_played_events_off_refuses_plays(api, unique):
    name = f"t{unique.replace('-', '')[:20]}"
    created = api.call("POST", "/channeltypes", {"name": name, "played_events": False})
    assert created["played_events"] is False
    assert api.call("GET", f"/channeltypes/{name}")["played_events"] is False
    assert api.call("GET", "/channeltypes/messaging")["played_events"] is True
    alice, bob = names(unique, "alice", "bob")
    api.upsert_users(alice, bob)
    cid = f"{name}:{unique}"
    api.create_channel(cid, [alice, bob], created_by=alice)
    mid = f"{unique}-v"
    api.send_message(cid, alice, "", message_id=mid, attachments=VOICE)
    status, answer = play(api, mid, bob)
    assert status == 400 and "played_events" in answer["message"]
    api.call("PUT", f"/channeltypes/{name}", {"played_events": True})
    assert play(api, mid, bob)[0] == 201


def test_a_node_held_before_v13_keeps_attachments_and_refuses_plays_clearly(tmp_path):
    """A node held at the schema just before `v13-played` (`--migrations-up-to`, as in
    test_upgrade) in a rolling upgrade: attachments live with the message's custom data, so
    they work; plays need `message_play`, so they answer 409 saying why, and receipts count
    none."""
    with store_arguments("postgres", "played_old") as store_args:
        process = TicksProcess(
            tmp_path / "old", api_key="oldkey", api_secret=secrets.token_urlsafe(48),
            extra_args=["--rate-limits", "off", "--migrations-up-to", "v12-app-settings", *store_args])
        try:
            api = Ticks(process.base_url, process.api_key, process.api_secret)
            api.upsert_users("alice", "bob")
            api.create_channel("messaging:old", ["alice", "bob"], created_by="alice")
            sent = api.send_message("messaging:old", "alice", "", message_id="old-v", attachments=VOICE)
            assert sent["attachments"] == VOICE
            assert api.call("GET", "/messages/old-v")["message"]["attachments"] == VOICE
            status, answer = play(api, "old-v", "bob")
            assert status == 409 and "v13-played" in answer["message"], answer
            assert played(api, "old-v") == ({}, 0)
        finally:
            assert process.stop() == 0, process.output()


def test_a_node_held_before_v14_edits_truncates_and_syncs_naming_no_one(tmp_path):
    """A node held just before `v14-actors` (`--migrations-up-to v13-played`): its schema
    has no columns for who acted, so it writes none; edits, deletes, channel updates,
    truncations and sync all work, and sync names no one for them."""
    with store_arguments("postgres", "actors_old") as store_args:
        process = TicksProcess(
            tmp_path / "old", api_key="oldkey", api_secret=secrets.token_urlsafe(48),
            extra_args=["--rate-limits", "off", "--migrations-up-to", "v13-played", *store_args])
        try:
            api = Ticks(process.base_url, process.api_key, process.api_secret)
            api.upsert_users("alice", "bob")
            api.create_channel("messaging:held", ["alice", "bob"], created_by="alice")
            api.send_message("messaging:held", "alice", "hi", message_id="held-1")
            sent = api.send_message("messaging:held", "alice", "there", message_id="held-2")
            api.call("POST", "/messages/held-1", {"message": {"text": "edited", "user_id": "alice"}})
            api.call("DELETE", "/messages/held-2", params={"deleted_by": "alice"})
            api.call("POST", "/channels/messaging/held", {"data": {"color": "red"}, "user_id": "alice"})
            answer = api.call("POST", "/sync", {"channel_cids": ["messaging:held"], "last_sync_at": sent["created_at"]},
                              token=api.user_token("bob"))
            changed = [(event["type"], "user" in event) for event in answer["events"]
                       if event["type"] in ("message.updated", "message.deleted", "channel.updated")]
            assert changed == [("message.updated", False), ("message.deleted", False), ("channel.updated", False)], answer
            api.call("POST", "/channels/messaging/held/truncate", {"user_id": "alice"})
        finally:
            assert process.stop() == 0, process.output()
