"""Handshake message codecs: byte-exact round trips and fuzzing (only DecodeError-family errors)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tls12.buffer import Buffer
from tls12.errors import DecodeError, IllegalParameter, RemoteProtocolError
from tls12.messages import (
    Certificate,
    ClientHello,
    Finished,
    ServerHello,
    ServerKeyExchangeECDHE,
    decode_server_name,
    decode_u16_list,
    encode_server_name,
    encode_u16_list,
    pull_certificate,
    pull_client_hello,
    pull_finished,
    pull_server_hello,
    pull_server_key_exchange_ecdhe,
    push_certificate,
    push_client_hello,
    push_finished,
    push_server_hello,
    push_server_key_exchange_ecdhe,
)

PARSERS = [pull_client_hello, pull_server_hello, pull_certificate, pull_server_key_exchange_ecdhe, pull_finished]

extensions = st.lists(
    st.tuples(st.integers(0, 0xFFFF), st.binary(max_size=40)), max_size=6, unique_by=lambda e: e[0]
).map(tuple)


@given(
    random=st.binary(min_size=32, max_size=32),
    session_id=st.binary(max_size=32),
    suites=st.lists(st.integers(0, 0xFFFF), min_size=1, max_size=20).map(tuple),
    exts=extensions | st.none(),
)
def test_client_hello_round_trip(random: bytes, session_id: bytes, suites: tuple[int, ...], exts) -> None:
    msg = ClientHello(random, session_id, suites, b"\x00", exts)
    body = push_client_hello(msg)
    assert pull_client_hello(Buffer(body)) == msg
    assert push_client_hello(pull_client_hello(Buffer(body))) == body


@given(random=st.binary(min_size=32, max_size=32), session_id=st.binary(max_size=32), suite=st.integers(0, 0xFFFF), exts=extensions)
def test_server_hello_round_trip(random: bytes, session_id: bytes, suite: int, exts) -> None:
    msg = ServerHello(random, session_id, suite, 0, exts)
    body = push_server_hello(msg)
    assert pull_server_hello(Buffer(body)) == msg


@given(chain=st.lists(st.binary(min_size=1, max_size=300), max_size=4).map(tuple))
def test_certificate_round_trip(chain: tuple[bytes, ...]) -> None:
    assert pull_certificate(Buffer(push_certificate(Certificate(chain)))) == Certificate(chain)


@given(group=st.integers(0, 0xFFFF), public=st.binary(min_size=1, max_size=100), scheme=st.integers(0, 0xFFFF), sig=st.binary(max_size=300))
def test_server_key_exchange_round_trip(group: int, public: bytes, scheme: int, sig: bytes) -> None:
    msg = ServerKeyExchangeECDHE(group, public, scheme, sig)
    assert pull_server_key_exchange_ecdhe(Buffer(push_server_key_exchange_ecdhe(msg))) == msg


def test_finished_and_extension_helpers() -> None:
    assert pull_finished(Buffer(push_finished(Finished(b"x" * 12)))) == Finished(b"x" * 12)
    assert decode_server_name(encode_server_name("example.org")) == "example.org"
    assert decode_u16_list(encode_u16_list([29, 23])) == (29, 23)


def test_trailing_bytes_and_truncation_rejected() -> None:
    body = push_server_hello(ServerHello(b"r" * 32, b"", 0x2F, 0, ()))
    for bad in (body + b"\x00", body[:-1], b""):
        try:
            pull_server_hello(Buffer(bad))
        except DecodeError:
            continue
        raise AssertionError(f"accepted {bad!r}")


def test_duplicate_extension_is_illegal() -> None:
    msg = ClientHello(b"r" * 32, b"", (0x2F,), b"\x00", ((23, b""), (23, b"")))
    try:
        pull_client_hello(Buffer(push_client_hello(msg)))
    except IllegalParameter:
        return
    raise AssertionError("duplicate extension accepted")


@settings(max_examples=300)
@given(data=st.binary(max_size=300), which=st.integers(0, len(PARSERS) - 1))
def test_parsers_fuzz_random(data: bytes, which: int) -> None:
    try:
        PARSERS[which](Buffer(data))
    except RemoteProtocolError:
        pass


@settings(max_examples=300)
@given(pos=st.integers(0, 10_000), value=st.integers(0, 255), cut=st.integers(0, 10_000))
def test_client_hello_fuzz_mutated(pos: int, value: int, cut: int) -> None:
    body = bytearray(
        push_client_hello(ClientHello(b"r" * 32, b"s" * 32, (0x2F, 0xC013), b"\x00", ((0, encode_server_name("a.b")), (23, b""))))
    )
    body[pos % len(body)] = value
    try:
        msg = pull_client_hello(Buffer(bytes(body[: len(body) - cut % 8])))
        if msg.extension(0) is not None:
            decode_server_name(msg.extension(0) or b"")
    except RemoteProtocolError:
        pass
