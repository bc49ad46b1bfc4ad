"""The host<->guardian wire format is pinned: frames equal bytes recorded before the codec rewrite.

``vectors/guardian_frames.json`` holds the frames of :data:`GOLDEN_MESSAGES` as the codecs
encoded them before they moved to the ``tls12.buffer`` pull/push style (see
``vectors/README.md``).  Every message must still encode to exactly those bytes and decode from
them to an equal message; Hypothesis then checks, per message type, that any value round-trips
byte-exact.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.webalps_sim.test_protocol import EXAMPLES
from webalps_sim import protocol as p

VECTORS = Path(__file__).parent / "vectors" / "guardian_frames.json"

GOLDEN_MESSAGES: list[object] = [
    *EXAMPLES,
    p.DeriveFinish(b"e" * 256, 0x0303, b"c" * 32, b"s" * 32, 0x002F, True,
                   b"\x01\x00\x00\x02hi", 0x0303, b"f" * 64),
    p.DeriveFinish(b"e" * 128, 0x0301, b"C" * 32, b"S" * 32, 0x0035, False, b"", 0x0301, b""),
    p.DerivedReply(5, 0x003C, b"\x14\x00\x00\x0c" + b"v" * 12, b"w" * 12, 0,
                   b"\x16\x03\x03\x00\x01z"),
    p.Seal(0xFFFFFFFFFFFFFFFF, 0xFFFF, True, ((21, 0x0303, 2**64 - 1, b"a" * 300),)),
    p.Open(1, 2, False, ((0, 22, 0x0301, b""), (1, 23, 0x0302, b"yz"))),
    # ECDHE_RSA (issue 21): the ephemeral key's request and reply, and DERIVE / DERIVE_FINISH
    # naming it (the client's point where RSA has the encrypted premaster)
    p.Ephemeral(0x001D, 0x0401, b"c" * 32, b"s" * 32, 0xC02F),
    p.EphemeralReply(9, 0xC013, b"P" * 32, b"g" * 256),
    p.Derive(b"\x04" + b"q" * 64, 0x0303, b"c" * 32, b"s" * 32, 0xC027, b"h" * 32, 0xFFFFFFFF),
    p.DeriveFinish(b"k" * 32, 0x0303, b"c" * 32, b"s" * 32, 0xC02F, True, b"\x10\x00\x00\x00",
                   0x0303, b"f" * 40, 9),
    p.Error(p.ErrorCode.BAD_KEY_EXCHANGE, "invalid ECDH public value"),
    p.Error(p.ErrorCode.LIMIT, "too many host connections"),
]


def _vectors() -> list[dict[str, object]]:
    data: list[dict[str, object]] = json.loads(VECTORS.read_text())
    return data


def test_every_message_type_has_a_golden_frame() -> None:
    assert len(_vectors()) == len(GOLDEN_MESSAGES)
    assert {type(m) for m in GOLDEN_MESSAGES} == set(p.MESSAGES.values())


@pytest.mark.parametrize("index", range(len(GOLDEN_MESSAGES)))
def test_golden_frame_bytes(index: int) -> None:
    message, vector = GOLDEN_MESSAGES[index], _vectors()[index]
    golden = bytes.fromhex(str(vector["frame"]))
    assert p.message_frame(message, int(vector["request_id"])) == golden  # type: ignore[arg-type]
    (frame,) = p.FrameDecoder().feed(golden)
    assert p.decode_message(frame) == message


# -- Hypothesis: every message type round-trips byte-exact ----------------------------------

u8 = st.integers(0, 0xFF)
u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, 2**32 - 1)
u64 = st.integers(0, 2**64 - 1)
r32 = st.binary(min_size=32, max_size=32)
v1 = st.binary(max_size=255)
v2 = st.binary(max_size=600)
v3 = st.binary(max_size=600)
text = st.text(max_size=40)

STRATEGIES: dict[type, st.SearchStrategy[object]] = {
    p.Hello: st.builds(p.Hello),
    p.Info: st.builds(p.Info, st.lists(v3.filter(bool), max_size=3).map(tuple), v1,
                      text.filter(lambda s: len(s.encode()) < 256), v1),
    p.Derive: st.builds(p.Derive, v2, u16, r32, r32, u16, st.none() | v1.filter(bool), u32),
    p.Ephemeral: st.builds(p.Ephemeral, u16, u16, r32, r32, u16),
    p.EphemeralReply: st.builds(p.EphemeralReply, u64, u16, v1, v2),
    p.Resume: st.builds(p.Resume, u64, u16, r32, r32),
    p.VerifyData: st.builds(p.VerifyData, u64, u16, st.booleans(), v1),
    p.CheckFinished: st.builds(p.CheckFinished, u64, u16, st.booleans(), v1, v1),
    p.Seal: st.builds(p.Seal, u64, u16, st.booleans(),
                      st.lists(st.tuples(u8, u16, u64, v3), max_size=3).map(tuple)),
    p.Open: st.builds(p.Open, u64, u16, st.booleans(),
                      st.lists(st.tuples(u64, u8, u16, v3), max_size=3).map(tuple)),
    p.Release: st.builds(p.Release, u64),
    p.Finish: st.builds(p.Finish, u64, u16, v1, v1, v1, u16),
    p.FinishReply: st.builds(p.FinishReply, st.booleans(), v1, u64, v2),
    p.DeriveFinish: st.builds(p.DeriveFinish, v2, u16, r32, r32, u16, st.booleans(), v3, u16, v2,
                              u32),
    p.DerivedReply: st.builds(p.DerivedReply, u64, u16, v1, v1, u64, v2),
    p.HandleReply: st.builds(p.HandleReply, u64, u16),
    p.DataReply: st.builds(p.DataReply, v2),
    p.BoolReply: st.builds(p.BoolReply, st.booleans()),
    p.Sealed: st.builds(p.Sealed, v2),
    p.Opened: st.builds(p.Opened, st.lists(v3, max_size=3).map(tuple),
                        st.integers(0, 2**32 - 1), v2, st.booleans()),
    p.Ok: st.builds(p.Ok),
    p.Error: st.builds(p.Error, u16, text),
}


def test_every_message_type_has_a_strategy() -> None:
    assert set(STRATEGIES) == set(p.MESSAGES.values())


@pytest.mark.parametrize("cls", list(STRATEGIES), ids=lambda c: c.__name__)
@given(data=st.data())
def test_round_trip_byte_exact(cls: type, data: st.DataObject) -> None:
    message = data.draw(STRATEGIES[cls])
    frame = p.message_frame(message, 1)
    (decoded_frame,) = p.FrameDecoder().feed(frame)
    decoded = p.decode_message(decoded_frame)
    assert decoded == message
    assert p.message_frame(decoded, 1) == frame
