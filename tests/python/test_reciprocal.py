"""Reciprocal read receipts (R15), over the wire on SQLite and PostgreSQL:
`PATCH /app {"reciprocal_read_receipts": true}` makes a user who hides their
reads (R10) see the others' reads only as deliveries, in every read path —
live events, receipts, channel state, sync, thread reads, read by all (R13)
and the webhooks' read by all — and turning it off gives the reads back.
"""


import pytest
from conftest import served
from test_nodes import Socket
from test_webhooks import Receiver
from wire import APIError, Ticks

HIDDEN = {"read_receipts": {"enabled": False}}


@pytest.fixture(scope="module")
def receiver():
    made = Receiver()
    yield made
    made.close()


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(request, tmp_path_factory, receiver):
    hooks = ["--webhook", receiver.url, "--webhook-events", "message.read_by_all,message.delivered_to_all"]
    with served(request.param, "reciprocal", tmp_path_factory, extra_args=hooks) as process:
        yield process


@pytest.fixture
def api(server):
    client = Ticks(server.base_url, server.api_key, server.api_secret)
    yield client
    client.call("PATCH", "/app", {"reciprocal_read_receipts": False})


def reciprocal(api, on):
    api.call("PATCH", "/app", {"reciprocal_read_receipts": on})
    assert api.call("GET", "/app")["app"]["reciprocal_read_receipts"] is on


def names(unique, *people):
    return [f"{unique}-{person}" for person in people]


def entry(api, message_id, of, seen_by):
    """`of`'s receipt of the message as `seen_by` sees it ({} when none)."""
    answer = api.receipts(message_id, token=api.user_token(seen_by))
    return next((r for r in answer["receipts"] if r["user"]["id"] == of), {})


def read_state(api, cid, of, seen_by):
    state = api.query_channel(cid, token=api.user_token(seen_by))
    return next((r for r in state.get("read", []) if r["user"]["id"] == of), {})


def synced(api, cid, user, since):
    answer = api.call("POST", "/sync", {"channel_cids": [cid], "last_sync_at": since}, token=api.user_token(user))
    return [(e["type"], (e.get("user") or {}).get("id")) for e in answer["events"]]


def test_only_a_server_token_changes_it_and_only_to_what_ticks_keeps(api, unique):
    assert api.call("GET", "/app")["app"]["reciprocal_read_receipts"] is False, "off by default"
    api.upsert_users(f"{unique}-amy")
    bad = [
        ({"reciprocal_read_receipts": True}, api.user_token(f"{unique}-amy"), 403),
        ({"reciprocal_read_receipts": "yes"}, None, 400),
        ({"disable_auth_checks": True}, None, 400),
        ({}, None, 400),
    ]
    for body, token, status in bad:
        with pytest.raises(APIError) as refused:
            api.call("PATCH", "/app", body, token=token)
        assert refused.value.status == status, body
        assert "message" in refused.value.body and refused.value.body["StatusCode"] == status
    assert api.call("GET", "/app")["app"]["reciprocal_read_receipts"] is False, "nothing refused took effect"
    reciprocal(api, True)
    reciprocal(api, False)


def test_a_user_who_hides_reads_sees_the_others_reads_as_deliveries_everywhere(server, api, unique):
    alice, bob, finn = names(unique, "alice", "bob", "finn")
    api.upsert_users(alice, bob, {"id": finn, "privacy_settings": HIDDEN})
    cid = f"messaging:{unique}"
    api.create_channel(cid, [alice, bob, finn], created_by=alice)
    since = api.send_message(cid, finn, "before", message_id=f"{unique}-m0")["created_at"]
    reciprocal(api, True)
    m1 = f"{unique}-m1"
    api.send_message(cid, alice, "hi", message_id=m1)
    hider, sharer = Socket(server, api, finn), Socket(server, api, alice)
    try:
        api.mark_read(cid, bob)
        # Live: alice hears bob's read; finn hears it as a delivery, and never as a read.
        sharer.wait_for(lambda e: e["type"] == "message.read" and e["user"]["id"] == bob)
        told = hider.wait_for(lambda e: e["type"] == "message.delivered" and e["user"]["id"] == bob)
        assert told["last_delivered_message_id"] == m1
        # A thread read is a read too: finn hears nothing of it.
        api.call("POST", f"/channels/messaging/{unique}/read", {"user": {"id": bob}, "thread_id": f"{unique}-m0"})
        sharer.wait_for(lambda e: e["type"] == "message.read" and e.get("thread"))
        assert [e for e in hider.events if e["type"] == "message.read" and e["user"]["id"] != finn] == []

        # Receipts, channel state and sync, as finn: delivered, never read; as alice: read.
        assert "read_at" not in entry(api, m1, bob, finn) and "delivered_at" in entry(api, m1, bob, finn)
        assert "read_at" in entry(api, m1, bob, alice)
        assert api.receipts(m1, token=api.user_token(finn))["read_count"] == 0
        seen = read_state(api, cid, bob, finn)
        assert "last_read" not in seen and seen["last_delivered_message_id"] == m1, seen
        assert read_state(api, cid, bob, alice)["last_read_message_id"] == m1
        assert (("message.read", bob) not in synced(api, cid, finn, since)
                and ("message.delivered", bob) in synced(api, cid, finn, since))
        assert ("message.read", bob) in synced(api, cid, alice, since)
        # finn's own reads stay his own to see.
        api.mark_read(cid, finn)
        hider.wait_for(lambda e: e["type"] == "message.read" and e["user"]["id"] == finn)
        assert "read_at" in entry(api, m1, finn, finn)

        # Off again: finn sees bob's read everywhere (his own reads stay private: R10).
        reciprocal(api, False)
        assert "read_at" in entry(api, m1, bob, finn)
        assert read_state(api, cid, bob, finn)["last_read_message_id"] == m1
        assert ("message.read", bob) in synced(api, cid, finn, since)
        assert "read_at" not in entry(api, m1, finn, alice), "R10: finn's reads are still hidden"
    finally:
        hider.close()
        sharer.close()


