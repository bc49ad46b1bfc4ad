"""Hypothesis over every Reverse SSL parser: round-trips byte-exact, garbage only raises DecodeError-like errors."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reverse_ssl import messages, onoff, puzzle
from reverse_ssl.client_connection import ReverseClientConnection
from reverse_ssl.messages import Mode
from reverse_ssl.ots import OTSScheme, public_key_size, signature_size
from reverse_ssl.server_connection import ReverseServerConnection
from tests.reverse_ssl.rssl_helpers import client_config, server_config
from tls12.buffer import Buffer, Writer
from tls12.errors import RemoteProtocolError
from tls12.testing import pipe

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ots_schemes = st.sampled_from([s for s in OTSScheme if s is not OTSScheme.RSA_FALLBACK])


@st.composite
def signatures(draw: st.DrawFn) -> onoff.OnlineOfflineSignature:
    if draw(st.booleans()):
        return onoff.OnlineOfflineSignature(OTSScheme.RSA_FALLBACK, b"", draw(st.binary(min_size=1, max_size=64)), b"")
    scheme = draw(ots_schemes)
    # keys and signatures are kilobytes: draw a short pattern and repeat it (keeps examples small)
    pattern = draw(st.binary(min_size=1, max_size=8))
    return onoff.OnlineOfflineSignature(
        scheme,
        (pattern * public_key_size(scheme))[: public_key_size(scheme)],
        draw(st.binary(min_size=1, max_size=64)),
        (pattern[::-1] * signature_size(scheme))[: signature_size(scheme)],
    )


@st.composite
def puzzle_requests(draw: st.DrawFn) -> puzzle.PuzzleRequest:
    n_bits = draw(st.sampled_from([512, 1024]))
    k = draw(st.integers(1, n_bits - 2))
    value = draw(st.binary(min_size=n_bits // 8, max_size=n_bits // 8))
    if draw(st.booleans()):
        return puzzle.PuzzleRequest(puzzle.Construction.RANGE, n_bits, k, 0, b"", value)
    return puzzle.PuzzleRequest(
        puzzle.Construction.HASH_AND_RANGE, n_bits, k, draw(st.integers(1, 32)), draw(st.binary(min_size=32, max_size=32)), value
    )


replies = st.builds(
    puzzle.PuzzleReply,
    st.binary(max_size=4),
    st.binary(min_size=1, max_size=300).filter(lambda b: b[0] != 0),
    st.integers(0, 2**32 - 1),
    st.binary(max_size=300),
)


@FUZZ
@given(puzzle_requests())
def test_puzzle_request_roundtrip(msg: puzzle.PuzzleRequest) -> None:
    raw = puzzle.push_puzzle_request(msg)
    assert puzzle.pull_puzzle_request(Buffer(raw)) == msg
    with pytest.raises(RemoteProtocolError):
        puzzle.pull_puzzle_request(Buffer(raw + b"\x00"))


@FUZZ
@given(replies)
def test_puzzle_reply_roundtrip(msg: puzzle.PuzzleReply) -> None:
    raw = puzzle.push_puzzle_reply(msg)
    assert puzzle.pull_puzzle_reply(Buffer(raw)) == msg
    with pytest.raises(RemoteProtocolError):
        puzzle.pull_puzzle_reply(Buffer(raw + b"\x00"))


@FUZZ
@given(st.binary(min_size=1, max_size=300), signatures())
def test_key_transport_roundtrip(encrypted: bytes, sig: onoff.OnlineOfflineSignature) -> None:
    msg = messages.KeyTransport(encrypted, sig)
    raw = messages.push_key_transport(msg)
    assert messages.pull_key_transport(Buffer(raw)) == msg
    assert messages.push_key_transport(messages.pull_key_transport(Buffer(raw))) == raw
    with pytest.raises(RemoteProtocolError):
        messages.pull_key_transport(Buffer(raw + b"\x00"))


@FUZZ
@given(st.lists(st.sampled_from(list(Mode)), min_size=1, max_size=2, unique=True))
def test_mode_extensions_roundtrip(modes: list[Mode]) -> None:
    assert messages.decode_offered_modes(messages.encode_offered_modes(tuple(modes))) == tuple(modes)
    assert messages.decode_chosen_mode(messages.encode_chosen_mode(modes[0])) is modes[0]


PARSERS = {
    "puzzle_request": lambda b: puzzle.pull_puzzle_request(Buffer(b)),
    "puzzle_reply": lambda b: puzzle.pull_puzzle_reply(Buffer(b)),
    "key_transport": lambda b: messages.pull_key_transport(Buffer(b)),
    "offered_modes": messages.decode_offered_modes,
    "chosen_mode": messages.decode_chosen_mode,
    "signature": lambda b: onoff.pull_online_offline_signature(Buffer(b)),
}


@pytest.mark.parametrize("name", sorted(PARSERS))
@FUZZ
@given(data=st.binary(max_size=600))
def test_parsers_reject_garbage_with_protocol_errors(name: str, data: bytes) -> None:
    try:
        PARSERS[name](data)
    except RemoteProtocolError:
        pass


@FUZZ
@given(st.binary(min_size=1, max_size=300), st.integers(0, 3))
def test_server_survives_random_bytes_mid_handshake(junk: bytes, where: int) -> None:
    """After a valid ClientHello, any bytes end in a typed protocol error or a wait, never a crash."""
    server = ReverseServerConnection(server_config(pool_size=0))
    client = ReverseClientConnection(client_config(modes=(Mode.PUZZLE, Mode.CLIENT_AUTH)[where % 2 :]))
    server.receive_data(client.data_to_send())
    server.data_to_send()
    record = bytes([22, 3, 3]) + len(junk).to_bytes(2, "big") + junk if where >= 2 else junk
    try:
        server.receive_data(record)
    except RemoteProtocolError:
        assert server.closed


@FUZZ
@given(st.binary(min_size=1, max_size=300))
def test_client_survives_random_handshake_messages(junk: bytes) -> None:
    server = ReverseServerConnection(server_config(pool_size=0))
    client = ReverseClientConnection(client_config(modes=(Mode.CLIENT_AUTH,)))
    server.receive_data(client.data_to_send())
    client.receive_data(server.data_to_send())
    client.data_to_send()
    w = Writer()
    w.push_uint8(0xF3)
    w.push_vector(3, junk)
    body = w.getvalue()
    try:
        client.receive_data(bytes([22, 3, 3]) + len(body).to_bytes(2, "big") + body)
    except RemoteProtocolError:
        assert client.closed


def test_handshake_still_works_after_fuzz_setup() -> None:
    client = ReverseClientConnection(client_config(modes=(Mode.CLIENT_AUTH,)))
    server = ReverseServerConnection(server_config())
    pipe(client, server)
    assert client.handshake_complete


CORE = ["ots", "onoff", "puzzle", "primes", "messages", "config", "errors", "state", "server_connection",
        "client_connection"]


@pytest.mark.parametrize("module", CORE)
def test_sans_io_cores_import_no_io(module: str) -> None:
    tree = ast.parse((Path(__file__).resolve().parents[2] / "reverse_ssl" / f"{module}.py").read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module.split(".")[0])
    assert not imported & {"asyncio", "socket", "time", "random", "threading", "selectors"}
