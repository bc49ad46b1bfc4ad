"""The splicer's sans-IO shape: receive_data / PayloadNeeded / supply / data_to_send, b"" = EOF."""

from __future__ import annotations

import random
from functools import lru_cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sslsplit.splicer import (
    PayloadNeeded,
    Splicer,
    StreamEnded,
    TruncatedMessage,
)
from sslsplit.wire import Stub
from tests.sslsplit.split_helpers import Chain
from tls12.errors import DecodeError
from tls12.events import ApplicationData
from tls12.suites import CipherSuite

SUITE = CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA
BODY = random.Random(5).randbytes(40_000)


@lru_cache(maxsize=1)
def recorded_session() -> tuple[Chain, bytes]:
    """A full split session; returns the chain and every byte the server sent the proxy."""
    chain = Chain(SUITE)
    streams: list[bytes] = []
    original = chain.to_client

    def recording(stream: bytes, lookup=None) -> bytes:  # type: ignore[no-untyped-def]
        streams.append(stream)
        return original(stream, lookup)

    chain.to_client = recording  # type: ignore[method-assign]
    chain.pipe()
    chain.server.send_data(BODY)
    events = chain.client.receive_data(chain.to_client(chain.server.data_to_send()))
    assert b"".join(e.data for e in events if isinstance(e, ApplicationData)) == BODY
    return chain, b"".join(streams)


def seeded_splicer() -> Splicer:
    return Splicer(random.Random(9).randbytes)


def splice_message_level(stream: bytes, chain: Chain) -> bytes:
    """The message-level API, one message at a time (the reference)."""
    s = seeded_splicer()
    s.feed(stream)
    out = b""
    while (msg := s.next_message()) is not None:
        data = s.handle(msg)
        out += data if data is not None else s.rebuild(msg, chain.store.get(msg.ident))  # type: ignore[arg-type, union-attr]
    return out


def splice_sans_io(stream: bytes, chain: Chain, cuts: list[int]) -> tuple[bytes, list[object]]:
    s = seeded_splicer()
    out = b""
    seen: list[object] = []
    bounds = sorted({0, len(stream), *(c % (len(stream) + 1) for c in cuts)})
    chunks = [stream[a:b] for a, b in zip(bounds, bounds[1:], strict=False)] + [b""]
    for chunk in chunks:
        events = s.receive_data(chunk)
        while events:
            event = events.pop(0)
            seen.append(event)
            if isinstance(event, PayloadNeeded):
                assert s.waiting is event.stub
                out += s.data_to_send()           # records before the stub may leave now
                assert s.data_to_send() == b""
                events += s.supply(event.stub, chain.store.get(event.stub.ident))  # type: ignore[arg-type]
        out += s.data_to_send()
    return out, seen


@settings(max_examples=25, deadline=None)
@given(cuts=st.lists(st.integers(0, 100_000), max_size=10))
def test_any_chunking_gives_the_message_level_bytes(cuts: list[int]) -> None:
    chain, stream = recorded_session()
    out, seen = splice_sans_io(stream, chain, cuts)
    assert out == splice_message_level(stream, chain)
    assert isinstance(seen[-1], StreamEnded) and sum(isinstance(e, StreamEnded) for e in seen) == 1
    assert sum(isinstance(e, PayloadNeeded) for e in seen) >= 3   # certificate + body records


def test_stub_holds_later_messages_until_supplied() -> None:
    chain, stream = recorded_session()
    s = seeded_splicer()
    events = s.receive_data(stream)
    assert len(events) == 1 and isinstance(events[0], PayloadNeeded)
    first = events[0].stub
    before = s.data_to_send()
    assert s.receive_data(b"") == []                # EOF noted; the stub is still pending
    events = s.supply(first, chain.store.get(first.ident))  # type: ignore[arg-type]
    while not isinstance(events[-1], StreamEnded):
        stub = events[-1].stub                      # type: ignore[attr-defined]
        events = s.supply(stub, chain.store.get(stub.ident))  # type: ignore[arg-type]
    assert before + s.data_to_send() == splice_message_level(stream, chain)


def test_end_of_stream_inside_a_message_and_misuse() -> None:
    chain, stream = recorded_session()
    s = seeded_splicer()
    events = s.receive_data(stream[:3])
    assert events == [] and s.pending == 3
    with pytest.raises(TruncatedMessage) as info:
        s.receive_data(b"")
    assert info.value.pending == 3 and isinstance(info.value, DecodeError)
    s = seeded_splicer()
    with pytest.raises(ValueError):
        s.resume(b"")                                # nothing pending
    (needed,) = s.receive_data(stream)
    assert isinstance(needed, PayloadNeeded)
    other = Stub(needed.stub.content_type, needed.stub.version, needed.stub.encoding,
                 needed.stub.ident, needed.stub.mac)
    with pytest.raises(ValueError):
        s.supply(other, b"")                         # not the pending stub object
    empty = seeded_splicer()
    assert empty.receive_data(b"") == [StreamEnded()]
    with pytest.raises(DecodeError):
        empty.receive_data(b"late")
