"""The proxy--server message codec: byte-exact round trips, the paper's layout, fuzzing."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sslsplit.wire import (
    KEY_EXPOSE_TYPE,
    MAX_FIELD,
    IDEncoding,
    KeyExpose,
    MessageReader,
    Stub,
    Verbatim,
    check_payload,
    payload_id,
    push_message,
)
from tls12.errors import RemoteProtocolError

record_types = st.sampled_from([0x14, 0x15, 0x16, 0x17])
stubs = st.builds(
    Stub,
    content_type=record_types,
    version=st.just(0x0303),
    encoding=st.just(IDEncoding.LITERAL),
    ident=st.binary(max_size=300),
    mac=st.binary(max_size=32),
) | st.builds(
    lambda t, payload, mac: Stub(t, 0x0303, IDEncoding.DIGEST_SHA256, hashlib.sha256(payload).digest(), mac),
    record_types,
    st.binary(max_size=100),
    st.binary(max_size=32),
)
messages = stubs | st.builds(Verbatim, record_types, st.just(0x0303), st.binary(max_size=300)) | st.builds(
    KeyExpose, st.just(0x0303), st.binary(max_size=32), st.binary(max_size=16)
)


@given(msgs=st.lists(messages, max_size=8), cut=st.integers(1, 50))
def test_stream_round_trip_any_chunking(msgs: list, cut: int) -> None:
    wire = b"".join(push_message(m) for m in msgs)
    reader = MessageReader()
    got = []
    for i in range(0, len(wire), cut):
        reader.feed(wire[i : i + cut])
        while (m := reader.next_message()) is not None:
            got.append(m)
    assert got == msgs and reader.buffered == 0
    assert b"".join(push_message(m) for m in got) == wire


def test_layout_matches_figures_4_and_5() -> None:
    stub = push_message(Stub(0x17, 0x0303, IDEncoding.DIGEST, b"i" * 20, b"m" * 20))
    assert stub[0] == 0x97 and stub[1:3] == b"\x03\x03"
    assert int.from_bytes(stub[3:5], "big") == 6 + 20 + 20 == len(stub) - 5
    assert stub[5:7] == b"\x00\x02" and stub[7:9] == b"\x00\x14"
    ke = push_message(KeyExpose(0x0303, b"k" * 16, b"v" * 16))
    assert ke[0] == KEY_EXPOSE_TYPE and int.from_bytes(ke[3:5], "big") == 4 + 16 + 16


def test_payload_ids() -> None:
    assert payload_id(IDEncoding.DIGEST, b"abc") == hashlib.sha1(b"abc").digest()
    assert payload_id(IDEncoding.DIGEST_SHA256, b"abc") == hashlib.sha256(b"abc").digest()
    assert payload_id(IDEncoding.LITERAL, b"abc") == b"abc"
    assert check_payload(IDEncoding.DIGEST_SHA256, hashlib.sha256(b"x").digest(), b"x")
    assert not check_payload(IDEncoding.DIGEST_SHA256, hashlib.sha256(b"x").digest(), b"y")


@pytest.mark.parametrize(
    "bad",
    [
        b"\x97\x03\x03\x00\x02\x00\x09",  # unknown encoding
        b"\x97\x03\x03\x00\x06\x00\x03\x00\x01x\x00",  # truncated vector
        b"\x97\x03\x03\x00\x08\x00\x03\x00\x01x\x00\x00z",  # trailing byte / short digest
        b"\x42\x03\x03\x00\x00",  # unknown type
        b"\x17\x03\x03" + (MAX_FIELD + 1).to_bytes(2, "big"),  # oversize verbatim
    ],
)
def test_malformed_messages_raise_typed_errors(bad: bytes) -> None:
    reader = MessageReader()
    reader.feed(bad)
    with pytest.raises(RemoteProtocolError):
        reader.next_message()


@settings(max_examples=400)
@given(data=st.binary(max_size=400))
def test_fuzz_reader(data: bytes) -> None:
    reader = MessageReader()
    reader.feed(data)
    try:
        while reader.next_message() is not None:
            pass
    except RemoteProtocolError:
        return
    assert reader.buffered < 5 + 6 + 2 * MAX_FIELD
