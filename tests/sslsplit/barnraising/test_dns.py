"""The authoritative responder: the sans-IO answers (every row of :mod:`.zone`'s table), then
the UDP/TCP server queried by unmodified clients -- ``dig`` (bind9-dnsutils) and dnspython's
resolver -- and fuzzed with random bytes while it keeps answering."""

from __future__ import annotations

import asyncio
import random
import shutil
import socket

import dns.asyncresolver
import dns.edns
import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdatatype
import dns.resolver
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sslsplit.barnraising.aio.dns import DNSServer
from sslsplit.barnraising.zone import Responder, TCPConnection, default_zones

LIVE = {"www.news.test": ["127.0.0.2", "127.0.0.3", "127.0.0.4", "::2"],
        "empty.news.test": []}
DIG = shutil.which("dig")


def responder(**options: object) -> Responder:
    return Responder(["news.test"], LIVE.get, **options)  # type: ignore[arg-type]


def ask(r: Responder, name: str, rdtype: str = "A", **kw: object) -> dns.message.Message:
    query = dns.message.make_query(name, rdtype, **kw)  # type: ignore[arg-type]
    wire = r.respond(query.to_wire())
    assert wire is not None
    reply = dns.message.from_wire(wire)
    assert reply.id == query.id and reply.flags & dns.flags.QR
    return reply


def addresses(reply: dns.message.Message) -> list[str]:
    return [rd.to_text() for rrset in reply.answer for rd in rrset]


def test_a_answers_rotate_round_robin() -> None:
    r = responder(ttl=20)
    first = ask(r, "www.news.test")
    assert first.rcode() == dns.rcode.NOERROR and first.flags & dns.flags.AA
    assert first.answer[0].ttl == 20
    seen = [addresses(ask(r, "WWW.news.test."))[0] for _ in range(3)]
    assert sorted(addresses(first)) == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    assert [addresses(first)[0], *seen] == ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.2"]


def test_cached_answers_follow_the_live_set() -> None:
    live = {"www.news.test": ("127.0.0.2",)}
    r = Responder(["news.test"], live.get)
    for _ in range(3):  # the repeats are served from the answer cache, each with its own id
        assert addresses(ask(r, "www.news.test")) == ["127.0.0.2"]
    live["www.news.test"] = ("127.0.0.3", "127.0.0.4")  # a new object: the set changed
    assert sorted(addresses(ask(r, "www.news.test"))) == ["127.0.0.3", "127.0.0.4"]
    live["www.news.test"] = ()
    assert addresses(ask(r, "www.news.test")) == []


def test_aaaa_any_and_nodata() -> None:
    r = responder()
    assert addresses(ask(r, "www.news.test", "AAAA")) == ["::2"]
    assert len(addresses(ask(r, "www.news.test", "ANY"))) == 4
    for name, rdtype in (("www.news.test", "MX"), ("empty.news.test", "A")):
        reply = ask(r, name, rdtype)
        assert reply.rcode() == dns.rcode.NOERROR and not reply.answer
        assert reply.authority[0].rdtype == dns.rdatatype.SOA  # negative caching


def test_nxdomain_refused_soa_notimp() -> None:
    r = responder(ttl=7)
    nx = ask(r, "nope.news.test")
    assert nx.rcode() == dns.rcode.NXDOMAIN and nx.authority[0][0].minimum == 7
    assert ask(r, "example.org").rcode() == dns.rcode.REFUSED
    assert ask(r, "www.news.test", rdclass="CH").rcode() == dns.rcode.REFUSED
    soa = ask(r, "news.test", "SOA")
    assert soa.rcode() == dns.rcode.NOERROR and soa.answer[0].rdtype == dns.rdatatype.SOA
    notify = dns.message.make_query("news.test", "SOA")
    notify.set_opcode(dns.opcode.NOTIFY)
    reply = dns.message.from_wire(r.respond(notify.to_wire()))  # type: ignore[arg-type]
    assert reply.rcode() == dns.rcode.NOTIMP


def test_malformed_queries() -> None:
    r = responder()
    assert r.respond(b"\x12\x34") is None  # no header: nothing to answer to
    response = dns.message.make_response(dns.message.make_query("www.news.test", "A"))
    assert r.respond(response.to_wire()) is None  # never answer a response
    wire = dns.message.make_query("www.news.test", "A").to_wire()
    reply = dns.message.from_wire(r.respond(wire[:-3]))  # type: ignore[arg-type]
    assert reply.rcode() == dns.rcode.FORMERR and reply.id == int.from_bytes(wire[:2], "big")


