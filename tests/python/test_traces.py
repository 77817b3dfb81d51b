"""OpenTelemetry traces (`ticks serve --otel-endpoint`), received by a real
OTLP/HTTP endpoint: a small HTTP server in the test that takes
`POST /v1/traces` and decodes `ExportTraceServiceRequest` with
`opentelemetry-proto`.

One mark read sent to node A with a client's W3C `traceparent` must make one
trace, the client's, from A's request span through A's store and event spans
to node B's `ws.fanout` span around the socket write, across the PostgreSQL
event bus. Without `--otel-endpoint` nothing is sent, even when the standard
OTEL_* variables point at a collector.

The two-node test needs TICKS_TEST_POSTGRES_URL (scripts/test sets it).
"""

import gzip
import os
import re
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import POSTGRES_URL, TicksProcess, psql
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest, ExportTraceServiceResponse)
from test_nodes import Socket, group, stream

# Generous: the exporters batch, and the machine may be busy with builds.
DEADLINE = 90.0


def _value(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


class Receiver:
    """An OTLP/HTTP (protobuf) trace endpoint on loopback that keeps every span it is sent."""

    def __init__(self):
        self.spans = []
        self.requests = 0
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver._collect(request)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def _collect(self, request):
        spans = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    spans.append({
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex(),
                        "name": span.name,
                        "kind": span.kind,
                        "attributes": {a.key: _value(a.value) for a in span.attributes},
                        "resource": resource,
                    })
        with self.lock:
            self.requests += 1
            self.spans.extend(spans)

    def trace(self, trace_id):
        with self.lock:
            return [s for s in self.spans if s["trace_id"] == trace_id]

    def wait_for(self, condition, what, timeout=DEADLINE):
        """Waits until `condition(receiver)` holds; its value."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = condition(self)
            if found:
                return found
            time.sleep(0.1)
        with self.lock:
            names = sorted({(s["name"], s["resource"].get("service.instance.id")) for s in self.spans})
        raise AssertionError(f"{what}: not within {timeout}s; spans received: {names}")

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    endpoint = Receiver()
    yield endpoint
    endpoint.close()


def node_id(node):
    """The node id the banner prints with the traces endpoint (service.instance.id)."""
    match = re.search(r"traces: .* \(node ([0-9a-f-]+)\)", node.output())
    assert match, node.output()
    return match.group(1)


def client_traceparent():
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return trace_id, span_id, f"00-{trace_id}-{span_id}-01"


@pytest.mark.skipif(
    POSTGRES_URL is None and not os.environ.get("CI"),
    reason="TICKS_TEST_POSTGRES_URL is not set (scripts/test sets it when PostgreSQL is installed)")
def test_a_mark_read_is_one_trace_from_the_request_on_one_node_to_the_socket_write_on_the_other(
        tmp_path, receiver, monkeypatch):
    assert POSTGRES_URL, "CI must run the PostgreSQL tests: TICKS_TEST_POSTGRES_URL is not set"
    # Export every 100 ms instead of OpenTelemetry's 5 s (swift-otel reads the standard variable).
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
    schema = "t_" + secrets.token_hex(6)
    psql(f"CREATE SCHEMA {schema}")
    credentials = {"api_key": "traceskey", "api_secret": secrets.token_urlsafe(48)}
    args = ["--postgres-url", f"{POSTGRES_URL}?schema={schema}", "--otel-endpoint", receiver.url]
    nodes = []
    try:
        a = TicksProcess(tmp_path / "a", extra_args=args, **credentials)
        nodes.append(a)
        b = TicksProcess(tmp_path / "b", extra_args=args, **credentials)
        nodes.append(b)
        node_a, node_b = node_id(a), node_id(b)
        assert node_a != node_b
        via_a, via_b = stream(a), stream(b)
        via_a.upsert_users("alice", "bob")
        channel = group(via_a, "traced", ["alice", "bob"], "alice")
        via_a.send_message(channel, "alice", "who is in?", message_id="m1")
        alice_on_b = Socket(b, via_b, "alice")

        trace_id, client_span, traceparent = client_traceparent()
        response = via_a.raw(
            "POST", "/channels/messaging/traced/read", {"user": {"id": "bob"}, "message_id": "m1"},
            headers={"traceparent": traceparent})
        assert response.status_code == 201 or response.status_code == 200, response.text
        read = alice_on_b.wait_for(lambda e: e["type"] == "message.read", timeout=30)
        assert read["user"]["id"] == "bob"

        def complete(r):
            spans = r.trace(trace_id)
            names = {(s["name"], s["resource"].get("service.instance.id")) for s in spans}
            wanted = {("events.publish", node_a), ("ws.fanout", node_b)}
            has_request = any(s["parent_span_id"] == client_span for s in spans)
            has_store = any(s["name"] == "store.write" for s in spans)
            return spans if wanted <= names and has_request and has_store else None

        spans = receiver.wait_for(complete, "a trace with A's request, store and event spans and B's socket write")
        by_id = {s["span_id"]: s for s in spans}

        # Both nodes report as the service "ticks", told apart by service.instance.id.
        assert {s["resource"]["service.name"] for s in spans} == {"ticks"}
        assert {s["resource"]["service.instance.id"] for s in spans} == {node_a, node_b}

        # The request span on A continues the client's trace: its parent is the client's span.
        request = next(s for s in spans if s["parent_span_id"] == client_span)
        assert request["resource"]["service.instance.id"] == node_a
        assert request["kind"] == 2, request  # SPAN_KIND_SERVER
        assert request["attributes"]["http.request.method"] == "POST"
        assert request["attributes"]["http.response.status_code"] in (200, 201)
        assert "read" in request["name"], request

        def chain(span):
            """The span's ancestors in this trace, nearest first, ending at the request span."""
            ancestors = []
            while span["parent_span_id"] in by_id:
                span = by_id[span["parent_span_id"]]
                ancestors.append(span)
            return ancestors

        # The store's write on A, under the request.
        store = next(s for s in spans if s["name"] == "store.write")
        assert store["attributes"]["db.system"] == "postgresql"
        assert request in chain(store)

        # B's socket write: a child of A's events.publish, whose chain leads to A's request.
        fanout = next(s for s in spans if s["name"] == "ws.fanout")
        assert fanout["resource"]["service.instance.id"] == node_b
        parent = by_id[fanout["parent_span_id"]]
        assert parent["name"] == "events.publish" and parent["resource"]["service.instance.id"] == node_a
        assert chain(fanout)[-1] == request
        assert fanout["attributes"]["ticks.ws.connections"] >= 1
        assert fanout["attributes"]["ticks.bus.from_node"] == node_a
        alice_on_b.close()
    finally:
        for node in nodes:
            if node.process.poll() is None:
                assert node.stop() == 0, node.output()
        psql(f"DROP SCHEMA {schema} CASCADE")


def test_without_otel_endpoint_nothing_is_sent(tmp_path, receiver, monkeypatch):
    # Even with OpenTelemetry's own variables pointing at the receiver: only --otel-endpoint
    # (or TICKS_OTEL_ENDPOINT) turns traces on.
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", receiver.url + "/v1/traces")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
    monkeypatch.delenv("TICKS_OTEL_ENDPOINT", raising=False)
    node = TicksProcess(tmp_path / "plain", api_key="plainkey", api_secret=secrets.token_urlsafe(48))
    try:
        assert "traces:" not in node.output()
        client = stream(node)
        client.upsert_users("alice", "bob")
        channel = group(client, "plain", ["alice", "bob"], "alice")
        client.send_message(channel, "alice", "hello", message_id="p1")
        _, _, traceparent = client_traceparent()
        response = client.raw(
            "POST", "/channels/messaging/plain/read", {"user": {"id": "bob"}}, headers={"traceparent": traceparent})
        assert response.status_code in (200, 201), response.text
        # The answer does not echo a trace context either.
        assert "traceparent" not in {k.lower() for k in response.headers}
    finally:
        # A graceful stop would flush an exporter's last batch, were there one.
        assert node.stop() == 0, node.output()
    with receiver.lock:
        assert receiver.requests == 0 and receiver.spans == []
