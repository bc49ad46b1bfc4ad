"""The proxy's batch path gives the per-record path's bytes, stats and errors.

Three batch interfaces are checked against their one-at-a-time originals:

* :func:`sslsplit.wire.cut_messages` / :func:`~sslsplit.wire.pull_messages` against
  :meth:`MessageReader.next_message` -- the same messages, and the same error at the same point;
* the splicer's batch mode (``Splicer(rng, batch=N)``: :class:`PayloadsNeeded` /
  :meth:`Splicer.supply_many`) against its per-record mode (:class:`PayloadNeeded` /
  :meth:`Splicer.supply`) -- on random message streams cut at random points, and on a real
  split TLS session whose client must still read the body;
* :meth:`CacheHierarchy.lookup_local_many` against :meth:`CacheHierarchy.lookup_local`.

Both splicers draw IVs from ``random.Random(seed).randbytes``, one stream, so equal bytes mean
equal IVs in equal order.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from dataclasses import asdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sslsplit.cache import CacheHierarchy, MemoryCache
from sslsplit.errors import SplicerMisuse
from sslsplit.splicer import (
    PayloadMismatch,
    PayloadNeeded,
    PayloadsNeeded,
    Splicer,
    SplicerEvent,
    SplicerState,
    StreamEnded,
)
from sslsplit.wire import (
    MAX_FIELD,
    IDEncoding,
    KeyExpose,
    Message,
    MessageReader,
    Stub,
    Verbatim,
    cut_messages,
    payload_id,
    pull_messages,
    push_message,
)
from tests.sslsplit.test_splicer_sansio import recorded_session, splice_message_level
from tls12.errors import DecodeError, RemoteProtocolError
from tls12.events import ApplicationData

V = 0x0303
RECORD_TYPES = [0x14, 0x15, 0x16, 0x17]
Store = dict[tuple[int, bytes], bytes]


# --- random streams of server messages ---------------------------------------------------


@st.composite
def server_streams(draw: st.DrawFn) -> tuple[bytes, Store]:
    """What a splitting server could send: plaintext stubs and records, then up to three
    key-exposes (AES-128, AES-256 or NULL), each followed by stubs with 20- or 32-byte MACs;
    digest payloads in a store."""
    store: Store = {}
    msgs: list[Message] = []

    def stub(mac_length: int) -> Stub:
        t = draw(st.sampled_from(RECORD_TYPES))
        encoding = draw(st.sampled_from(list(IDEncoding)))
        mac = draw(st.binary(min_size=mac_length, max_size=mac_length))
        if encoding is IDEncoding.LITERAL:
            return Stub(t, V, encoding, draw(st.binary(max_size=200)), mac)
        payload = draw(st.sampled_from([b"", b"x" * 1000, bytes(range(256)) * 64]) | st.binary(max_size=300))
        ident = payload_id(encoding, payload)
        store[int(encoding), ident] = payload
        return Stub(t, V, encoding, ident, mac)

    def some(mac_length: int) -> None:
        for _ in range(draw(st.integers(0, 12))):
            if draw(st.booleans()):
                msgs.append(stub(mac_length))
            else:
                msgs.append(Verbatim(draw(st.sampled_from(RECORD_TYPES)), V, draw(st.binary(max_size=300))))

    some(0)
    for _ in range(draw(st.integers(0, 3))):  # after the first, keys as after renegotiations
        key = draw(st.sampled_from([b"", bytes(16), b"k" * 16, b"K" * 32]))  # b"": a NULL suite
        msgs.append(KeyExpose(V, key, draw(st.binary(max_size=16))))
        some(draw(st.sampled_from([20, 32])))
    return b"".join(push_message(m) for m in msgs), store


def chunks_of(stream: bytes, cuts: list[int]) -> list[bytes]:
    bounds = sorted({0, len(stream), *(c % (len(stream) + 1) for c in cuts)})
    return [stream[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def lookup_in(store: Store) -> Callable[[IDEncoding, bytes], bytes]:
    return lambda encoding, ident: store[int(encoding), ident]


def splice_per_record(chunks: list[bytes], lookup: Callable[[IDEncoding, bytes], bytes],
                      seed: int = 9) -> tuple[bytes, Splicer]:
    """The reference: ``Splicer(rng)``, one PayloadNeeded and supply() per digest stub."""
    s = Splicer(random.Random(seed).randbytes)
    out = b""
    for chunk in [*chunks, b""]:
        events = s.receive_data(chunk)
        while events:
            event = events.pop(0)
            if isinstance(event, PayloadNeeded):
                out += s.data_to_send()
                events += s.supply(event.stub, lookup(event.stub.encoding, event.stub.ident))
        out += s.data_to_send()
    assert s.state is SplicerState.ENDED
    return out, s


def splice_batched(chunks: list[bytes], lookup: Callable[[IDEncoding, bytes], bytes], batch: int,
                   seed: int = 9, *, view: bool = False) -> tuple[bytes, Splicer, list[SplicerEvent]]:
    """The batch path: ``Splicer(rng, batch=N)``, one PayloadsNeeded and supply_many() per run."""
    s = Splicer(random.Random(seed).randbytes, batch=batch)
    out = b""
    seen: list[SplicerEvent] = []

    def take() -> bytes:
        return bytes(s.data_to_send_view()) if view else s.data_to_send()

    for chunk in [*chunks, b""]:
        events = s.receive_data(chunk)
        while events:
            event = events.pop(0)
            seen.append(event)
            if isinstance(event, PayloadsNeeded):
                assert 0 < len(event.keys) <= batch
                out += take()  # the runs before may leave now
                events += s.supply_many(event.keys, [lookup(*k) for k in event.keys])
        out += take()
    assert s.state is SplicerState.ENDED
    return out, s, seen


# --- cut_messages / pull_messages vs MessageReader ----------------------------------------


def reader_messages(data: bytes) -> tuple[list[Message], BaseException | None, int]:
    """MessageReader, one message at a time: the messages, the error that stopped it, bytes left."""
    reader = MessageReader()
    reader.feed(data)
    got: list[Message] = []
    try:
        while (msg := reader.next_message()) is not None:
            got.append(msg)
    except RemoteProtocolError as exc:
        return got, exc, reader.buffered
    return got, None, reader.buffered


def batch_messages(data: bytes) -> tuple[list[Message], BaseException | None, int]:
    """pull_messages called until it stops, as the splicer does: same triple as reader_messages."""
    got: list[Message] = []
    pos = 0
    while True:
        try:
            msgs, end = pull_messages(data, pos)
        except RemoteProtocolError as exc:
            return got, exc, len(data) - pos
        if not msgs:
            return got, None, len(data) - pos
        got += msgs
        pos = end


def assert_same_cut(data: bytes) -> None:
    want, want_error, want_left = reader_messages(data)
    got, got_error, got_left = batch_messages(data)
    assert got == want
    assert type(got_error) is type(want_error) and str(got_error) == str(want_error)
    if want_error is None:
        assert got_left == want_left  # (after an error the reader has dropped the bad message)
    cut, end = ([], 0) if got_error is not None and not got else cut_messages(data)
    assert [Stub(m[2], m[3], m[0], m[1], m[4]) if isinstance(m, tuple) else m for m in cut] == want[: len(cut)]


@settings(max_examples=300, deadline=None)
@given(stream=server_streams(), garbage=st.binary(max_size=40), at=st.integers(0, 10_000))
def test_cut_messages_agrees_with_the_reader(stream: tuple[bytes, Store], garbage: bytes, at: int) -> None:
    data = stream[0]
    at %= len(data) + 1
    assert_same_cut(data)
    assert_same_cut(data[:at] + garbage + data[at:])  # garbage anywhere: same messages, same error
    assert_same_cut(data[:at])  # a stream cut short


@settings(max_examples=500, deadline=None)
@given(data=st.binary(max_size=300))
def test_cut_messages_on_garbage(data: bytes) -> None:
    assert_same_cut(data)


@pytest.mark.parametrize(
    "bad",
    [
        b"\x97\x03\x03\x00\x02\x00\x09",  # stub too short for its fields
        b"\x97\x03\x03\x00\x06\x00\x09\x00\x00\x00\x00",  # unknown encoding
        b"\x97\x03\x03\x00\x06\x00\x03\x00\x01x\x00",  # id runs past the end
        b"\x97\x03\x03\x00\x08\x00\x03\x00\x01x\x00\x00z",  # MAC length disagrees / short digest
        b"\x97\x03\x03\x00\x09\x00\x01\x00\x02xy\x00\x00z",  # a byte after the MAC
        b"\x42\x03\x03\x00\x00",  # unknown type
        b"\x17\x03\x03" + (MAX_FIELD + 1).to_bytes(2, "big"),  # oversize verbatim (header alone)
        b"\x58\x03\x03\x00\x03\x00\x09k",  # key-expose vector past the end
        # the common stub's length (a SHA-256 id, a 20-byte MAC) with a field that disagrees:
        b"\x97\x03\x03\x00\x3a\x00\x03\x00\x20" + b"i" * 32 + b"\x00\x13" + b"m" * 20,  # MAC length 19
        b"\x97\x03\x03\x00\x3a\x00\x02\x00\x20" + b"i" * 32 + b"\x00\x14" + b"m" * 20,  # a 32-byte SHA-1 id
        b"\x97\x03\x03\x00\x3a\x00\x03\x00\x1f" + b"i" * 32 + b"\x00\x14" + b"m" * 20,  # id length 31
    ],
)
def test_bad_messages_are_typed_errors_after_the_good_ones(bad: bytes) -> None:
    good = push_message(Verbatim(0x17, V, b"ok")) + push_message(Stub(0x17, V, IDEncoding.LITERAL, b"lit", b""))
    assert_same_cut(bad)
    assert_same_cut(good + bad)
    msgs, end = pull_messages(good + bad)
    assert len(msgs) == 2 and end == len(good)  # the good ones first, then ...
    with pytest.raises(RemoteProtocolError):
        pull_messages(good + bad, end)  # ... the error
    with pytest.raises(TypeError):
        cut_messages(bytearray(good))  # type: ignore[arg-type]  # ids must be hashable bytes


# --- the splicer's batch mode vs its per-record mode ---------------------------------------


@settings(max_examples=200, deadline=None)
@given(stream=server_streams(), cuts=st.lists(st.integers(0, 20_000), max_size=8),
       batch=st.integers(1, 40), view=st.booleans())
def test_batch_mode_gives_the_per_record_bytes(stream: tuple[bytes, Store], cuts: list[int], batch: int,
                                               view: bool) -> None:
    data, store = stream
    chunks = chunks_of(data, cuts)
    want, reference = splice_per_record(chunks, lookup_in(store))
    got, batched, seen = splice_batched(chunks, lookup_in(store), batch, view=view)
    assert got == want
    assert asdict(batched.stats) == asdict(reference.stats)
    assert sum(isinstance(e, StreamEnded) for e in seen) == 1 and isinstance(seen[-1], StreamEnded)


@pytest.mark.parametrize("batch", range(1, 14))
def test_key_changes_inside_a_run(batch: int) -> None:
    """AES, then a NULL key, then AES again: a run draws exactly the IVs its stubs use up to each
    key change, so the IVs of later runs are the per-record path's."""
    store: Store = {}
    msgs: list[Message] = []
    for i, key in enumerate([b"a" * 16, b"", b"b" * 32]):
        msgs.append(KeyExpose(V, key, b""))
        for j in range(3):
            payload = bytes([i, j]) * 50
            store[int(IDEncoding.DIGEST_SHA256), payload_id(IDEncoding.DIGEST_SHA256, payload)] = payload
            msgs.append(Stub(0x17, V, IDEncoding.DIGEST_SHA256, payload_id(IDEncoding.DIGEST_SHA256, payload), bytes(20)))
    data = b"".join(push_message(m) for m in msgs)
    want, _ = splice_per_record([data], lookup_in(store))
    assert splice_batched([data], lookup_in(store), batch)[0] == want


