"""GET /unread/explain and POST /unread/recount against the real binary, on
SQLite and (when TICKS_TEST_POSTGRES_URL is set) PostgreSQL: after random
histories of sends, replies, reads, marks unread, deletes, member changes
and truncations, a recount finds nothing to fix, and every member's
explained count is the count GET /unread serves (docs/api.md, "Unread counts").
"""

import random

import pytest
from conftest import served
from wire import APIError, Ticks


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(request, tmp_path_factory):
    with served(request.param, "unread", tmp_path_factory) as process:
        yield process


@pytest.fixture
def api(server):
    return Ticks(server.base_url, server.api_key, server.api_secret)


def explain(api, cid, user, token=None):
    params = {"cid": cid} if token else {"cid": cid, "user_id": user}
    return api.call("GET", "/unread/explain", params=params, token=token)


def test_explain_names_each_rule_and_matches_the_served_count(api, unique):
    alice, bob = f"{unique}-alice", f"{unique}-bob"
    api.upsert_users(alice, bob)
    cid = f"messaging:{unique}-g"
    api.create_channel(cid, [alice, bob], created_by=alice)
    m1 = api.send_message(cid, alice, "one", message_id=f"{unique}-m1")["id"]
    api.send_message(cid, bob, "two", message_id=f"{unique}-m2")
    api.send_message(cid, alice, "gone", message_id=f"{unique}-m3")
    api.call("DELETE", f"/messages/{unique}-m3")
    api.send_message(cid, alice, "aside", message_id=f"{unique}-r1", parent_id=m1)
    api.call("POST", f"/channels/messaging/{unique}-g/unread", {"user_id": bob, "message_id": m1})

    answer = explain(api, cid, bob, token=api.user_token(bob))
    assert [(m["id"], m["rule"], m["counted"]) for m in answer["messages"]] == [
        (f"{unique}-m1", "counted", True), (f"{unique}-m2", "own", False),
        (f"{unique}-m3", "deleted", False), (f"{unique}-r1", "thread_only", False)]
    assert answer["unread_count"] == answer["counted"] == 1
    assert answer["counts"] == {"counted": 1, "own": 1, "deleted": 1, "thread_only": 1}
    served = api.call("GET", "/unread", params={"user_id": bob})
    assert served["total_unread_count"] == 1
    with pytest.raises(APIError) as refused:
        api.call("POST", "/unread/recount", {}, token=api.user_token(bob))
    assert refused.value.status == 403 and refused.value.body["code"] == 17


@pytest.mark.parametrize("seed", [11, 12])
def test_no_drift_after_random_histories(api, unique, seed):
    rng = random.Random(seed)
    users = [f"{unique}-u{i}" for i in range(4)]
    api.upsert_users(*users)
    cids = [f"messaging:{unique}-h{i}" for i in range(3)]
    members = {cid: set(users[:3]) for cid in cids}
    messages = {cid: [] for cid in cids}
    for cid in cids:
        api.create_channel(cid, users[:3], created_by=users[0])
    for step in range(150):
        cid = rng.choice(cids)
        path = "/channels/" + cid.replace(":", "/")
        user = rng.choice(users)
        member = rng.choice(sorted(members[cid])) if members[cid] else user
        message = rng.choice(messages[cid]) if messages[cid] else "none"
        roll = rng.randrange(100)
        if roll < 35:
            fields = {}
            if messages[cid] and rng.random() < 0.4:
                fields = {"parent_id": message, "show_in_channel": rng.random() < 0.5}
            new = f"{unique}-s{step}"
            messages[cid].append(new)
            call = ("POST", f"{path}/message", {"message": {"id": new, "text": "t", "user_id": member, **fields}})
        elif roll < 50:
            call = ("POST", f"{path}/read", {"user_id": member, **({"message_id": message} if rng.random() < 0.5 else {})})
        elif roll < 57:
            call = ("POST", f"{path}/read", {"user_id": member, "thread_id": message})
        elif roll < 70:
            call = ("POST", f"{path}/unread", {"user_id": member, "message_id": message})
        elif roll < 80:
            call = ("DELETE", f"/messages/{message}?hard={str(rng.random() < 0.5).lower()}", None)
        elif roll < 87:
            members[cid].add(user)
            call = ("POST", path, {"add_members": [user]})
        elif roll < 93:
            members[cid].discard(member)
            call = ("POST", path, {"remove_members": [member]})
        elif roll < 97:
            call = ("POST", f"{path}/truncate", {"hard_delete": rng.random() < 0.5})
        else:
            call = ("POST", "/channels/read", {"user_id": member})
        try:
            api.call(*call)
        except APIError as error:
            assert error.status < 500, (step, call, error.body)

    fixed = api.call("POST", "/unread/recount", {"user_ids": users})
    assert fixed["users_checked"] == len(users) and fixed["fixed"] == [], fixed
    for user in users:
        served = api.call("GET", "/unread", params={"user_id": user})
        by_channel = {c["channel_id"]: c["unread_count"] for c in served["channels"]}
        total = 0
        for cid in cids:
            answer = explain(api, cid, user)
            assert answer["unread_count"] == answer["counted"] == by_channel.get(cid, 0), (user, cid, answer)
            total += answer["unread_count"]
        assert served["total_unread_count"] == total
