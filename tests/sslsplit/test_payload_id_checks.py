"""SSL splitting's payload-id checks: a payload reaches a client only under the id it hashes to.

Written to kill the mutants ``make mutation`` (group ``sslsplit``) found alive: the splicer's
default of checking what it is given, the stub parser's checks of encodings and id lengths, the
cache hierarchy's promotion, poisoning and fall-through to the next source, the writer's choice
between digest and literal stubs and its unpinning of what it published, and the counters the
experiments report.  Everything runs in memory with real objects; the remote payload sources are
small classes implementing the :class:`sslsplit.cache.PayloadSource` protocol (the dependency the
hierarchy talks to), not stand-ins for the code under test.
"""

from __future__ import annotations

import asyncio
import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sslsplit.cache import CacheHierarchy, CacheMiss, MemoryCache
from sslsplit.splicer import PayloadMismatch, PayloadNeeded, Splicer
from sslsplit.store import RecordStore
from sslsplit.wire import (
    STUB_FLAG,
    IDEncoding,
    MessageReader,
    Stub,
    Verbatim,
    payload_id,
    pull_message,
    push_message,
)
from sslsplit.writer import SplittingRecordWriter
from tests.sslsplit.split_helpers import Chain
from tls12.errors import DecodeError
from tls12.events import ApplicationData
from tls12.record import OutgoingRecord, WriteProtection
from tls12.suites import CipherSuite

TLS12 = 0x0303
HANDSHAKE, APPLICATION_DATA = 22, 23
SHA256 = IDEncoding.DIGEST_SHA256


def _splicer() -> Splicer:
    return Splicer(lambda n: bytes(n))


def _record(ctype: int, body: bytes) -> bytes:
    return bytes([ctype, 3, 3, len(body) >> 8, len(body) & 0xFF]) + body


# --- the splicer ------------------------------------------------------------------------------------


def test_rebuild_checks_the_payload_unless_told_it_was_checked() -> None:
    """``rebuild`` refuses a payload whose id is not the stub's (the default), and names the
    id's first 16 hex digits; ``checked=True`` is the caller's promise that it checked."""
    payload, other = b"certificate bytes", b"certificate bytez"
    stub = Stub(HANDSHAKE, TLS12, SHA256, payload_id(SHA256, payload), b"")
    s = _splicer()
    prefix = stub.ident.hex()[:16]
    with pytest.raises(PayloadMismatch, match=f"^payload does not match its DIGEST_SHA256 id {prefix}$"):
        s.rebuild(stub, other)
    assert s.stats.digest == 0
    assert s.rebuild(stub, payload) == _record(HANDSHAKE, payload)
    assert s.rebuild(stub, other, checked=True) == _record(HANDSHAKE, other)
    assert s.stats.digest == 2


def test_supply_answers_only_the_pending_stub_and_checks_it() -> None:
    payload = b"x" * 100
    stub = Stub(APPLICATION_DATA, TLS12, SHA256, payload_id(SHA256, payload), b"")
    s = _splicer()
    [needed] = s.receive_data(push_message(stub))
    assert isinstance(needed, PayloadNeeded) and needed.stub == stub
    look_alike = Stub(APPLICATION_DATA, TLS12, SHA256, stub.ident, b"")
    with pytest.raises(ValueError, match="^supply\\(\\) answers the pending PayloadNeeded, for that stub$"):
        s.supply(look_alike, payload)
    with pytest.raises(PayloadMismatch):
        s.supply(needed.stub, b"y" * 100)
    assert s.supply(needed.stub, payload) == []
    assert s.data_to_send() == _record(APPLICATION_DATA, payload)


def test_splicer_counts_each_kind_of_message() -> None:
    """The counters behind the experiments' byte accounting: one per message of each kind."""
    digest_payload = b"d" * 64
    messages = [
        Verbatim(HANDSHAKE, TLS12, b"server hello"),
        Stub(APPLICATION_DATA, TLS12, IDEncoding.LITERAL, b"literal payload", b""),
        Verbatim(HANDSHAKE, TLS12, b"done"),
        Stub(APPLICATION_DATA, TLS12, SHA256, payload_id(SHA256, digest_payload), b""),
        Stub(APPLICATION_DATA, TLS12, IDEncoding.LITERAL, b"again", b""),
    ]
    s = _splicer()
    [needed] = s.receive_data(b"".join(push_message(m) for m in messages))
    s.supply(needed.stub, digest_payload)
    st_ = s.stats
    assert (st_.messages, st_.verbatim, st_.literal, st_.digest) == (5, 2, 2, 1)
    assert s.data_to_send() == b"".join([
        _record(HANDSHAKE, b"server hello"), _record(APPLICATION_DATA, b"literal payload"),
        _record(HANDSHAKE, b"done"), _record(APPLICATION_DATA, digest_payload),
        _record(APPLICATION_DATA, b"again"),
    ])


# --- the stub parser ----------------------------------------------------------------------------------