@settings(max_examples=25, deadline=None)
@given(cuts=st.lists(st.integers(0, 100_000), max_size=10), batch=st.integers(1, 64))
def test_batch_mode_on_a_real_session(cuts: list[int], batch: int) -> None:
    chain, stream = recorded_session()
    lookup = lambda encoding, ident: chain.store.get(ident)  # noqa: E731
    got, _, seen = splice_batched(chunks_of(stream, cuts), lookup, batch)  # type: ignore[arg-type]
    assert got == splice_message_level(stream, chain)
    assert sum(len(e.keys) for e in seen if isinstance(e, PayloadsNeeded)) >= 3  # certificate + body


def test_a_client_reads_the_body_through_a_batch_splicer() -> None:
    from tests.sslsplit.split_helpers import Chain
    from tests.sslsplit.test_splicer_sansio import BODY, SUITE

    chain = Chain(SUITE)
    chain.splicer = Splicer(random.Random(1).randbytes, batch=5)

    def to_client(data: bytes, lookup: object = None) -> bytes:
        out = b""
        events = chain.splicer.receive_data(data)
        while events:
            event = events.pop(0)
            if isinstance(event, PayloadsNeeded):
                out += chain.splicer.data_to_send()
                events += chain.splicer.supply_many(event.keys, [chain.store.get(i) for _, i in event.keys])  # type: ignore[misc]
        return out + chain.splicer.data_to_send()

    chain.to_client = to_client  # type: ignore[method-assign, assignment]
    chain.pipe()
    chain.server.send_data(BODY)
    events = chain.client.receive_data(chain.to_client(chain.server.data_to_send()))
    assert b"".join(e.data for e in events if isinstance(e, ApplicationData)) == BODY


