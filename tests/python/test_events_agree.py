"""The three roads that tell a change — live events on the WebSocket, webhook
calls, and POST /sync — agree (docs/events.md, docs/webhooks.md): for random
histories on both stores, every webhook call has a live event of the same
kind about the same thing with the same fields where both carry them; a
receipt reaches the webhooks exactly when it reaches a member other than the
reader live (R8–R10: a private read reaches neither); and what POST /sync
tells a member since the start is what that member was told live, but for
read and delivered by everyone (R13), which sync tells as it stands now and
must agree with each message's receipts. One history runs with reciprocal
read receipts on (R15).

The events are built once (Sources/TicksServer/Events): a test that fails
here names the road that drifted.
"""

import random
import time

import pytest
from test_nodes import Socket
from test_webhooks import FAST, client_of, receivers, store  # noqa: F401 (fixtures)

# Fields a road adds for its own audience: the webhook's channel_type and
# channel_id, the live event's counts of its recipient.
OWN_FIELDS = {"channel_type", "channel_id", "watcher_count", "unread_count", "total_unread_count",
              "unread_channels"}
RECEIPTS = {"message.read", "message.delivered"}
# A new channel is told live as notification.added_to_channel to each member
# (as Stream does); only the webhooks get channel.created.
WEBHOOK_ONLY = {"channel.created"}
PEOPLE = ["amy", "ben", "cat", "dan"]


def subject(event):
    """What an event is about, so the same change is found on every road."""
    kind = event["type"]
    if kind.startswith("message.") and kind not in RECEIPTS:
        return event.get("message_id") or event["message"]["id"]
    if kind.startswith("member."):
        return event["member"].get("user_id") or event["member"]["user"]["id"]
    if kind == "message.read" or kind == "notification.mark_read":
        return event["user"]["id"], event.get("last_read_message_id")
    if kind == "message.delivered":
        return event["user"]["id"], event.get("last_delivered_message_id")
    if kind == "notification.mark_unread":
        return event["user"]["id"], event.get("first_unread_message_id")
    return event.get("cid")


def differences(one, other):
    """The fields both carry, with different values (a road's own fields left out)."""
    return {key: (one[key], other[key]) for key in one.keys() & other.keys()
            if key not in OWN_FIELDS and one[key] != other[key]}


def play(client, cid, rng, steps):
    """A random history in `cid`: sends, edits, deletes, reads, deliveries,
    unreads, members leaving and joining, channel updates. Returns nothing:
    the roads are what is checked."""
    path = f"/channels/{cid.replace(':', '/')}"
    members = {"amy", "ben", "cat"}
    messages = []  # (id, author) of messages not deleted
    for step in range(steps):
        action = rng.choice(["send", "send", "send", "read", "read", "deliver", "deliver", "unread", "edit",
                             "delete", "member", "update"])
        author = rng.choice(sorted(members))
        if action == "send" or not messages and action in {"read", "deliver", "unread", "edit", "delete"}:
            message_id = f"m{step}"
            client.send_message(cid, author, f"text {step}", message_id=message_id)
            messages.append((message_id, author))
        elif action == "read":
            target = rng.choice([None, rng.choice(messages)[0]])
            client.mark_read(cid, author, message_id=target)
        elif action == "deliver":
            client.mark_delivered(author, (cid, rng.choice(messages)[0]))
        elif action == "unread":
            client.call("POST", f"{path}/unread", {"user": {"id": author}, "message_id": rng.choice(messages)[0]})
        elif action == "edit":
            message_id, by = rng.choice(messages)
            client.call("POST", f"/messages/{message_id}",
                        {"message": {"id": message_id, "text": f"edited {step}", "user": {"id": by}}})
        elif action == "delete":
            message_id, _ = messages.pop(rng.randrange(len(messages)))
            client.call("DELETE", f"/messages/{message_id}")
        elif action == "member":
            if "dan" in members:
                client.update_members(cid, remove=["dan"])
                members.discard("dan")
            else:
                client.update_members(cid, add=["dan"])
                members.add("dan")
        elif action == "update":
            client.call("PATCH", path, {"set": {"color": f"c{step}"}})
    if "dan" not in members:
        client.update_members(cid, add=["dan"])