def test_udp_truncation_sets_tc() -> None:
    many = {"www.news.test": [f"2001:db8::{i:x}" for i in range(1, 60)]}
    r = Responder(["news.test"], many.get, max_answers=100)
    wire = dns.message.make_query("www.news.test", "AAAA").to_wire()
    reply = dns.message.from_wire(r.respond(wire, max_size=4096))  # type: ignore[arg-type]
    assert reply.flags & dns.flags.TC and not reply.answer
    full = dns.message.from_wire(r.respond(wire))  # type: ignore[arg-type]  (TCP)
    assert len(addresses(full)) == 59


def test_default_zones() -> None:
    assert default_zones(["www.news.test", "mirror.news.test", "solo"]) == ["news.test", "solo"]


@given(st.binary(max_size=600))
@settings(max_examples=1000, deadline=None)
def test_responder_fuzz_random_bytes(data: bytes) -> None:
    reply = responder().respond(data)
    if reply is not None:
        assert dns.message.from_wire(reply).flags & dns.flags.QR


@given(st.integers(0, 10**9), st.integers(1, 8))
@settings(max_examples=500, deadline=None)
def test_responder_fuzz_mutated_queries(seed: int, flips: int) -> None:
    rng = random.Random(seed)
    wire = bytearray(dns.message.make_query("www.news.test", "A", use_edns=True).to_wire())
    for _ in range(flips):
        wire[rng.randrange(len(wire))] = rng.randrange(256)
    reply = responder().respond(bytes(wire))
    if reply is not None:
        assert dns.message.from_wire(reply).id == int.from_bytes(wire[:2], "big")


def _query(rng: random.Random) -> bytes:
    """A random query a resolver might send: 0x20 case, EDNS with a cookie or padding, RD."""
    name = rng.choice(["www.news.test", "www.news.test", "WWW.news.test", "empty.news.test",
                       "nope.news.test", "news.test"])
    options = []
    if rng.random() < 0.5:
        options.append(dns.edns.GenericOption(dns.edns.OptionType.COOKIE, rng.randbytes(8)))
    if rng.random() < 0.1:
        options.append(dns.edns.GenericOption(dns.edns.OptionType.PADDING, b""))
    query = dns.message.make_query(
        name, rng.choice(["A", "A", "AAAA", "ANY", "MX"]), use_edns=rng.choice([False, 0]),
        payload=rng.choice([512, 4096]), options=options or None)
    if rng.random() < 0.3:
        query.flags &= ~dns.flags.RD
    query.id = rng.randrange(65536)
    return query.to_wire()


@given(st.integers(0, 10**9))
@settings(max_examples=60, deadline=None)
def test_answer_caches_give_the_bytes_dnspython_renders(seed: int) -> None:
    """With its caches the responder answers byte for byte what it renders without them,
    rotation included, whatever the case, cookies, EDNS and flags of the queries."""
    rng = random.Random(seed)
    pool = [_query(rng) for _ in range(12)]
    cached, uncached = responder(), responder(max_cached=0)
    for _ in range(80):
        wire = rng.choice(pool)
        if rng.random() < 0.3:  # same question, new id
            wire = rng.randbytes(2) + wire[2:]
        size = rng.choice([512, 4096, 65535])
        assert cached.respond(wire, max_size=size) == uncached.respond(wire, max_size=size)


def test_queries_differing_only_in_cookie_share_the_rendered_answer() -> None:
    r = responder()
    replies = []
    for i in range(7):
        cookie = dns.edns.GenericOption(dns.edns.OptionType.COOKIE, i.to_bytes(8, "big"))
        query = dns.message.make_query("wWw.News.test", "A", use_edns=0, options=[cookie])
        reply = dns.message.from_wire(r.respond(query.to_wire()))  # type: ignore[arg-type]
        assert reply.id == query.id and reply.question[0].name.labels[0] == b"wWw"
        replies.append(addresses(reply)[0])
    assert replies == ["127.0.0.2", "127.0.0.3", "127.0.0.4"] * 2 + ["127.0.0.2"]
    assert len(r._by_question) == 1 and len(r._by_wire) == 7  # one question, seven queries


def test_max_cached_bounds_the_caches() -> None:
    r = responder(max_cached=2)
    for name in ("www.news.test", "WWW.news.test", "wWw.news.test"):
        ask(r, name)
    assert len(r._by_question) <= 2 and len(r._by_wire) <= 2
    off = responder(max_cached=0)
    ask(off, "www.news.test")
    assert not off._by_question and not off._by_wire
    with pytest.raises(ValueError):
        responder(max_cached=-1)