def _stream_with_digests() -> tuple[bytes, Store, list[Stub]]:
    payloads = [bytes([i]) * 3000 for i in range(6)]
    stubs = [Stub(0x17, V, IDEncoding.DIGEST_SHA256, hashlib.sha256(p).digest(), bytes(20)) for p in payloads]
    store: Store = {(int(s.encoding), s.ident): p for s, p in zip(stubs, payloads, strict=True)}
    head = push_message(Verbatim(0x16, V, b"hello")) + push_message(KeyExpose(V, b"k" * 16, b"i" * 16))
    return head + b"".join(push_message(s) for s in stubs), store, stubs


def test_supply_many_misuse_and_mismatch_change_nothing() -> None:
    data, store, _ = _stream_with_digests()
    s = Splicer(random.Random(3).randbytes, batch=4)
    (needed,) = s.receive_data(data)
    assert isinstance(needed, PayloadsNeeded) and len(needed.keys) == 2  # run: verbatim, key, 2 stubs
    payloads = [store[int(e), i] for e, i in needed.keys]
    with pytest.raises(SplicerMisuse):
        s.supply_many(list(needed.keys), payloads)  # not the pending keys object
    with pytest.raises(SplicerMisuse):
        s.supply_many(needed.keys, payloads[:1])  # a payload short
    with pytest.raises(SplicerMisuse):
        s.resume(b"")  # a PayloadsNeeded is answered with supply_many()
    with pytest.raises(SplicerMisuse):
        s.supply(Stub(0x17, V, *needed.keys[0], bytes(20)), payloads[0])
    with pytest.raises(PayloadMismatch):
        s.supply_many(needed.keys, [payloads[0], b"poisoned"])
    assert s.state is SplicerState.AWAITING_PAYLOAD and s.data_to_send() == b""
    (more,) = s.supply_many(needed.keys, payloads)  # still pending: the right answer goes on
    assert isinstance(more, PayloadsNeeded) and len(more.keys) == 4
    per_record = Splicer(random.Random(3).randbytes)
    with pytest.raises(SplicerMisuse):
        per_record.supply_many(needed.keys, payloads)  # nothing pending in per-record mode


