"""POST /threads/read against the real binary on SQLite and (when
TICKS_TEST_POSTGRES_URL is set) PostgreSQL: every thread of a user read in
one call, one notification.mark_threads_read to their own connections, their
thread read states in POST /sync (docs/api.md, "MarkThreadsRead").
"""

import subprocess
import threading
import time

import pytest
from conftest import POSTGRES_URL, psql, served
from test_nodes import Socket
from wire import APIError, Ticks


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(request, tmp_path_factory):
    with served(request.param, "threads", tmp_path_factory) as process:
        yield process


@pytest.fixture
def api(server):
    return Ticks(server.base_url, server.api_key, server.api_secret)


def threads_of(api, user):
    return {t["parent_message_id"]: t["unread_count"] for t in api.call("GET", "/unread", params={"user_id": user})["threads"]}


def set_up(api, unique):
    """alice's parent in each of three channels, each with a reply from bob: three unread threads."""
    alice, bob, mallory = (f"{unique}-{name}" for name in ("alice", "bob", "mallory"))
    api.upsert_users(alice, bob, mallory)
    parents = []
    for index in range(3):
        cid = f"messaging:{unique}-{index}"
        api.create_channel(cid, [alice, bob], created_by=alice)
        parent = f"{unique}-p{index}"
        api.send_message(cid, alice, "parent", message_id=parent)
        api.send_message(cid, bob, "reply", message_id=f"{unique}-r{index}", parent_id=parent)
        parents.append(parent)
    return alice, bob, mallory, parents


def test_every_thread_read_in_one_call_with_one_event(server, api, unique):
    alice, bob, _, parents = set_up(api, unique)
    assert threads_of(api, alice) == {parent: 1 for parent in parents}
    phone, laptop, other = Socket(server, api, alice), Socket(server, api, alice), Socket(server, api, bob)
    try:
        answer = api.call("POST", "/threads/read", {}, token=api.user_token(alice))
        assert answer["marked_threads_count"] == 3 and "duration" in answer
        for socket in (phone, laptop):
            event = socket.wait_for(lambda e: e["type"] == "notification.mark_threads_read")
            assert event["user"]["id"] == alice and event["unread_threads"] == 0
            assert event["total_unread_count"] == 0 and "cid" not in event
        assert threads_of(api, alice) == {}
        # A barrier: bob's message reaches every socket after anything published before it.
        barrier = f"{unique}-barrier"
        api.send_message(f"messaging:{unique}-0", bob, "barrier", message_id=barrier)
        for socket in (phone, laptop, other):
            socket.wait_for(lambda e: e["type"] == "message.new" and e["message"]["id"] == barrier)
            kinds = [e["type"] for e in socket.events]
            assert kinds.count("notification.mark_threads_read") == (0 if socket is other else 1), kinds
            assert not [e for e in socket.events if "thread" in e], socket.events
        # Nothing left: 0, and still one event each.
        assert api.call("POST", "/threads/read", {"user_id": alice})["marked_threads_count"] == 0
    finally:
        for socket in (phone, laptop, other):
            socket.close()


def test_who_may_call(api, unique):
    alice, bob, mallory, _ = set_up(api, unique)
    for body in ({"user_id": bob}, {"user": {"id": bob}}):
        with pytest.raises(APIError) as refused:
            api.call("POST", "/threads/read", body, token=api.user_token(alice))
        assert refused.value.status == 403 and refused.value.body["code"] == 17
    with pytest.raises(APIError) as nobody:
        api.call("POST", "/threads/read", {})
    assert nobody.value.status == 400 and nobody.value.body["code"] == 4
    with pytest.raises(APIError) as unknown:
        api.call("POST", "/threads/read", {"user_id": f"{unique}-nobody"})
    assert unknown.value.status == 404 and unknown.value.body["code"] == 16
    assert len(threads_of(api, alice)) == 3
    assert api.call("POST", "/threads/read", {}, token=api.user_token(mallory))["marked_threads_count"] == 0
    assert api.call("POST", "/threads/read", {"user_id": alice})["marked_threads_count"] == 3


def test_sync_tells_the_users_own_thread_reads(api, unique):
    alice, bob, _, parents = set_up(api, unique)
    since = api.send_message(f"messaging:{unique}-0", bob, "before", message_id=f"{unique}-m0")["created_at"]
    time.sleep(0.01)  # the marks come strictly after `since`
    api.call("POST", "/threads/read", {"user_id": alice})
    api.call("POST", "/threads/read", {"user_id": bob})
    cids = [f"messaging:{unique}-{index}" for index in range(3)]
    answer = api.call("POST", "/sync", {"channel_cids": cids, "last_sync_at": since}, token=api.user_token(alice))
    reads = [e for e in answer["events"] if "thread" in e]
    assert sorted((e["type"], e["user"]["id"], e["thread"]["parent_message_id"], e["last_read_message_id"]) for e in reads) == [
        ("message.read", alice, parents[index], f"{unique}-r{index}") for index in range(3)]


def test_all_or_nothing_while_one_thread_is_locked(server, api, unique):
    """One transaction: while another session holds one of alice's thread read
    states, the call waits, and none of her threads reads as marked; once it
    lets go, all of them are."""
    if server.schema is None:
        pytest.skip("PostgreSQL only: another session holds a row lock")
    alice, _, _, parents = set_up(api, unique)
    holder = subprocess.Popen(["psql", POSTGRES_URL, "-qAt"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        holder.stdin.write(
            f"BEGIN; SELECT parent_id FROM {server.schema}.thread_read "
            f"WHERE parent_id = '{parents[1]}' AND user_id = '{alice}' FOR UPDATE;\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == parents[1]
        answer = {}
        call = threading.Thread(target=lambda: answer.update(api.call("POST", "/threads/read", {"user_id": alice})))
        call.start()
        deadline = time.monotonic() + 10
        waiting = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%UPDATE thread_read SET%'"
        while psql(waiting) != "1":
            assert time.monotonic() < deadline, "the call never waited for the lock"
            time.sleep(0.02)
        assert call.is_alive()
        assert threads_of(api, alice) == {parent: 1 for parent in parents}
        holder.stdin.write("COMMIT;\n")
        holder.stdin.close()
        call.join(10)
        assert answer["marked_threads_count"] == 3
        assert threads_of(api, alice) == {}
    finally:
        holder.kill() if holder.poll() is None else None
        holder.wait()
