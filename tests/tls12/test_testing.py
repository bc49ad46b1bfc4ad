"""tls12.testing: the in-memory pipe, the credential factory and the seeded RNG."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

import tls12.testing
from tls12 import ClientConfig, ClientConnection, ServerConfig, ServerConnection
from tls12.errors import BadRecordMAC
from tls12.events import ApplicationData, ConnectionClosed, HandshakeComplete
from tls12.suites import CipherSuite
from tls12.testing import PipeEvents, PipeLivelock, credentials, pipe, seeded_rng

ECDHE = CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256


def _pair(seed: int = 0, suite: CipherSuite = ECDHE) -> tuple[ClientConnection, ServerConnection]:
    server = ServerConnection(
        ServerConfig(credentials=credentials(), cipher_suites=(suite,), rng=seeded_rng(seed))
    )
    client = ClientConnection(ClientConfig(cipher_suites=(suite,), rng=seeded_rng(seed + 1)))
    return client, server


# --- pipe ------------------------------------------------------------------------------


def test_pipe_runs_a_handshake_and_returns_client_events_first() -> None:
    client, server = _pair()
    events = pipe(client, server)
    assert isinstance(events, PipeEvents)
    assert [type(e) for e in events.client_events] == [HandshakeComplete]
    assert [type(e) for e in events.server_events] == [HandshakeComplete]
    assert client.handshake_complete and server.handshake_complete


def test_pipe_delivers_each_side_its_own_data() -> None:
    client, server = _pair()
    pipe(client, server)
    client.send_data(b"to server")
    server.send_data(b"to client")
    client_events, server_events = pipe(client, server)
    assert client_events == [ApplicationData(b"to client")]
    assert server_events == [ApplicationData(b"to server")]


def test_pipe_returns_no_events_when_both_sides_are_quiet() -> None:
    client, server = _pair()
    pipe(client, server)
    assert pipe(client, server) == PipeEvents([], [])


def test_pipe_carries_a_close_to_the_peer() -> None:
    client, server = _pair()
    pipe(client, server)
    client.close()
    _, server_events = pipe(client, server)
    assert any(isinstance(e, ConnectionClosed) for e in server_events)


def test_filters_see_every_byte_in_flight() -> None:
    client, server = _pair()
    seen = {"up": b"", "down": b""}

    def up(data: bytes) -> bytes:
        seen["up"] += data
        return data

    def down(data: bytes) -> bytes:
        seen["down"] += data
        return data

    pipe(client, server, to_server=up, to_client=down)
    assert seen["up"][:1] == b"\x16" and seen["down"][:1] == b"\x16"  # handshake records
    client.send_data(b"x" * 100)
    before = len(seen["up"])
    pipe(client, server, to_server=up, to_client=down)
    assert len(seen["up"]) - before > 100  # the record: header, IV, data, MAC, padding


def test_a_tampering_filter_makes_the_receiver_raise() -> None:
    client, server = _pair()
    pipe(client, server)
    server.send_data(b"secret")

    def flip_last_byte(data: bytes) -> bytes:
        return data[:-1] + bytes([data[-1] ^ 1])

    with pytest.raises(BadRecordMAC):
        pipe(client, server, to_client=flip_last_byte)


class _Chatterbox:
    """A peer that answers every message with another one: a livelock by construction."""

    def __init__(self, opening: bytes = b"") -> None:
        self.pending = opening
        self.received = 0

    def receive_data(self, data: bytes) -> list[object]:
        self.received += 1
        self.pending += b"again"
        return [data]

    def data_to_send(self) -> bytes:
        out, self.pending = self.pending, b""
        return out


def test_livelock_raises_a_clear_error() -> None:
    client, server = _Chatterbox(b"hello"), _Chatterbox()
    with pytest.raises(PipeLivelock, match="still talking after 7 round trips") as info:
        pipe(client, server, max_rounds=7)
    assert info.value.rounds == 7
    assert info.value.to_server == 5 and info.value.to_client == 5
    assert client.received == server.received == 7
    assert isinstance(info.value, RuntimeError)


def test_an_exchange_that_needs_exactly_max_rounds_is_not_a_livelock() -> None:
    client, server = _pair()
    # the handshake takes 2 round trips with bytes, then 1 quiet one
    assert pipe(client, server, max_rounds=3).server_events
    client2, server2 = _pair()
    with pytest.raises(PipeLivelock):
        pipe(client2, server2, max_rounds=2)


def test_max_rounds_must_be_positive() -> None:
    client, server = _pair()
    with pytest.raises(ValueError, match="max_rounds"):
        pipe(client, server, max_rounds=0)


# --- seeded RNG --------------------------------------------------------------------------


def test_seeded_rng_is_deterministic_and_seed_dependent() -> None:
    assert seeded_rng(1)(64) == seeded_rng(1)(64)
    assert seeded_rng(1)(64) != seeded_rng(2)(64)
    assert len({seeded_rng(s)(32) for s in (1, b"1", "1")}) == 3


def test_seeded_rng_is_one_stream_however_it_is_cut() -> None:
    whole = seeded_rng(b"seed")(100)
    rng = seeded_rng(b"seed")
    parts = [rng(n) for n in (1, 31, 0, 33, 35)]
    assert [len(p) for p in parts] == [1, 31, 0, 33, 35]
    assert b"".join(parts) == whole


def test_seeded_rng_rejects_bad_seeds_and_sizes() -> None:
    with pytest.raises(ValueError):
        seeded_rng(-1)
    with pytest.raises(TypeError):
        seeded_rng(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        seeded_rng(True)
    with pytest.raises(ValueError):
        seeded_rng(0)(-1)


def test_seeded_handshakes_are_identical_byte_for_byte() -> None:
    def transcript() -> bytes:
        client, server = _pair(seed=42)
        wire: list[bytes] = []

        def tap(data: bytes) -> bytes:
            wire.append(data)
            return data

        pipe(client, server, to_server=tap, to_client=tap)
        client.send_data(b"ping")
        pipe(client, server, to_server=tap, to_client=tap)
        return b"|".join(wire)

    first, second = transcript(), transcript()
    assert first == second
    client, server = _pair(seed=43)
    assert client.data_to_send() != _pair(seed=42)[0].data_to_send()  # the client random differs


# --- credentials -------------------------------------------------------------------------


def test_credentials_are_made_once_per_kind() -> None:
    assert credentials() is credentials()
    assert credentials(bits=1024) is not credentials()
    assert credentials("rsa", bits=1024, common_name="client") is not credentials(bits=1024)


def test_rsa_credentials_match_the_request() -> None:
    creds = credentials("rsa", bits=1024, common_name="client")
    assert isinstance(creds.private_key, rsa.RSAPrivateKey)
    assert creds.private_key.key_size == 1024
    cert = creds.chain[0]
    assert cert.public_key().public_numbers() == creds.private_key.public_key().public_numbers()
    assert "CN=client" in cert.subject.rfc4514_string()


@pytest.mark.parametrize(("bits", "curve"), [(256, "secp256r1"), (384, "secp384r1")])
def test_ecdsa_credentials_carry_an_ec_key(bits: int, curve: str) -> None:
    creds = credentials("ecdsa", bits=bits)
    key = creds.private_key
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    assert key.curve.name == curve
    assert creds.chain[0].public_key().public_numbers() == key.public_key().public_numbers()


def test_credentials_reject_unknown_kinds_and_sizes() -> None:
    with pytest.raises(ValueError, match="ECDSA"):
        credentials("ecdsa", bits=2048)
    with pytest.raises(ValueError, match="kind"):
        credentials("dsa")  # type: ignore[arg-type]


def test_credentials_work_for_a_handshake_with_rsa_key_exchange() -> None:
    client, server = _pair(suite=CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA)
    client_events, server_events = pipe(client, server)
    assert isinstance(client_events[0], HandshakeComplete)
    assert client_events[0].cipher_suite == CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA


# --- dependencies ------------------------------------------------------------------------


def test_testing_module_imports_only_stdlib_cryptography_and_tls12() -> None:
    tree = ast.parse(Path(tls12.testing.__file__).read_text())
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            roots.add("tls12" if node.level else (node.module or "").split(".")[0])
    allowed = {"cryptography", "tls12"}
    outside = {r for r in roots if r not in sys.stdlib_module_names and r not in allowed}
    assert outside == set()
    assert "cryptography" in roots and "tls12" in roots  # the check looked at real imports