def test_an_author_who_hides_reads_is_told_delivered_to_all_never_read_by_all(server, api, receiver, unique):
    alice, bob, finn = names(unique, "alice", "bob", "finn")
    api.upsert_users(alice, bob, {"id": finn, "privacy_settings": HIDDEN})
    cid = f"messaging:{unique}"
    api.create_channel(cid, [alice, bob, finn], created_by=alice)
    reciprocal(api, True)
    f1, a1 = f"{unique}-f1", f"{unique}-a1"
    api.send_message(cid, finn, "voice", message_id=f1)
    api.send_message(cid, alice, "text", message_id=a1)  # alice's send reads f1 (R4)
    author = Socket(server, api, finn)
    try:
        api.mark_read(cid, bob)
        author.wait_for(lambda e: e["type"] == "message.delivered_to_all" and e["message_id"] == f1)
        # alice's own message a1, read by bob and by finn (privately: through his delivery, R13).
        api.mark_delivered(finn, (cid, a1))
        calls = receiver.wait_for(
            lambda calls: any(c.type == "message.read_by_all" and c.event["message_id"] == a1 for c in calls),
            what="alice's read by all")
        assert [c for c in calls if c.type == "message.read_by_all" and c.event["message_id"] == f1] == [], \
            "finn hides his reads: no read by all of his message, not even to the webhooks"
        assert [c for c in calls if c.type == "message.delivered_to_all" and c.event["message_id"] == f1]
        assert [e for e in author.events if e["type"] == "message.read_by_all"] == []
        facts = api.receipts(f1, token=api.user_token(finn))
        assert (facts["read_by_all"], facts["delivered_to_all"]) == (False, True)
        assert api.receipts(f1, token=api.user_token(alice))["read_by_all"] is True, "a fact for those who share"
        state = api.query_channel(cid, token=api.user_token(finn))
        assert "read_by_all_up_to" not in state and state["delivered_to_all_up_to"] == f1
        reciprocal(api, False)
        state = api.query_channel(cid, token=api.user_token(finn))
        assert state["read_by_all_up_to"] == f1
    finally:
        author.close()


def test_a_user_who_hides_reads_is_not_told_of_the_others_plays(server, api, unique):
    """A play is a read (R14): under R15 a viewer who hides their reads neither hears
    `message.played` nor sees `played_at` or a `played_count` of the others'."""
    alice, bob, finn = names(unique, "alice", "bob", "finn")
    api.upsert_users(alice, bob, {"id": finn, "privacy_settings": HIDDEN})
    cid = f"messaging:{unique}"
    api.create_channel(cid, [alice, bob, finn], created_by=alice)
    voice = f"{unique}-voice"
    api.send_message(cid, alice, "", message_id=voice,
                     attachments=[{"type": "voiceRecording", "asset_url": "https://example.com/v.m4a"}])
    reciprocal(api, True)
    hider, author = Socket(server, api, finn), Socket(server, api, alice)
    try:
        api.call("POST", f"/messages/{voice}/played", {"user_id": bob})
        author.wait_for(lambda e: e["type"] == "message.played" and e["user"]["id"] == bob)
        as_finn = api.receipts(voice, token=api.user_token(finn))
        assert as_finn["played_count"] == 0 and not [r for r in as_finn["receipts"] if r.get("played_at")]
        assert api.receipts(voice, token=api.user_token(alice))["played_count"] == 1
        # finn's own play: his connections hear it (R10 keeps it from the others).
        api.call("POST", f"/messages/{voice}/played", {"user_id": finn})
        hider.wait_for(lambda e: e["type"] == "message.played" and e["user"]["id"] == finn)
        assert [e for e in hider.events if e["type"] == "message.played" and e["user"]["id"] == bob] == []
        reciprocal(api, False)
        assert api.receipts(voice, token=api.user_token(finn))["played_count"] == 2
    finally:
        hider.close()
        author.close()