# The third history runs with the app's reciprocal read receipts on (R15): cat,
# who hides her reads, then hears the others' reads only as deliveries.
@pytest.mark.parametrize("seed, reciprocal", [(1, False), (2, False), (3, True)])
def test_live_webhooks_and_sync_tell_the_same_changes(store, receivers, seed, reciprocal):  # noqa: F811 (fixtures)
    rng = random.Random(seed)
    receiver = receivers()
    server = store.start("--webhook", receiver.url, *FAST)
    client = client_of(server)
    private = {"id": "cat", "privacy_settings": {"read_receipts": {"enabled": False}}}
    client.upsert_users("amy", "ben", private, "dan")
    if reciprocal:
        client.call("PATCH", "/app", {"reciprocal_read_receipts": True})
    sockets = {person: Socket(server, client, person) for person in PEOPLE}
    try:
        start = time.time() - 1
        last_sync_at = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(start)) + "Z"
        cid = f"messaging:agree{seed}"
        client.create_channel(cid, ["amy", "ben", "cat"], created_by="amy")
        play(client, cid, rng, steps=60)
        synced = client.call("POST", "/sync", {"channel_cids": [cid], "last_sync_at": last_sync_at,
                                               "user_id": "amy"})["events"]
        reached = reached_all_now(client, cid)
        # The end of the history, which every road tells last.
        client.call("POST", f"/channels/{cid.replace(':', '/')}/truncate", {})
        client.call("DELETE", f"/channels/{cid.replace(':', '/')}")
        calls = receiver.wait_for(lambda calls: any(c.type == "channel.deleted" for c in calls),
                                  what="channel.deleted, the last change")
        live = {person: socket.wait_for(lambda e: e["type"] == "channel.deleted") and list(socket.events)
                for person, socket in sockets.items()}
    finally:
        for socket in sockets.values():
            socket.close()

    check_webhooks_against_live(calls, live)
    check_receipt_audience(calls, live, reciprocal)
    created = next(c.event["created_at"] for c in calls if c.type == "channel.created")
    check_sync_against_live(synced, live["amy"], created, calls)
    told = {e["type"]: e["message_id"] for e in synced if e["type"] in REACHED_ALL}
    assert told == {kind: message for kind, message in reached.items() if message}, (
        "sync tells where read / delivered by everyone stands as each message's receipts say")


# Read and delivered by everyone (R13), which sync tells as it stands when it
# is asked: a mark unread may since have taken back what was told live, and a
# client keeps only the furthest it heard.
REACHED_ALL = {"message.read_by_all", "message.delivered_to_all"}


def reached_all_now(client, cid):
    """The newest of amy's messages read (delivered) by everyone, as each message's receipts tell amy."""
    token = client.user_token("amy")
    reached = dict.fromkeys(REACHED_ALL)
    for message in client.query_channel(cid, user="amy", messages_limit=300)["messages"]:  # oldest first
        if message["user"]["id"] != "amy" or message.get("type") == "deleted":
            continue
        receipts = client.receipts(message["id"], token=token)
        if receipts.get("read_by_all"):
            reached["message.read_by_all"] = message["id"]
        if receipts.get("delivered_to_all"):
            reached["message.delivered_to_all"] = message["id"]
    return reached


def check_webhooks_against_live(calls, live):
    """Each webhook call has a live event of its kind about the same thing, equal where both carry a field."""
    heard = [event for events in live.values() for event in events]
    for call in calls:
        event = call.event
        if event["type"] in WEBHOOK_ONLY:
            continue
        same = [e for e in heard if e["type"] == event["type"] and subject(e) == subject(event)]
        assert same, f"{event['type']} about {subject(event)} went to the webhooks but to no socket: {event}"
        diffs = [differences(event, e) for e in same]
        closest = min(diffs, key=len)
        assert not closest, f"{event['type']} about {subject(event)}: the webhook and live differ: {closest}"