def _stub_body(encoding: int, ident: bytes, mac: bytes) -> bytes:
    return (encoding.to_bytes(2, "big") + len(ident).to_bytes(2, "big") + ident
            + len(mac).to_bytes(2, "big") + mac)


def _pull(body: bytes) -> object:
    return pull_message(APPLICATION_DATA | STUB_FLAG, TLS12, body)


@pytest.mark.parametrize("raw", [0, 4, 0x0101, 0x0102, 0x0203, 0xFFFF])
def test_stub_with_an_unknown_encoding_is_refused(raw: int) -> None:
    """The encoding is a 16-bit field: 0x0102 is not DIGEST (2), whatever its low byte says."""
    with pytest.raises(DecodeError, match=f"^unknown id encoding {raw}$"):
        _pull(_stub_body(raw, b"", b""))


@pytest.mark.parametrize(("encoding", "size"), [(IDEncoding.DIGEST, 20), (SHA256, 32)])
def test_digest_ids_must_have_the_digest_length(encoding: IDEncoding, size: int) -> None:
    for n in (0, 1, size - 1, size + 1, 64):
        with pytest.raises(DecodeError, match=f"^digest id of {n} bytes for {encoding.name}$"):
            _pull(_stub_body(encoding, bytes(n), b""))
    stub = _pull(_stub_body(encoding, bytes(size), b"m" * 20))
    assert stub == Stub(APPLICATION_DATA, TLS12, encoding, bytes(size), b"m" * 20)


def test_truncated_stubs_are_refused_with_their_reason() -> None:
    body = _stub_body(SHA256, bytes(32), b"mac")
    with pytest.raises(DecodeError, match="^stub truncated$"):
        _pull(body[:5])
    with pytest.raises(DecodeError, match="^stub id truncated$"):
        _pull(body[:6 + 30])
    with pytest.raises(DecodeError, match="^stub MAC length does not match the message length$"):
        _pull(body[:-1])
    with pytest.raises(DecodeError, match="^stub MAC length does not match the message length$"):
        _pull(body + b"\x00")


@pytest.mark.parametrize("n", [0, 1, 255, 256, 257, 300, 511, 512, 700])
def test_stub_round_trips_at_length_field_boundaries(n: int) -> None:
    """Ids and MACs of 256 bytes and more use the high byte of their length fields."""
    stub = Stub(APPLICATION_DATA, TLS12, IDEncoding.LITERAL, bytes(range(256)) * 3, b"\x01" * n)
    stub = Stub(APPLICATION_DATA, TLS12, IDEncoding.LITERAL, stub.ident[:n], stub.mac)
    reader = MessageReader()
    reader.feed(push_message(stub))
    assert reader.next_message() == stub
    assert reader.buffered == 0


@settings(max_examples=60, deadline=None)
@given(ident=st.binary(max_size=700), mac=st.binary(max_size=700),
       encoding=st.sampled_from([IDEncoding.LITERAL, IDEncoding.DIGEST, SHA256]))
def test_stub_round_trips_with_long_fields(ident: bytes, mac: bytes, encoding: IDEncoding) -> None:
    """Ids and MACs longer than 255 bytes use both bytes of their length fields."""
    if encoding is not IDEncoding.LITERAL:
        ident = hashlib.new(encoding.digest_name or "", ident).digest()
    stub = Stub(APPLICATION_DATA, TLS12, encoding, ident, mac)
    reader = MessageReader()
    reader.feed(push_message(stub))
    assert reader.next_message() == stub
    assert reader.buffered == 0


# --- the cache hierarchy ------------------------------------------------------------------------------


class DictSource:
    """A remote payload source over a dict; ``broken`` raises like an unreachable peer."""

    def __init__(self, name: str, payloads: dict[bytes, bytes], *, broken: bool = False) -> None:
        self.name = name
        self.payloads = payloads
        self.broken = broken
        self.asked = 0

    async def fetch(self, encoding: IDEncoding, ident: bytes) -> bytes | None:
        self.asked += 1
        if self.broken:
            raise OSError("connection refused")
        return self.payloads.get(ident)

    async def close(self) -> None:
        return None


PAYLOAD = b"a cacheable payload" * 10
IDENT = payload_id(SHA256, PAYLOAD)


def test_lookup_local_counts_hits_only_when_asked() -> None:
    """Peers' requests (``lookup_local``) are not this proxy's hits; the proxy's own are."""
    cache = MemoryCache(name="l1")
    h = CacheHierarchy([cache])
    h.put(SHA256, IDENT, PAYLOAD)
    assert h.lookup_local(SHA256, IDENT) == PAYLOAD
    assert h.stats.hits == {}
    assert h.lookup_local(SHA256, IDENT, count=True) == PAYLOAD
    assert h.stats.hits == {"l1": 1}


