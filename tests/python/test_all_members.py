"""Read by everyone and delivered to everyone (R13), from the server, over
the wire on SQLite and PostgreSQL: receipts' `read_by_all` /
`delivered_to_all`, channel state's `read_by_all_up_to` /
`delivered_to_all_up_to`, and the `message.read_by_all` /
`message.delivered_to_all` events to the author alone.
"""


import pytest
from conftest import served
from test_nodes import Socket
from wire import Ticks


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(request, tmp_path_factory):
    with served(request.param, "allmembers", tmp_path_factory) as process:
        yield process


@pytest.fixture
def api(server):
    return Ticks(server.base_url, server.api_key, server.api_secret)


def names(unique, *people):
    return [f"{unique}-{person}" for person in people]


def all_facts(api, message_id):
    answer = api.receipts(message_id)
    return answer["read_by_all"], answer["delivered_to_all"]


def up_to(api, cid, user):
    state = api.query_channel(cid, token=api.user_token(user))
    return state.get("read_by_all_up_to"), state.get("delivered_to_all_up_to")


def test_read_by_all_waits_for_the_last_member_and_tells_the_author_alone(server, api, unique):
    alice, bob, carol, dave = names(unique, "alice", "bob", "carol", "dave")
    api.upsert_users(alice, bob, carol, dave)
    cid = f"messaging:{unique}"
    api.create_channel(cid, [alice, bob, carol, dave], created_by=alice)
    m1, m2 = f"{unique}-m1", f"{unique}-m2"
    api.send_message(cid, alice, "one", message_id=m1)
    api.send_message(cid, alice, "two", message_id=m2)
    author, reader = Socket(server, api, alice), Socket(server, api, bob)
    try:
        assert all_facts(api, m1) == (False, False)
        assert up_to(api, cid, alice) == (None, None)
        api.mark_read(cid, bob)
        api.mark_read(cid, carol)
        assert all_facts(api, m1) == (False, False), "dave has neither read nor received it"
        api.mark_delivered(dave, (cid, m2))
        delivered = author.wait_for(lambda e: e["type"] == "message.delivered_to_all")
        assert delivered["message_id"] == m2 and delivered["cid"] == cid
        assert all_facts(api, m2) == (False, True)
        api.mark_read(cid, dave, message_id=m1)
        read = author.wait_for(lambda e: e["type"] == "message.read_by_all")
        assert read["message_id"] == m1, "the newest message every other member has read"
        assert all_facts(api, m1) == (True, True) and all_facts(api, m2) == (False, True)
        assert up_to(api, cid, alice) == (m1, m2)
        assert up_to(api, cid, bob) == (None, None), "bob wrote nothing"
        api.mark_read(cid, dave)
        author.wait_for(lambda e: e["type"] == "message.read_by_all" and e["message_id"] == m2)
        assert all_facts(api, m2) == (True, True)
        # The author alone hears it: bob's socket got the reads, never an "all".
        reader.wait_for(lambda e: e["type"] == "message.read" and e["user"]["id"] == dave)
        assert not [e for e in reader.events if e["type"].startswith("message.read_by_all")
                    or e["type"] == "message.delivered_to_all"]
    finally:
        author.close()
        reader.close()


def test_members_who_leave_stop_counting_and_newcomers_hold_nothing_back(api, unique):
    alice, bob, carol, erin = names(unique, "alice", "bob", "carol", "erin")
    api.upsert_users(alice, bob, carol, erin)
    cid = f"messaging:{unique}"
    api.create_channel(cid, [alice, bob, carol], created_by=alice)
    m1 = f"{unique}-m1"
    api.send_message(cid, alice, "hi", message_id=m1)
    api.mark_read(cid, bob)
    assert all_facts(api, m1) == (False, False)
    api.update_members(cid, add=[erin])
    assert all_facts(api, m1) == (False, False), "erin joined having read it (R5); carol still has not"
    api.update_members(cid, remove=[carol])
    assert all_facts(api, m1) == (True, True), "carol left: she no longer counts"
    assert up_to(api, cid, alice) == (m1, m1)


def test_the_author_never_holds_back_their_own_messages(api, unique):
    alice, bob = names(unique, "alice", "bob")
    api.upsert_users(alice, bob)
    cid = f"messaging:{unique}"
    api.create_channel(cid, [alice, bob], created_by=alice)
    b0, m1 = f"{unique}-b0", f"{unique}-m1"
    api.send_message(cid, bob, "first", message_id=b0)
    api.send_message(cid, alice, "hi", message_id=m1)
    api.mark_read(cid, bob)
    # alice's own read cursor goes back before both: she is still not one of "all" for m1.
    api.call("POST", f"/channels/messaging/{unique}/unread", {"user": {"id": alice}, "message_id": b0})
    assert all_facts(api, m1) == (True, True)
    assert all_facts(api, b0) == (False, True), "bob's message: alice has received it, not read it any more"


def test_a_private_reader_counts_only_through_delivery(api, unique):
    alice, bob, finn = names(unique, "alice", "bob", "finn")
    api.upsert_users(alice, bob, {"id": finn, "privacy_settings": {"read_receipts": {"enabled": False}}})
    cid = f"messaging:{unique}"
    api.create_channel(cid, [alice, bob, finn], created_by=alice)
    m1 = f"{unique}-m1"
    api.send_message(cid, alice, "hi", message_id=m1)
    api.mark_read(cid, bob)
    api.mark_delivered(finn, (cid, m1))
    # finn's delivery is visible; his read is not, and "all" does not wait for it to leak it.
    assert all_facts(api, m1) == (True, True)
    answer = api.receipts(m1)
    assert [r for r in answer["receipts"] if r["user"]["id"] == finn and "read_at" in r] == []
    # He changes his mind: his reads are shared from now on, and he has not read m1.
    api.upsert_users(finn)
    assert all_facts(api, m1) == (False, True)
    api.mark_read(cid, finn)
    assert all_facts(api, m1) == (True, True)


def test_without_delivery_events_a_private_reader_is_not_counted_and_nothing_is_delivered_to_all(api, unique):
    alice, bob, finn = names(unique, "alice", "bob", "finn")
    api.upsert_users(alice, bob, {"id": finn, "privacy_settings": {"read_receipts": {"enabled": False}}})
    kind = f"q{unique}"
    api.call("POST", "/channeltypes", {"name": kind, "read_events": True, "delivery_events": False})
    cid = f"{kind}:{unique}"
    api.create_channel(cid, [alice, bob, finn], created_by=alice)
    m1 = f"{unique}-m1"
    api.send_message(cid, alice, "hi", message_id=m1)
    assert all_facts(api, m1) == (False, False)
    api.mark_read(cid, bob)
    # Here a delivered cursor moves only with reads (R9): finn's would tell his read, so he is not counted.
    assert all_facts(api, m1) == (True, False)
    assert up_to(api, cid, alice) == (m1, None)


def test_read_events_off_tell_no_one_anything(api, unique):
    alice, bob = names(unique, "alice", "bob")
    api.upsert_users(alice, bob)
    cid = f"livestream:{unique}"
    api.create_channel(cid, [alice, bob], created_by=alice)
    m1 = f"{unique}-m1"
    api.send_message(cid, alice, "hi", message_id=m1)
    api.mark_read(cid, bob)
    assert all_facts(api, m1) == (False, False)
    assert up_to(api, cid, alice) == (None, None)
