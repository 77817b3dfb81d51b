"""Ticks' HTTP API spoken directly, for the tests: HS256 tokens made with the
standard library and requests sent with `requests`.

The tests speak the wire protocol themselves rather than through Stream's
Python SDK, whose licence covers only Stream's customers (the opt-in
`scripts/check-stream-sdk` checks Stream's SDK against Ticks).
"""

import base64
import hashlib
import hmac
import json
import time

import requests


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def make_token(secret: str, user_id=None, server=False, expires_in=None, claims=None) -> str:
    """An HS256 JWT as Stream's server SDKs make them: `{"server": true}` or `{"user_id": ...}`."""
    payload = dict(claims or {})
    if server:
        payload["server"] = True
    if user_id is not None:
        payload["user_id"] = user_id
    if expires_in is not None:
        payload["exp"] = int(time.time()) + expires_in
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    body = _b64(json.dumps(payload, separators=(",", ":")).encode())
    signature = hmac.new(secret.encode(), f"{header}.{body}".encode(), hashlib.sha256).digest()
    return f"{header}.{body}.{_b64(signature)}"


class APIError(Exception):
    """A non-2xx answer: its status, Stream's error body and the headers."""

    def __init__(self, status, body, headers):
        super().__init__(f"{status}: {body}")
        self.status = status
        self.body = body
        self.headers = headers


class Ticks:
    """A client of one Ticks server, acting with the server token unless told otherwise."""

    def __init__(self, base_url: str, api_key: str, api_secret: str, timeout: float = 30):
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.api_secret = api_secret
        self.timeout = timeout
        self.session = requests.Session()
        self.server_token = make_token(api_secret, server=True)

    def user_token(self, user_id: str, expires_in=None) -> str:
        return make_token(self.api_secret, user_id=user_id, expires_in=expires_in)

    def raw(self, method: str, path: str, body=None, token=None, params=None, headers=None):
        """Sends one request; the `requests` response, whatever its status."""
        query = {"api_key": self.api_key, **(params or {})}
        sent = {"Authorization": token or self.server_token, "stream-auth-type": "jwt", **(headers or {})}
        return self.session.request(
            method, self.base_url + path, params=query, headers=sent,
            data=None if body is None else json.dumps(body), timeout=self.timeout)

    def call(self, method: str, path: str, body=None, token=None, params=None):
        """Sends one request; its JSON body when 2xx, else raises APIError."""
        response = self.raw(method, path, body=body, token=token, params=params)
        payload = response.json() if response.content else {}
        if not 200 <= response.status_code < 300:
            raise APIError(response.status_code, payload, response.headers)
        return payload

    # The calls the tests make most.

    def upsert_users(self, *users):
        """Users as ids or dicts."""
        records = [{"id": user} if isinstance(user, str) else user for user in users]
        return self.call("POST", "/users", {"users": {user["id"]: user for user in records}})

    def create_channel(self, cid: str, members, created_by: str, token=None, **data):
        channel_type, channel_id = cid.split(":", 1)
        body = {"data": {"members": list(members), "created_by": {"id": created_by}, **data}}
        return self.call("POST", f"/channels/{channel_type}/{channel_id}/query", body, token=token)

    def query_channel(self, cid: str, user=None, messages_limit=None, token=None):
        channel_type, channel_id = cid.split(":", 1)
        body = {"state": True}
        if user:
            body["user_id"] = user
        if messages_limit is not None:
            body["messages"] = {"limit": messages_limit}
        return self.call("POST", f"/channels/{channel_type}/{channel_id}/query", body, token=token)

    def send_message(self, cid: str, user: str, text: str, message_id=None, token=None, **fields):
        channel_type, channel_id = cid.split(":", 1)
        message = {"text": text, "user": {"id": user}, **fields}
        if message_id:
            message["id"] = message_id
        return self.call("POST", f"/channels/{channel_type}/{channel_id}/message", {"message": message},
                         token=token)["message"]

    def mark_read(self, cid: str, user: str, message_id=None, token=None):
        channel_type, channel_id = cid.split(":", 1)
        body = {"user": {"id": user}}
        if message_id:
            body["message_id"] = message_id
        return self.call("POST", f"/channels/{channel_type}/{channel_id}/read", body, token=token)

    def mark_delivered(self, user: str, *entries, token=None):
        """Entries are (cid, message_id) pairs."""
        body = {"user_id": user, "latest_delivered_messages": [{"cid": cid, "id": mid} for cid, mid in entries]}
        return self.call("POST", "/channels/delivered", body, token=token, params={"user_id": user})

    def update_members(self, cid: str, add=(), remove=(), token=None, **fields):
        channel_type, channel_id = cid.split(":", 1)
        body = {**fields}
        if add:
            body["add_members"] = list(add)
        if remove:
            body["remove_members"] = list(remove)
        return self.call("POST", f"/channels/{channel_type}/{channel_id}", body, token=token)

    def query_users(self, filter_conditions, token=None, **options):
        payload = {"filter_conditions": filter_conditions, "sort": [], **options}
        return self.call("GET", "/users", token=token, params={"payload": json.dumps(payload)})

    def receipts(self, message_id: str, token=None):
        return self.call("GET", f"/messages/{message_id}/receipts", token=token)

    def socket_url(self, user_id: str, token=None, port=None) -> str:
        """The WebSocket URL of `user_id` (with a fresh user token unless one is given)."""
        from urllib.parse import urlencode

        query = urlencode({
            "api_key": self.api_key, "json": json.dumps({"user_id": user_id}),
            "authorization": token or self.user_token(user_id)})
        # http://… becomes ws://…, https://… (a TLS proxy in front) wss://….
        return "ws" + self.base_url[len("http"):] + "/connect?" + query
