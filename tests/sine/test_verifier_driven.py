"""The verifier's sans-IO shape (b"" = end of stream) and a SINE body driven over simulated TCP."""

from __future__ import annotations

import pytest
import simpy

from netsim.drive import ByteSource, Driver, Side
from netsim.link import Duplex, LinkParams
from netsim.tcp import TcpConnection
from sine.algorithms import SigningKey
from sine.errors import BlockMismatch, TruncatedDocument
from sine.format import push_separate_tag
from sine.tag import encode_stream, sign_document
from sine.verifier import BlockVerified, DocumentVerified, StreamVerifier, TagVerified
from tests.sine.chain_backends import chain_backend  # noqa: F401  (autouse: C and Python)

NOW = 1_700_000_000.0
DOC = bytes(range(256)) * 40 + b"end"


def stream(key: SigningKey) -> bytes:
    return b"".join(encode_stream(DOC, sign_document(DOC, "/d", key, NOW)))


def test_empty_data_is_end_of_stream(ed_key: SigningKey) -> None:
    body = stream(ed_key)
    v = StreamVerifier("/d", NOW, public_key=ed_key.verifying_key())
    events = v.receive_data(body)
    assert v.data_to_send() == b""
    assert isinstance(events[0], TagVerified) and not any(
        isinstance(e, DocumentVerified) for e in events[:-1])
    assert v.receive_data(b"") == []                  # complete: the end is fine
    short = StreamVerifier("/d", NOW, public_key=ed_key.verifying_key())
    short.receive_data(body[:-10])
    with pytest.raises(TruncatedDocument):
        short.receive_data(b"")


def test_separate_tag_events_come_with_the_first_call(ed_key: SigningKey) -> None:
    at = push_separate_tag(sign_document(DOC, "/d", ed_key, NOW).separate_tag())
    v = StreamVerifier("/d", NOW, public_key=ed_key.verifying_key(), separate=at)
    events = v.receive_data(DOC[:100])
    assert isinstance(events[0], TagVerified)


def close_when_verified(side: Side, event: object) -> None:
    """The client's application: close its side once the whole document verified."""
    if isinstance(event, DocumentVerified):
        side.shutdown()


@pytest.mark.parametrize("loss", [0.0, 0.1])
def test_sine_body_over_simulated_tcp(ed_key: SigningKey, loss: float) -> None:
    body = stream(ed_key)
    for cut in (len(body), len(body) - 1):
        env = simpy.Environment()
        wire = Duplex(env, LinkParams(1e6, 0.01, loss=loss), seed=4)
        conn = TcpConnection(env, (wire.ab,), (wire.ba,))
        v = StreamVerifier("/d", NOW, public_key=ed_key.verifying_key())
        d = Driver(env, conn, v, ByteSource(body[:cut]), client_app=close_when_verified,
                   server_app=ByteSource.app)
        env.run()
        released = b"".join(x.event.data for x in d.events if isinstance(x.event, BlockVerified))
        if cut == len(body):
            assert released == DOC and d.client.error is None
            assert isinstance(d.events[-1].event, DocumentVerified)
        else:
            assert isinstance(d.client.error, TruncatedDocument)
            assert DOC.startswith(released) and len(released) < len(DOC)
        assert d.client.bytes_received == cut and d.finished_at is not None



def test_tampered_block_fails_closed_mid_stream(ed_key: SigningKey) -> None:
    body = bytearray(stream(ed_key))
    body[len(body) // 2] ^= 1
    env = simpy.Environment()
    wire = Duplex(env, LinkParams(1e6, 0.01))
    conn = TcpConnection(env, (wire.ab,), (wire.ba,))
    v = StreamVerifier("/d", NOW, public_key=ed_key.verifying_key())
    d = Driver(env, conn, v, ByteSource(bytes(body)), client_app=close_when_verified,
               server_app=ByteSource.app)
    env.run()
    released = b"".join(x.event.data for x in d.events if isinstance(x.event, BlockVerified))
    assert isinstance(d.client.error, BlockMismatch)
    assert DOC.startswith(released) and 0 < len(released) < len(DOC) // 2 + 1024
    assert d.client.bytes_received == len(body)     # the rest arrived and was dropped
    assert d.finished_at is not None and conn.a.seq.fin_sent
