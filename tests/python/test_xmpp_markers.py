"""bench/xmpp_markers.py, the XMPP generator of bench/compare-ejabberd: its
stream parsing, marker ids and percentiles, and its log-in against a scripted
fake server on loopback. No ejabberd needed; well under a second."""

import asyncio
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import xmpp_markers as x  # noqa: E402

HEADER = (b"<?xml version='1.0'?><stream:stream xmlns='jabber:client' "
          b"xmlns:stream='http://etherx.jabber.org/streams' id='42' from='localhost' version='1.0'>")


def test_stanzas_come_out_whole_however_the_bytes_are_cut():
    stream = (HEADER + b"<stream:features><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'>"
              b"<mechanism>PLAIN</mechanism></mechanisms></stream:features>"
              b"<message from='u@localhost/b' to='v@localhost/b' type='chat'>"
              b"<displayed xmlns='urn:xmpp:chat-markers:0' id='3-7-123456789'/></message>"
              b"<message><body>a &lt; b</body></message>")
    for size in (1, 3, 64, len(stream)):
        parser = x.StanzaParser()
        stanzas = []
        for i in range(0, len(stream), size):
            stanzas.extend(parser.feed(stream[i:i + size]))
        assert [s.tag for s in stanzas] == [
            "{http://etherx.jabber.org/streams}features", "{jabber:client}message", "{jabber:client}message"]
        assert parser.stream_attributes["id"] == "42"
        marker = stanzas[1].find("{urn:xmpp:chat-markers:0}displayed")
        assert x.parse_marker_id(marker.get("id")) == (3, 7, 123456789)
        assert stanzas[2].findtext("{jabber:client}body") == "a < b"
        # Each stanza is let go of once returned: the open root does not grow.
        assert len(parser._root) == 0


def test_the_end_of_the_stream_is_reported():
    parser = x.StanzaParser()
    assert parser.feed(HEADER) == []
    [end] = parser.feed(b"</stream:stream>")
    assert end.tag == "{http://etherx.jabber.org/streams}stream"


def test_marker_round_trip_and_store_hint():
    wire = x.displayed_marker("s1@localhost/bench", x.marker_id(1, 2, 3))
    assert b"<displayed xmlns='urn:xmpp:chat-markers:0' id='1-2-3'/>" in wire and b"urn:xmpp:hints" not in wire
    assert b"<store xmlns='urn:xmpp:hints'/>" in x.displayed_marker("s1@localhost/bench", "1-2-3", store=True)


def test_percentiles_are_nearest_rank_over_every_sample():
    values = list(range(1, 1001))
    assert x.summarize(values) == {"count": 1000, "p50": 500, "p90": 900, "p99": 990, "max": 1000}
    assert x.summarize([5.0])["p99"] == 5.0
    assert x.summarize([])["count"] == 0


def test_log_in_registers_authenticates_and_binds():
    """A scripted server: features, registration conflict (already registered
    is fine), SASL success, restarted stream, bind."""
    seen = []

    async def serve(reader, writer):
        features = (b"<stream:features><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'>"
                    b"<mechanism>PLAIN</mechanism></mechanisms></stream:features>")
        answers = [
            HEADER + features,
            b"<iq type='error' id='reg'><error type='cancel'><conflict "
            b"xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/></error></iq>",
            b"<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>",
            HEADER + b"<stream:features><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'/></stream:features>",
            b"<iq type='result' id='bind'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'>"
            b"<jid>alice@localhost/bench</jid></bind></iq>",
        ]
        for answer in answers:
            seen.append(await reader.read(4096))
            writer.write(answer)
            await writer.drain()
        await reader.read(4096)
        writer.close()

    async def scenario():
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        connection = x.Connection("127.0.0.1", port, "localhost", "alice", "secret")
        await asyncio.wait_for(connection.connect(register=True), 5)
        await connection.close()
        server.close()
        return connection.jid

    assert asyncio.run(scenario()) == "alice@localhost/bench"
    assert b"<username>alice</username>" in seen[1]
    assert b"mechanism='PLAIN'>AGFsaWNlAHNlY3JldA==</auth>" in seen[2]  # base64 of \0alice\0secret
    assert b"<resource>bench</resource>" in seen[4]
