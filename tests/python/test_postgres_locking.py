"""Concurrent writers on PostgreSQL (READ COMMITTED) take row locks in one
order (docs/storage.md, "PostgreSQL"): a channel before its members, members
in key order. Sends into channels that share members once updated those
users' kept totals at once; taken in whatever order the plan met them, they
deadlocked, and each deadlock cost PostgreSQL's deadlock_timeout (a second)
before the retry. Totals are now sums of the members' counts, read and never
written, and each send still moves its author's read cursor. On a cluster of
this test's own, PostgreSQL's own count of deadlocks must stay 0, and every
user's totals, as served, must count every message sent to them."""

import secrets
import threading

import pytest
from dbfaults import Node, OwnPostgres, postgres_installed

MEMBERS = ["m-Zed", "m-alice", "m-Bob", "m-carol", "m-dave", "m-Eve"]


@pytest.fixture
def postgres():
    if not postgres_installed():
        pytest.skip("PostgreSQL is not installed")
    cluster = OwnPostgres()
    yield cluster
    cluster.close()


@pytest.mark.parametrize("counting", ["positions", "kept"])
def test_sends_into_channels_sharing_members_never_deadlock(postgres, tmp_path, counting):
    schema = "l_" + secrets.token_hex(4)
    postgres.psql(f"CREATE SCHEMA {schema}")
    credentials = {"api_key": "lockkey", "api_secret": secrets.token_urlsafe(48)}
    url = f"{postgres.url}?schema={schema}"
    nodes = [Node(name, tmp_path / name, url, credentials, None) for name in ("a", "b")]
    try:
        setup = nodes[0].client()
        setup.upsert_users(*MEMBERS)
        # By positions a send writes no member's row; kept (an upgraded database), every other member's.
        setup.call("PATCH", "/app", {"unread_counting": counting})
        channels = [f"messaging:lock{index}" for index in range(8)]
        for index, cid in enumerate(channels):
            # Every channel has every member; each has a different author, so each send counts
            # one more unread for the other five users, all shared with the other channels.
            setup.create_channel(cid, MEMBERS, MEMBERS[index % len(MEMBERS)])
        errors = []

        def send(index, cid):
            client = nodes[index % 2].client(timeout=30)
            try:
                for number in range(25):
                    client.send_message(cid, MEMBERS[index % len(MEMBERS)], f"{number}", message_id=f"{cid[-5:]}-{number}")
            except Exception as error:  # noqa: BLE001 - reported below
                errors.append(error)

        threads = [threading.Thread(target=send, args=(index, cid)) for index, cid in enumerate(channels)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors, errors[:3]
        deadlocks = postgres.psql("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        assert deadlocks == "0", f"PostgreSQL counted {deadlocks} deadlocks"
        # Each node says the same in /metrics: no transaction ran again.
        for node in nodes:
            metrics = node.client().raw("GET", "/metrics").text
            retried = {line.split("{")[1].split("}")[0]: line.rsplit(" ", 1)[1]
                       for line in metrics.splitlines() if line.startswith("ticks_store_retries_total{")}
            assert set(retried) == {'reason="deadlock"', 'reason="serialization"'}, metrics
            assert all(float(value) == 0 for value in retried.values()), retried
        # Every message counts once for each member but its author (R7), none lost to the retries.
        for position, user in enumerate(MEMBERS):
            authored = sum(1 for index in range(len(channels)) if index % len(MEMBERS) == position)
            answer = nodes[position % 2].client().raw("GET", "/unread", params={"user_id": user}).json()
            assert answer["total_unread_count"] == 25 * (len(channels) - authored), (user, answer)
            assert len(answer["channels"]) == len(channels) - authored, (user, answer)
        served = postgres.psql(
            "SELECT SUM(m.unread + c.counted - m.counted_at) FROM member m JOIN channel c ON c.pk = m.channel_pk",
            schema=schema)
        assert served == str(len(channels) * 25 * (len(MEMBERS) - 1)), served
        # Kept: every count is in member.unread; by positions no send wrote another member's row.
        kept = postgres.psql("SELECT SUM(unread) FROM member", schema=schema)
        assert kept == (served if counting == "kept" else "0"), kept
        counted = postgres.psql("SELECT SUM(counted) FROM channel", schema=schema)
        assert counted == ("0" if counting == "kept" else str(len(channels) * 25)), counted
    finally:
        for node in nodes:
            node.stop()
