"""The hand-written codecs of the hot messages (:mod:`webalps_sim._wire`) against the reference.

The declarative codec (:mod:`webalps_sim.codec`, each message's ``LAYOUT``) is the reference:
on random messages both give the same bytes and decode them to the same message, and on
damaged payloads the fast decoder accepts nothing the reference rejects (it answers ``None``
and the reference names the fault), nor decodes anything differently.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tls12.buffer import Buffer, Writer
from webalps_sim import _wire
from webalps_sim import protocol as p

U8 = st.integers(0, 0xFF)
U16 = st.integers(0, 0xFFFF)
U64 = st.integers(0, (1 << 64) - 1)
DATA = st.binary(max_size=300)

OPENS = st.builds(p.Open, U64, U16, st.booleans(),
                  st.lists(st.tuples(U64, U8, U16, DATA), max_size=4).map(tuple))
SEALS = st.builds(p.Seal, U64, U16, st.booleans(),
                  st.lists(st.tuples(U8, U16, U64, DATA), max_size=4).map(tuple))
OPENEDS = st.builds(p.Opened, st.lists(DATA, max_size=4).map(tuple),
                    st.integers(0, (1 << 32) - 1), DATA, st.booleans())
HOT = st.one_of(OPENS, SEALS, OPENEDS, st.builds(p.Sealed, DATA), st.builds(p.Release, U64))


def reference_payload(message: p.Message) -> bytes:
    w = Writer()
    p.push_message(w, message)
    return w.getvalue()


def reference_decode(frame_type: int, payload: bytes) -> Any:
    return p.pull_message(Buffer(payload), p.MESSAGES[frame_type])


@settings(max_examples=300)
@given(HOT)
def test_fast_codecs_give_the_reference_bytes_and_messages(message: p.Message) -> None:
    payload = reference_payload(message)
    assert _wire.ENCODERS[type(message)](message) == payload
    assert message.to_payload() == payload
    fast = _wire.DECODERS[message.TYPE](payload)
    assert fast == reference_decode(message.TYPE, payload) == message
    assert type(fast) is type(message)
    assert p.decode_message(p.Frame(message.TYPE, 1, payload)) == message


@settings(max_examples=500)
@given(HOT, st.data())
def test_fast_decoders_take_nothing_the_reference_rejects(message: p.Message, data: st.DataObject) -> None:
    payload = bytearray(reference_payload(message))
    damage = data.draw(st.sampled_from(["cut", "extend", "overwrite"]))
    if damage == "cut" and payload:
        del payload[data.draw(st.integers(0, len(payload) - 1)):]
    elif damage == "extend":
        payload += data.draw(st.binary(min_size=1, max_size=4))
    elif payload:  # the head (handle, suite, flag, count) half the time
        head = st.integers(0, min(len(payload), 16) - 1)
        payload[data.draw(st.one_of(head, st.integers(0, len(payload) - 1)))] = data.draw(U8)
    raw = bytes(payload)
    fast = _wire.DECODERS[message.TYPE](raw)
    try:
        reference = reference_decode(message.TYPE, raw)
    except p.ProtocolError:
        assert fast is None
        with pytest.raises(p.ProtocolError):
            p.decode_message(p.Frame(message.TYPE, 1, raw))
        return
    assert fast is None or fast == reference
    assert p.decode_message(p.Frame(message.TYPE, 1, raw)) == reference


@pytest.mark.parametrize("message", [
    p.Open(1, 0x2F, True, ((-1, 23, 0x0303, b"x"),)),
    p.Seal(1, 0x2F, False, ((23, 0x10000, 1, b"x"),)),
    p.Seal(1, 0x2F, False, ((23, 0x0303, 1),)),  # type: ignore[arg-type]  # a record of the wrong shape
    p.Seal(1, 0x2F, False, ((23, 0x0303, 1, "text"),)),  # type: ignore[arg-type]  # text, not bytes
    p.Opened((b"x" * (1 << 24),)),
    p.Sealed(5),  # type: ignore[arg-type]  # not bytes
    p.Release(1 << 64),
])
def test_what_the_reference_refuses_to_encode_is_refused(message: p.Message) -> None:
    with pytest.raises(_wire.ENCODE_ERRORS):
        _wire.ENCODERS[type(message)](message)
    with pytest.raises(Exception) as reference:
        reference_payload(message)
    with pytest.raises(type(reference.value)):
        message.to_payload()
