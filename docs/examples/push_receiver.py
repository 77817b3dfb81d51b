#!/usr/bin/env python3
"""A minimal receiver for Ticks' push hook and webhooks (docs/webhooks.md,
"Connecting a push service"). Python's standard library only.

    TICKS_API_SECRET=... python3 docs/examples/push_receiver.py --port 8080
    swift run ticks serve --push-hook http://127.0.0.1:8080/push --webhook http://127.0.0.1:8080/events

(or `--credentials .ticks/credentials.json` instead of TICKS_API_SECRET.)

For every call it:

1. checks `X-Signature` (HMAC-SHA256 of the raw body with the API secret, in
   lowercase hex) and answers 401 when it does not match;
2. drops a call it has already taken, by `X-Webhook-Id` (Ticks delivers at
   least once, so a call may come again after a lost answer);
3. hands the call to a worker thread and answers 200 at once: Ticks counts a
   call that takes longer than `--webhook-timeout` (5 s) as failed and sends
   it again;
4. in the worker, for a push call (one with `recipients`), builds the APNs
   and FCM payload each recipient's devices would get, and prints it where a
   real service would send it. Any other call is a webhook event: printed.

What it leaves out, on purpose: device-token storage (DEVICES below), the
calls to APNs and FCM, and durability. This receiver remembers ids and
queued work in memory only; a production one would write the call to its own
database (with the delivery id as a unique key) before answering 200, so a
crash between the answer and the push loses nothing.
"""

import argparse
import collections
import hashlib
import hmac
import json
import os
import queue
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Ticks' largest call is a push call with 1,000 recipients (about 400 KB);
# anything far larger is not from Ticks.
MAX_BODY_BYTES = 8 << 20

# How many delivery ids to remember. Ticks retries a call for at most
# --webhook-max-age (24 h by default), and a failed call retried by hand can
# come up to 7 days later; a real receiver keeps ids that long.
SEEN_IDS = 100_000

# The devices of each user, as the app registered them with your service
# (APNs device tokens, FCM registration tokens). A placeholder: a real push
# service keeps these in its database.
DEVICES = {
    "bob": [{"platform": "apns", "token": "<bob's APNs device token>"}],
    "carol": [{"platform": "fcm", "token": "<carol's FCM registration token>"}],
}


def signature(body: bytes, secret: str) -> str:
    """Ticks' X-Signature: HMAC-SHA256 of the body, keyed with the API secret, as lowercase hex."""
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def apns_payload(event: dict, recipient: dict) -> dict:
    """What one recipient's iPhone gets. `mutable-content` makes iOS run the
    app's notification service extension, which reads `cid`, `message_id`
    and `delivery_token` at the top level (PushDelivery.message(in:)).
    Keep the payload under APNs' 4 KB: the text is cut short."""
    message = event["message"]
    author = message.get("user", {})
    return {
        "aps": {
            "alert": {"title": author.get("name") or author.get("id", ""), "body": message.get("text", "")[:1000]},
            "badge": recipient["total_unread_count"],
            "sound": "default",
            "mutable-content": 1,
            "thread-id": event["cid"],
        },
        "cid": event["cid"],
        "message_id": message["id"],
        "delivery_token": recipient["delivery_token"],
    }


def fcm_message(event: dict, recipient: dict, device_token: str) -> dict:
    """An FCM HTTP v1 `message` for one Android device: a data message (every
    value a string), so the app's FirebaseMessagingService runs and can mark
    the message delivered with the token before it shows the notification."""
    message = event["message"]
    author = message.get("user", {})
    return {
        "message": {
            "token": device_token,
            "android": {"priority": "high"},
            "data": {
                "cid": event["cid"],
                "message_id": message["id"],
                "delivery_token": recipient["delivery_token"],
                "title": author.get("name") or author.get("id", ""),
                "body": message.get("text", "")[:1000],
                "unread_count": str(recipient["unread_count"]),
                "total_unread_count": str(recipient["total_unread_count"]),
            },
        }
    }