def test_a_bad_stub_in_a_run_leaves_no_record_and_the_old_key() -> None:
    data, store, stubs = _stream_with_digests()
    bad = push_message(Stub(0x17, V, IDEncoding.DIGEST_SHA256, stubs[0].ident, bytes(17)))  # no 17-byte MAC
    s = Splicer(random.Random(3).randbytes, batch=64)
    (needed,) = s.receive_data(push_message(Verbatim(0x17, V, b"x")) + data + bad)
    assert isinstance(needed, PayloadsNeeded)
    payloads = [store[int(e), i] for e, i in needed.keys]
    stats = asdict(s.stats)
    with pytest.raises(DecodeError):
        s.supply_many(needed.keys, payloads)
    assert s.data_to_send() == b"" and asdict(s.stats) == stats  # no record of the run is out
    assert s._key is None and s._ciphers == {}  # the run's key-expose was undone
    with pytest.raises(DecodeError):  # and the same answer again: it is the server's stream
        s.supply_many(needed.keys, payloads)
    # the per-record path stops at the same stub, with the same error type
    ref = Splicer(random.Random(3).randbytes)
    events = ref.receive_data(push_message(Verbatim(0x17, V, b"x")) + data + bad)
    with pytest.raises(DecodeError):
        while events:
            event = events.pop(0)
            assert isinstance(event, PayloadNeeded)
            events += ref.supply(event.stub, store[int(event.stub.encoding), event.stub.ident])


