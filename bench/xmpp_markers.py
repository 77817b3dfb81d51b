#!/usr/bin/env python3
"""A light XMPP load generator for bench/compare-ejabberd: N reader → sender
pairs, each user on its own plain TCP connection (no TLS, SASL PLAIN), the
readers sending XEP-0333 'displayed' chat markers to their senders at an
open-loop constant total rate. The send time rides in the marker's id, so the
sender's side needs no shared table; latency is reader's send → sender's
socket reads the marker.

    bench/xmpp_markers.py --port 5322 --pairs 100 --rate 1000 --duration 10 [--register]

Prints one JSON object: achieved rate, latency percentiles (exact, over every
marker), markers missing after a 3 s grace, and this process's own CPU during
the load (user + system, per marker). `--processes K` splits the pairs over K
processes, each with 1/K of the rate; their results are merged.
"""
import argparse
import asyncio
import base64
import json
import math
import multiprocessing
import os
import random
import resource
import sys
import time
import xml.etree.ElementTree as ET

STREAM_NS = "http://etherx.jabber.org/streams"
CLIENT_NS = "jabber:client"
SASL_NS = "urn:ietf:params:xml:ns:xmpp-sasl"
BIND_NS = "urn:ietf:params:xml:ns:xmpp-bind"
REGISTER_NS = "jabber:iq:register"
MARKERS_NS = "urn:xmpp:chat-markers:0"
HINTS_NS = "urn:xmpp:hints"


class StanzaParser:
    """Turns the bytes of one XML stream into its top-level elements (stanzas).

    The stream's root (<stream:stream>) stays open for the life of the
    connection, so a document parser never finishes; expat's pull parser
    yields each child of the root once its end tag arrives, in whatever chunks
    the socket delivered. Each stanza is detached from the root once returned
    so a long stream does not grow in memory."""

    def __init__(self):
        self._parser = ET.XMLPullParser(events=("start", "end"))
        self._depth = 0
        self._root = None
        self.stream_attributes = None

    def feed(self, data):
        self._parser.feed(data)
        stanzas = []
        for event, element in self._parser.read_events():
            if event == "start":
                self._depth += 1
                if self._depth == 1:
                    self._root = element
                    self.stream_attributes = dict(element.attrib)
            else:
                self._depth -= 1
                if self._depth == 1:
                    stanzas.append(element)
                    self._root.remove(element)
                elif self._depth == 0:
                    stanzas.append(element)  # </stream:stream>: the server closed the stream
        return stanzas


def marker_id(pair, sequence, sent_ns):
    """The marker's id: which pair, which marker, and when the reader sent it."""
    return f"{pair}-{sequence}-{sent_ns}"


def parse_marker_id(text):
    pair, sequence, sent_ns = text.split("-")
    return int(pair), int(sequence), int(sent_ns)


def displayed_marker(to, sequence_id, store=False):
    """A message carrying only a 'displayed' chat marker (XEP-0333). With
    `store`, a XEP-0334 hint asks the server to archive it although it has no
    body (ejabberd's mod_mam archives only messages with a body otherwise)."""
    hint = f"<store xmlns='{HINTS_NS}'/>" if store else ""
    return (f"<message to='{to}' type='chat'><displayed xmlns='{MARKERS_NS}' id='{sequence_id}'/>"
            f"{hint}</message>").encode()


def tag(name, ns):
    return f"{{{ns}}}{name}"