def push(event: dict) -> None:
    """A push call: one notification per device of each recipient."""
    for recipient in event["recipients"]:
        devices = DEVICES.get(recipient["user_id"], [])
        if not devices:
            print(f"push: {recipient['user_id']} has no registered device", flush=True)
        for device in devices:
            if device["platform"] == "apns":
                payload = apns_payload(event, recipient)
                # The real call goes here: POST https://api.push.apple.com/3/device/<device token>
                # with this payload, headers apns-push-type: alert, apns-topic: <bundle id>,
                # and your APNs key's JWT. Drop device tokens APNs answers 410 for.
                print(f"APNs -> {recipient['user_id']}: {json.dumps(payload)}", flush=True)
            else:
                payload = fcm_message(event, recipient, device["token"])
                # The real call goes here: POST https://fcm.googleapis.com/v1/projects/<project>/messages:send
                # with this body and an OAuth 2 access token. Drop tokens FCM answers UNREGISTERED for.
                print(f"FCM -> {recipient['user_id']}: {json.dumps(payload)}", flush=True)


def handle(delivery_id: str, event: dict) -> None:
    if "recipients" in event:
        push(event)
    else:
        # A webhook: any event type the receiver was configured for.
        print(f"webhook {event.get('type')} {event.get('cid', '')} ({delivery_id}): {json.dumps(event)}", flush=True)


class Receiver:
    def __init__(self, secret: str):
        self.secret = secret
        self.seen = collections.OrderedDict()
        self.lock = threading.Lock()
        self.work = queue.Queue()

    def first_time(self, delivery_id: str) -> bool:
        """True the first time a delivery id is seen; remembers the last SEEN_IDS."""
        with self.lock:
            if delivery_id in self.seen:
                return False
            self.seen[delivery_id] = True
            if len(self.seen) > SEEN_IDS:
                self.seen.popitem(last=False)
            return True

    def worker(self) -> None:
        while True:
            delivery_id, event = self.work.get()
            try:
                handle(delivery_id, event)
            except Exception as error:  # one bad call must not stop the worker
                print(f"call {delivery_id} failed: {error!r}", file=sys.stderr, flush=True)


def make_handler(receiver: Receiver):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY_BYTES:
                return self.answer(413)
            body = self.rfile.read(length)
            # Check the raw bytes, before parsing: the signature is over exactly these.
            given = self.headers.get("X-Signature", "")
            if not hmac.compare_digest(given.encode(), signature(body, receiver.secret).encode()):
                return self.answer(401)
            delivery_id = self.headers.get("X-Webhook-Id", "")
            try:
                event = json.loads(body)
            except ValueError:
                return self.answer(400)
            # A repeat (Ticks sends a call again when it did not see our 2xx): say yes, do nothing.
            if delivery_id and not receiver.first_time(delivery_id):
                return self.answer(200)
            receiver.work.put((delivery_id, event))
            self.answer(200)

        def answer(self, status: int):
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format, *args):
            attempt = self.headers.get("X-Webhook-Attempt", "-") if self.headers else "-"
            sys.stderr.write(f"{self.address_string()} {format % args} attempt={attempt}\n")

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--credentials", help="Ticks' credentials.json, to read api_secret from")
    arguments = parser.parse_args()
    secret = os.environ.get("TICKS_API_SECRET")
    if arguments.credentials:
        with open(arguments.credentials) as file:
            secret = json.load(file)["api_secret"]
    if not secret:
        parser.error("set TICKS_API_SECRET or pass --credentials")
    receiver = Receiver(secret)
    threading.Thread(target=receiver.worker, daemon=True).start()
    server = ThreadingHTTPServer((arguments.host, arguments.port), make_handler(receiver))
    print(f"push receiver on http://{arguments.host}:{arguments.port}/", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