@settings(max_examples=300, deadline=None)
@given(stream=server_streams(), garbage=st.binary(min_size=1, max_size=30), at=st.integers(0, 10_000),
       batch=st.integers(1, 16))
def test_garbage_gives_the_per_record_error_never_a_crash(stream: tuple[bytes, Store], garbage: bytes,
                                                          at: int, batch: int) -> None:
    """Bad bytes anywhere: the batch path raises what the per-record path raises (a DecodeError
    or RecordOverflow, both RemoteProtocolError), or both splice the same bytes; it never hangs.

    One difference is allowed: a run looks all of its payloads up before it builds a record, so
    when garbage makes both a bad stub and, later in the same run, a stub of an unknown payload,
    the batch path reports the missing payload (KeyError here, CacheMiss in the proxy) and the
    per-record path the bad stub.  Both fail."""
    data, store = stream
    at %= len(data) + 1
    chunks = [data[:at] + garbage + data[at:]]
    runs: list[Callable[[], bytes]] = [lambda: splice_per_record(chunks, lookup_in(store))[0],
                                       lambda: splice_batched(chunks, lookup_in(store), batch)[0]]
    outcomes = []
    for run in runs:
        try:
            outcomes.append(("ok", run()))
        except RemoteProtocolError as exc:
            outcomes.append((type(exc).__name__, b""))
        except KeyError:  # garbage that parses as a digest stub whose payload the store lacks
            outcomes.append(("KeyError", b""))
    (want, want_out), (got, got_out) = outcomes
    if "ok" in (want, got):
        assert got == want and got_out == want_out
    else:
        assert got == want or "KeyError" in (got, want)


def test_batch_argument_is_checked() -> None:
    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(ValueError):
            Splicer(random.Random(0).randbytes, batch=bad)  # type: ignore[arg-type]


def test_a_short_rng_is_a_value_error() -> None:
    data, store, _ = _stream_with_digests()
    def short(n: int) -> bytes:
        return bytes(n - 1)

    s = Splicer(short, batch=8)
    (needed,) = s.receive_data(data)
    assert isinstance(needed, PayloadsNeeded)
    with pytest.raises(ValueError):
        s.supply_many(needed.keys, [store[int(e), i] for e, i in needed.keys])