class Connection:
    """One client stream: connect, optionally register in-band, SASL PLAIN, bind."""

    def __init__(self, host, port, domain, user, password):
        self.host, self.port, self.domain, self.user, self.password = host, port, domain, user, password
        self.jid = None
        self.reader = self.writer = None
        self.parser = None
        self._pending = []

    async def _open_stream(self):
        self.parser = StanzaParser()
        self._pending = []
        self.writer.write(
            f"<?xml version='1.0'?><stream:stream to='{self.domain}' xmlns='{CLIENT_NS}' "
            f"xmlns:stream='{STREAM_NS}' version='1.0'>".encode())
        features = await self.next_stanza()
        if features.tag != tag("features", STREAM_NS):
            raise RuntimeError(f"{self.user}: expected stream features, got {ET.tostring(features)[:200]}")
        return features

    async def next_stanza(self):
        while not self._pending:
            data = await self.reader.read(65536)
            if not data:
                raise ConnectionError(f"{self.user}: the server closed the connection")
            self._pending.extend(self.parser.feed(data))
        return self._pending.pop(0)

    async def connect(self, register=False):
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        await self._open_stream()
        if register:
            self.writer.write(
                f"<iq type='set' id='reg'><query xmlns='{REGISTER_NS}'><username>{self.user}</username>"
                f"<password>{self.password}</password></query></iq>".encode())
            answer = await self.next_stanza()
            error = answer.find(f"{{{CLIENT_NS}}}error")
            if answer.get("type") != "result" and (error is None or error.get("type") != "cancel"
                                                   or error.find("{urn:ietf:params:xml:ns:xmpp-stanzas}conflict") is None):
                raise RuntimeError(f"{self.user}: registration failed: {ET.tostring(answer)[:300]}")
        token = base64.b64encode(f"\0{self.user}\0{self.password}".encode()).decode()
        self.writer.write(f"<auth xmlns='{SASL_NS}' mechanism='PLAIN'>{token}</auth>".encode())
        answer = await self.next_stanza()
        if answer.tag != tag("success", SASL_NS):
            raise RuntimeError(f"{self.user}: SASL PLAIN failed: {ET.tostring(answer)[:300]}")
        await self._open_stream()
        self.writer.write(
            f"<iq type='set' id='bind'><bind xmlns='{BIND_NS}'><resource>bench</resource></bind></iq>".encode())
        answer = await self.next_stanza()
        jid = answer.find(f"{{{BIND_NS}}}bind/{{{BIND_NS}}}jid")
        if jid is None:
            raise RuntimeError(f"{self.user}: bind failed: {ET.tostring(answer)[:300]}")
        self.jid = jid.text
        await self.writer.drain()

    async def close(self):
        if self.writer:
            try:
                self.writer.write(b"</stream:stream>")
                await self.writer.drain()
                self.writer.close()
            except (ConnectionError, RuntimeError):
                pass