def test_a_lower_level_hit_is_promoted_to_the_levels_above() -> None:
    l1, l2, l3 = MemoryCache(name="l1"), MemoryCache(name="l2"), MemoryCache(name="l3")
    l3.put(SHA256, IDENT, PAYLOAD)
    h = CacheHierarchy([l1, l2, l3])
    assert h.lookup_local(SHA256, IDENT, count=True) == PAYLOAD
    assert l1.get(SHA256, IDENT) == PAYLOAD and l2.get(SHA256, IDENT) == PAYLOAD
    assert h.stats.hits == {"l3": 1}
    assert h.lookup_local(SHA256, IDENT, count=True) == PAYLOAD
    assert h.stats.hits == {"l3": 1, "l1": 1}


def test_a_poisoned_verified_level_is_skipped_and_cleaned() -> None:
    l1 = MemoryCache(name="l1", verify_on_read=True)
    l2 = MemoryCache(name="l2")
    l1.put(SHA256, IDENT, b"poison")
    l2.put(SHA256, IDENT, PAYLOAD)
    h = CacheHierarchy([l1, l2])
    assert h.lookup_local(SHA256, IDENT) == PAYLOAD
    assert h.stats.poisoned == {"l1": 1}
    assert l1.get(SHA256, IDENT) == PAYLOAD  # the bad entry was replaced by the promotion


def test_a_failing_source_does_not_stop_the_search() -> None:
    """An unreachable source is counted and the next one asked; a lying one is counted as
    poisoned and its payload dropped; the first honest one is served and cached."""
    down = DictSource("down", {}, broken=True)
    liar = DictSource("liar", {IDENT: b"not the payload"})
    honest = DictSource("honest", {IDENT: PAYLOAD})
    local = MemoryCache(name="local")
    h = CacheHierarchy([local], [down, liar, honest])
    assert asyncio.run(h.get(SHA256, IDENT)) == PAYLOAD
    assert (h.stats.source_errors, h.stats.poisoned, h.stats.hits) == (1, {"liar": 1}, {"honest": 1})
    assert local.get(SHA256, IDENT) == PAYLOAD
    assert (down.asked, liar.asked, honest.asked) == (1, 1, 1)


def test_a_miss_everywhere_is_cache_miss_and_counted() -> None:
    down = DictSource("down", {}, broken=True)
    h = CacheHierarchy([MemoryCache()], [down, DictSource("empty", {})])
    for n in (1, 2):
        with pytest.raises(CacheMiss, match=f"^no valid payload for DIGEST_SHA256 id {IDENT.hex()}$"):
            asyncio.run(h.get(SHA256, IDENT))
        assert h.stats.misses == n and h.stats.source_errors == n


# --- the splitting writer -------------------------------------------------------------------------


def _write(writer: SplittingRecordWriter, payloads: list[bytes]) -> list[object]:
    records = [OutgoingRecord(APPLICATION_DATA, TLS12, i, p) for i, p in enumerate(payloads)]
    reader = MessageReader()
    reader.feed(writer.write_records(records, WriteProtection(None, lambda n: bytes(n))))
    out = []
    while (msg := reader.next_message()) is not None:
        out.append(msg)
    return out


def test_writer_sends_a_digest_only_when_it_is_shorter_than_the_payload() -> None:
    """A 32-byte payload under SHA-256 gains nothing from a 32-byte id: it goes literally.
    HTTP heads (dynamic) always go literally.  The counters add up."""
    store = RecordStore()
    writer = SplittingRecordWriter(store, SHA256)
    payloads = [bytes(31), bytes(range(32)), bytes(33), b"HTTP/1.1 200 OK\r\n" + bytes(100), b"x" * 40]
    msgs = _write(writer, payloads)
    encodings = [m.encoding for m in msgs]  # type: ignore[attr-defined]
    assert encodings == [IDEncoding.LITERAL, IDEncoding.LITERAL, SHA256, IDEncoding.LITERAL, SHA256]
    assert msgs[2].ident == payload_id(SHA256, bytes(33))  # type: ignore[attr-defined]
    s = writer.stats
    assert (s.literal_stubs, s.digest_stubs) == (3, 2)
    assert s.payload_bytes == sum(map(len, payloads))
    assert s.digest_payload_bytes == 33 + 40
    assert store.get(payload_id(SHA256, bytes(33))) == bytes(33)
    assert len(store) == 2


def test_writer_release_unpins_everything_it_published() -> None:
    """A connection's payloads stay pinned while it lives and become evictable when it ends."""
    chain = Chain(CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA, RecordStore(max_unpinned_bytes=0))
    chain.pipe()
    chain.server.send_data(bytes(range(256)) * 64)
    events = chain.client.receive_data(chain.to_client(chain.server.data_to_send()))
    assert b"".join(e.data for e in events if isinstance(e, ApplicationData)) == bytes(range(256)) * 64
    assert chain.store.pinned_count > 0
    chain.writer.release()
    assert chain.store.pinned_count == 0
    assert len(chain.store) == 0  # nothing pinned and no room for unpinned bytes: all evicted