def test_a_view_kept_alive_is_never_written_under() -> None:
    """A transport may keep the view until it has sent it (uvloop's does): the splicer must
    never write into a buffer a live view shows -- each view keeps the bytes it had."""
    data, store, _ = _stream_with_digests()
    s = Splicer(random.Random(2).randbytes, batch=2)
    events = s.receive_data(data)
    views, taken = [], b""
    while events:
        event = events.pop(0)
        assert isinstance(event, PayloadsNeeded)
        views.append(s.data_to_send_view())  # kept alive, as by a transport that has not sent it
        taken += bytes(views[-1])
        events += s.supply_many(event.keys, [store[int(e), i] for e, i in event.keys])
    views.append(s.data_to_send_view())
    taken += bytes(views[-1])
    assert all(v.readonly for v in views)
    assert b"".join(bytes(v) for v in views) == taken  # no view changed after it was taken
    assert taken == splice_per_record([data], lookup_in(store), seed=2)[0]
    views.clear()  # the views dropped: the buffer is reused, not grown
    s2 = Splicer(random.Random(2).randbytes, batch=2)
    events = s2.receive_data(data)
    while events:
        event = events.pop(0)
        assert isinstance(event, PayloadsNeeded)
        buffer = s2._out.buf
        s2.data_to_send_view()  # taken and dropped at once, as asyncio's transport does
        events += s2.supply_many(event.keys, [store[int(e), i] for e, i in event.keys])
        assert s2._out.buf is buffer or len(s2._out.buf) > len(buffer)


# --- cache lookups ----------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(present=st.lists(st.tuples(st.integers(0, 7), st.sampled_from(["trusted", "checked", "lower", "poisoned"])),
                        max_size=12),
       wanted=st.lists(st.integers(0, 9), max_size=20))
def test_lookup_local_many_is_lookup_local_of_each(present: list[tuple[int, str]], wanted: list[int]) -> None:
    payloads = [bytes([i]) * (100 + i) for i in range(10)]
    keys = [(IDEncoding.DIGEST_SHA256, hashlib.sha256(p).digest()) for p in payloads]

    def hierarchy(verify: bool) -> tuple[CacheHierarchy, list[MemoryCache]]:
        top, lower = MemoryCache(name="top", verify_on_read=verify), MemoryCache(name="lower", verify_on_read=True)
        for i, where in present:
            if where == "lower":
                lower.put(*keys[i], payloads[i])
            elif where == "poisoned":  # a wrong payload under the id (a level changed behind our back)
                top.put(*keys[i], b"evil")
                lower.put(*keys[i], payloads[i])
            else:
                top.put(*keys[i], payloads[i])
        return CacheHierarchy([top, lower]), [top, lower]

    for verify in (False, True):
        (one, one_levels), (many, many_levels) = hierarchy(verify), hierarchy(verify)
        want = [one.lookup_local(*keys[i], count=True) for i in wanted]
        got = many.lookup_local_many([keys[i] for i in wanted], count=True)
        assert got == want
        assert many.stats == one.stats
        assert [list(c._data) for c in many_levels] == [list(c._data) for c in one_levels]  # same LRU order


def test_lookup_local_many_without_get_many_and_without_levels() -> None:
    class Plain:  # a LocalCache with only get/put/discard
        name, verify_on_read = "plain", True

        def __init__(self) -> None:
            self.data: dict[tuple[int, bytes], bytes] = {}

        def get(self, encoding: IDEncoding, ident: bytes) -> bytes | None:
            return self.data.get((int(encoding), ident))

        def put(self, encoding: IDEncoding, ident: bytes, payload: bytes) -> None:
            self.data[int(encoding), ident] = payload

        def discard(self, encoding: IDEncoding, ident: bytes) -> None:
            self.data.pop((int(encoding), ident), None)

    key = (IDEncoding.DIGEST_SHA256, hashlib.sha256(b"p").digest())
    plain = Plain()
    plain.put(*key, b"p")
    h = CacheHierarchy([plain])
    assert h.lookup_local_many([key, (key[0], bytes(32))], count=True) == [b"p", None]
    assert h.stats.hits == {"plain": 1}
    plain.put(key[0], bytes(32), b"not its payload")
    assert h.lookup_local_many([(key[0], bytes(32))]) == [None] and h.stats.poisoned == {"plain": 1}
    assert CacheHierarchy([]).lookup_local_many([key]) == [None]