def percentile(sorted_values, fraction):
    """The exact percentile (nearest rank) of every sample."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(round(fraction * len(sorted_values), 9)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def summarize(latencies_ms):
    values = sorted(latencies_ms)
    return {
        "count": len(values),
        "p50": percentile(values, 0.50), "p90": percentile(values, 0.90),
        "p99": percentile(values, 0.99), "max": values[-1] if values else None,
    }


def tree_cpu_seconds(pid):
    """User + system CPU of pid and its live descendants, with the children they reaped."""
    ticks = os.sysconf("SC_CLK_TCK")
    total, pending = 0, [pid]
    while pending:
        current = pending.pop()
        try:
            with open(f"/proc/{current}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            total += sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
            with open(f"/proc/{current}/task/{current}/children") as children:
                pending.extend(int(c) for c in children.read().split())
        except FileNotFoundError:
            continue
    return total / ticks


def process_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def run_pairs(args, first_pair, pair_count, rate, control):
    """Log N pairs in, tell the parent, wait for the common start time, send
    markers open-loop, and report the latencies before closing the streams."""
    password = "bench-password"
    readers, senders = [], []
    for pair in range(first_pair, first_pair + pair_count):
        senders.append(Connection(args.host, args.port, args.domain, f"{args.prefix}s{pair}", password))
        readers.append(Connection(args.host, args.port, args.domain, f"{args.prefix}r{pair}", password))
    batch = 50
    everyone = senders + readers
    for i in range(0, len(everyone), batch):
        await asyncio.gather(*(c.connect(register=args.register) for c in everyone[i:i + batch]))
    control.send("ready")
    start_at = control.recv()  # blocking on purpose: nothing else is due until the start

    latencies = []
    received = 0
    unexpected = 0
    sent = 0

    async def receive(sender):
        nonlocal received, unexpected
        while True:
            try:
                stanza = await sender.next_stanza()
            except (ConnectionError, asyncio.CancelledError):
                return
            now = time.monotonic_ns()
            marker = stanza.find(f"{{{MARKERS_NS}}}displayed")
            if stanza.tag == tag("message", CLIENT_NS) and marker is not None:
                _, _, sent_ns = parse_marker_id(marker.get("id"))
                latencies.append((now - sent_ns) / 1e6)
                received += 1
            else:
                unexpected += 1

    receivers = [asyncio.create_task(receive(s)) for s in senders]
    interval = pair_count / rate
    total = int(round(rate * args.duration))
    per_pair = -(-total // pair_count)

    async def read_loop(index):
        nonlocal sent
        reader, sender = readers[index], senders[index]
        pair = first_pair + index
        offset = random.random() * interval
        for sequence in range(per_pair):
            due = start_at + offset + sequence * interval
            if due >= start_at + args.duration:
                break
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            sent_ns = time.monotonic_ns()
            reader.writer.write(displayed_marker(sender.jid, marker_id(pair, sequence, sent_ns), args.store))
            sent += 1

    await asyncio.sleep(max(0.0, start_at - time.monotonic()))
    cpu_before = process_cpu_seconds()
    load_start = time.monotonic()
    await asyncio.gather(*(read_loop(i) for i in range(pair_count)))
    load_end = time.monotonic()
    grace = time.monotonic() + 3
    while received < sent and time.monotonic() < grace:
        await asyncio.sleep(0.01)
    cpu_after = process_cpu_seconds()
    control.send({
        "sent": sent, "received": received, "unexpected": unexpected, "latencies_ms": latencies,
        "load_seconds": max(load_end - load_start, args.duration),
        "cpu_seconds": cpu_after - cpu_before,
    })
    for task in receivers:
        task.cancel()
    await asyncio.gather(*(c.close() for c in everyone))


def worker(args, first_pair, pair_count, rate, control):
    try:
        asyncio.run(run_pairs(args, first_pair, pair_count, rate, control))
    except Exception as error:  # reported to the parent, which fails the run
        control.send({"error": f"{type(error).__name__}: {error}"})


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5322)
    parser.add_argument("--domain", default="localhost")
    parser.add_argument("--pairs", type=int, default=100)
    parser.add_argument("--rate", type=float, default=1000, help="markers per second, in total")
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--prefix", default="u", help="user names are PREFIXsN and PREFIXrN")
    parser.add_argument("--register", action="store_true", help="register the users in-band first (XEP-0077)")
    parser.add_argument("--store", action="store_true", help="add a XEP-0334 store hint (for MAM)")
    parser.add_argument("--server-pid", type=int, help="also report this process's CPU (and its children's) over the load")
    args = parser.parse_args()

    shares = [args.pairs // args.processes + (1 if i < args.pairs % args.processes else 0)
              for i in range(args.processes)]
    workers, controls, first = [], [], 0
    for share in shares:
        parent_end, child_end = multiprocessing.Pipe()
        process = multiprocessing.Process(
            target=worker, args=(args, first, share, args.rate * share / args.pairs, child_end))
        process.start()
        child_end.close()  # so a worker that dies shows as EOFError here, not a hang
        workers.append(process)
        controls.append(parent_end)
        first += share
    answers = [control.recv() for control in controls]
    failed = [a["error"] for a in answers if isinstance(a, dict) and "error" in a]
    if failed:
        print("\n".join(failed), file=sys.stderr)
        sys.exit(1)
    # Everyone is logged in: one start time for all (CLOCK_MONOTONIC is the machine's).
    start_at = time.monotonic() + 0.5
    for control in controls:
        control.send(start_at)
    server_cpu_before = None
    if args.server_pid:
        time.sleep(max(0.0, start_at - time.monotonic()))
        server_cpu_before = tree_cpu_seconds(args.server_pid)
    parts = [control.recv() for control in controls]
    server_cpu = tree_cpu_seconds(args.server_pid) - server_cpu_before if args.server_pid else None
    for process in workers:
        process.join()
    errors = [p["error"] for p in parts if "error" in p]
    if errors:
        print("\n".join(errors), file=sys.stderr)
        sys.exit(1)
    sent = sum(p["sent"] for p in parts)
    received = sum(p["received"] for p in parts)
    latencies = [value for p in parts for value in p["latencies_ms"]]
    load_seconds = max(p["load_seconds"] for p in parts)
    cpu = sum(p["cpu_seconds"] for p in parts)
    summary = summarize(latencies)
    result = {
        "scenario": "xmpp-markers",
        "params": {"pairs": args.pairs, "rate": args.rate, "duration": args.duration, "processes": args.processes,
                   "store": args.store},
        "sent": sent, "received": received, "missing": sent - received,
        "unexpected_stanzas": sum(p["unexpected"] for p in parts),
        "achieved_rate": round(received / load_seconds, 1),
        "latency_ms": {k: (round(v, 3) if isinstance(v, float) else v) for k, v in summary.items()},
        "generator_cpu_seconds": round(cpu, 3),
        "server_cpu_seconds": round(server_cpu, 3) if server_cpu is not None else None,
        "server_cpu_us_per_marker": round(server_cpu / received * 1e6, 1) if server_cpu is not None and received else None,
        "generator_cpu_us_per_marker": round(cpu / received * 1e6, 1) if received else None,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