def check_receipt_audience(calls, live, reciprocal):
    """A receipt is told to the webhooks exactly when it is told live to a member other than the reader.
    With R15 on, cat (who hides her reads) is told another's read as that move's delivery: the
    same receipt as the webhooks' message.read, and never a read."""
    hooked = {(c.type, subject(c.event)) for c in calls if c.type in RECEIPTS}
    to_others = {(e["type"], subject(e)) for person, events in live.items() for e in events
                 if e["type"] in RECEIPTS and e["user"]["id"] != person}
    def reads_as_deliveries(person):
        """The deliveries `person` was told where the webhooks were told that move's read."""
        return {("message.delivered", subject(e)) for e in live[person] if e["type"] == "message.delivered"
                and e["user"]["id"] != person and ("message.read", subject(e)) in hooked
                and ("message.delivered", subject(e)) not in hooked}

    as_deliveries = set()
    if reciprocal:
        others_reads = [e for e in live["cat"] if e["type"] == "message.read_by_all"
                        or e["type"] == "message.read" and e["user"]["id"] != "cat"]
        assert not others_reads, f"R15: cat hides her reads, yet was told the others': {others_reads}"
        as_deliveries = reads_as_deliveries("cat")
        assert as_deliveries, "R15 on, yet cat was told no read as a delivery: the history tells nothing of R15"
    for person in set(PEOPLE) - {"cat"}:
        assert not reads_as_deliveries(person), f"{person} shares reads, yet was told a read as a delivery"
    assert hooked == to_others - as_deliveries, (f"only to the webhooks: {sorted(hooked - to_others)}; "
                                                 f"only to others live: {sorted(to_others - as_deliveries - hooked)}")
    private = [c.event for c in calls if c.type in {"message.read", "notification.mark_unread"}
               and c.event["user"]["id"] == "cat"]
    assert not private, f"cat's reads are private: {private}"


def check_sync_against_live(synced, amy_live, created, calls):
    """What sync tells amy since the start, amy was told live before the channel's end.
    A read cursor a member moved back (mark unread) is told to the others by
    sync as message.read, and live to nobody but the member: "other members
    learn of a mark unread only when they next load the channel"
    (docs/events.md); the webhooks' notification.mark_unread is the record of it.
    A cursor at the member's own message was told live by message.new (R4),
    a cursor a member got by joining by member.added (R5).
    One known difference, left as it is: sync tells the members a channel was
    created with as member.added at its creation, where live told each of them
    notification.added_to_channel (and the others nothing)."""
    before_end = []
    for event in amy_live:
        if event["type"] == "channel.truncated":
            break
        before_end.append(event)
    authors = {e["message"]["id"]: e["user"]["id"] for e in before_end if e["type"] == "message.new"}
    unreads = {(e["user"]["id"], e.get("last_read_message_id")) for e in
               [c.event for c in calls] + before_end if e["type"] == "notification.mark_unread"}
    for event in synced:
        if event["type"] == "member.added" and event["created_at"] == created:
            continue
        if event["type"] in REACHED_ALL:
            continue  # told as it stands now: checked against the receipts
        if event["type"] in {"message.read", "notification.mark_read"} and subject(event) in unreads:
            continue
        if event["type"] in RECEIPTS | {"notification.mark_read"} and authors.get(subject(event)[1]) == subject(event)[0]:
            continue  # sending moves the sender's cursors (R4): live, message.new told it
        joined = {(e["member"]["user"]["id"], e["created_at"]) for e in before_end if e["type"] == "member.added"}
        if event["type"] in RECEIPTS | {"notification.mark_read"} and (event["user"]["id"], event["created_at"]) in joined:
            continue  # a new member has read everything there (R5): live, member.added told it
        # A read says delivered too (R1).
        kinds = {"message.delivered", "message.read"} if event["type"] == "message.delivered" else {event["type"]}
        same = [e for e in before_end if e["type"] in kinds and subject(e) == subject(event)]
        assert same, f"sync tells amy {event['type']} about {subject(event)}, which she was never told live"
        if event["type"] in RECEIPTS or event["type"] == "notification.mark_read":
            # The latest of the kind from that member is where sync says the cursor is.
            reader = event["user"]["id"]
            latest = [e for e in before_end if e["type"] in kinds and e["user"]["id"] == reader][-1]
            assert subject(latest) == subject(event), (event, latest)