@given(st.lists(st.integers(1, 40), min_size=1, max_size=30))
@settings(max_examples=200, deadline=None)
def test_tcp_framing_whatever_the_chunks(cuts: list[int]) -> None:
    """Queries with two-byte length prefixes, cut anywhere: every one answered, in order."""
    queries = [dns.message.make_query(n, "A") for n in ("www.news.test", "nope.news.test",
                                                          "www.news.test")]
    stream = b"".join(len(w).to_bytes(2, "big") + w for w in (q.to_wire() for q in queries))
    conn = TCPConnection(responder())
    out, i = b"", 0
    for cut in cuts * (len(stream) // sum(cuts) + 1):
        conn.receive_data(stream[i:i + cut])
        out += conn.data_to_send()
        i += cut
        if i >= len(stream):
            break
    replies = []
    while out:
        n = int.from_bytes(out[:2], "big")
        replies.append(dns.message.from_wire(out[2:2 + n]))
        out = out[2 + n:]
    assert [r.id for r in replies] == [q.id for q in queries] and not conn.closed
    assert [r.rcode() for r in replies] == [dns.rcode.NOERROR, dns.rcode.NXDOMAIN,
                                            dns.rcode.NOERROR]


def test_tcp_connection_ends_on_a_query_it_cannot_answer_and_at_end_of_stream() -> None:
    conn = TCPConnection(responder())
    conn.receive_data(b"\x00\x03abc" + b"\x00\x01")  # 3 bytes: no header to answer to
    assert conn.closed and conn.data_to_send() == b""
    conn.receive_data(b"\x00")  # nothing is read after the end
    assert conn.data_to_send() == b""
    eof = TCPConnection(responder())
    eof.receive_data(b"")
    assert eof.closed


# --- on sockets, with real clients ---------------------------------------------------------


def test_dig_is_installed() -> None:
    assert DIG is not None, "dig not found: install bind9-dnsutils (apt-get install bind9-dnsutils)"


async def _dig(port: int, *args: str) -> str:
    assert DIG is not None
    proc = await asyncio.create_subprocess_exec(
        DIG, "@127.0.0.1", "-p", str(port), "+time=5", "+tries=3", *args,  # patient under load
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    # under load dig may retry and print ";; communications error to ...: timed out" on
    # stdout, even with +short: that note is not the answer
    return "".join(line for line in out.decode().splitlines(keepends=True)
                   if not line.startswith(";; communications error"))


async def _serve_and_query() -> None:
    server = DNSServer(responder())
    await server.start("127.0.0.1", 0)
    try:
        port = server.port
        short = (await _dig(port, "www.news.test", "A", "+short")).split()
        assert sorted(short) == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
        tcp = (await _dig(port, "www.news.test", "AAAA", "+short", "+tcp")).split()
        assert tcp == ["::2"]
        assert "status: NXDOMAIN" in await _dig(port, "nope.news.test", "A")
        assert "status: REFUSED" in await _dig(port, "example.org", "A")

        resolver = dns.asyncresolver.Resolver(configure=False)
        resolver.nameservers, resolver.port = ["127.0.0.1"], port
        resolver.lifetime = 15.0  # patient under load, as dig is above
        answer = await resolver.resolve("www.news.test", "A")
        assert sorted(rd.to_text() for rd in answer) == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
        assert answer.rrset is not None and answer.rrset.ttl == 20
        with pytest.raises(dns.resolver.NXDOMAIN):
            await resolver.resolve("nope.news.test", "A")

        # malformed datagrams: FORMERR (or silence), and the next good query is answered
        loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setblocking(False)
        sock.connect(("127.0.0.1", port))
        good = dns.message.make_query("www.news.test", "A").to_wire()
        await loop.sock_sendall(sock, good[:-3])
        formerr = dns.message.from_wire(await asyncio.wait_for(loop.sock_recv(sock, 4096), 2))
        assert formerr.rcode() == dns.rcode.FORMERR
        rng = random.Random(13)
        for _ in range(300):
            await loop.sock_sendall(sock, rng.randbytes(rng.randrange(0, 200)))
        sock.close()
        assert sorted((await _dig(port, "www.news.test", "+short")).split())[0] == "127.0.0.2"

        # a broken TCP frame closes that connection only
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"\x00\x05abc")
        writer.write_eof()
        assert await asyncio.wait_for(reader.read(), 5) == b""
        writer.close()
        assert (await _dig(port, "www.news.test", "+short", "+tcp")).split()
        assert server.responder.malformed >= 1
    finally:
        await server.close()


def test_dig_and_dnspython_against_the_server() -> None:
    asyncio.run(_serve_and_query())
