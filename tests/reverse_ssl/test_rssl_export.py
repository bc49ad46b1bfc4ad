"""Reverse SSL connections exported mid-handshake continue byte-identically (seam 3).

Reverse SSL adds its own states (``ReverseState``) and its own handshake
fields (mode, puzzle challenge, the client's decryption key) to the core.
Each test runs one handshake twice from the same seeds: once uninterrupted,
once with one side exported in a Reverse-SSL-only state and imported into a
fresh object.  Every byte on the wire must be the same in both runs.

One source of randomness is outside the seeded RNGs: OpenSSL draws the
PKCS#1 v1.5 padding of the server's RSA encryption (the KeyTransport) from
its own generator.  To compare bytes, the tests give the server a client key
whose ``encrypt`` pads from a seeded stream (textbook RSA over a correctly
padded block, which the real client decrypts with its real private key):
the key from the client's certificate, or the one its puzzle reply carries.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

import reverse_ssl.server_connection as rssl_server
from reverse_ssl.aio.pool import SignaturePool
from reverse_ssl.client_connection import ReverseClientConnection, ReverseClientContext
from reverse_ssl.config import ReverseClientConfig, ReverseServerConfig
from reverse_ssl.messages import Mode
from reverse_ssl.puzzle import PuzzleChallenge, PuzzleParams, verify_reply
from reverse_ssl.server_connection import ReverseServerConnection, ReverseServerContext
from reverse_ssl.state import ReverseState
from tests.reverse_ssl.rssl_helpers import KEY_BITS, SUITES, token_factory
from tls12 import ClientConfig, ServerConfig, ServerConnection
from tls12.certs import peer_rsa_key
from tls12.testing import credentials, seeded_rng


class _SeededPaddingKey:
    """An RSA public key whose PKCS#1 v1.5 encryption pads from a seeded stream."""

    def __init__(self, key: rsa.RSAPublicKey, rng: Callable[[int], bytes]) -> None:
        self._key = key
        self._rng = rng
        self.key_size = key.key_size

    def encrypt(self, message: bytes, _padding: object) -> bytes:
        numbers = self._key.public_numbers()
        k = (self.key_size + 7) // 8
        ps = bytes(b for b in self._rng(4 * k) if b)[: k - 3 - len(message)]
        assert len(ps) == k - 3 - len(message)
        block = b"\x00\x02" + ps + b"\x00" + message
        return pow(int.from_bytes(block, "big"), numbers.e, numbers.n).to_bytes(k, "big")


def _configs(mode: Mode) -> tuple[ReverseServerConfig, ReverseClientConfig]:
    server_key = credentials(bits=KEY_BITS, common_name="localhost")
    pool = SignaturePool(2)
    pool.fill(token_factory(server_key.private_key, seed=b"export"))
    server = ReverseServerConfig(
        ServerConfig(credentials=server_key, cipher_suites=SUITES, rng=seeded_rng("server")),
        pool=pool,
        puzzle=PuzzleParams(n_bits=512),
    )
    client = ReverseClientConfig(
        ClientConfig(server_name="localhost", cipher_suites=SUITES, rng=seeded_rng("client")),
        modes=(mode,),
        credentials=credentials(bits=KEY_BITS, common_name="client"),
    )
    return server, client


def _run(
    mode: Mode,
    monkeypatch: pytest.MonkeyPatch,
    *,
    server_at: Enum | None = None,
    client_at: Enum | None = None,
) -> tuple[list[bytes], ReverseServerConnection, ReverseClientConnection, int]:
    """One handshake plus one record each way; the wire bytes, the endpoints, how many imports."""
    padding_rng = seeded_rng("padding")
    monkeypatch.setattr(
        rssl_server,
        "peer_rsa_key",
        lambda chain, who: _SeededPaddingKey(peer_rsa_key(chain, who), padding_rng),
    )
    monkeypatch.setattr(
        rssl_server,
        "verify_reply",
        lambda *a, **kw: _SeededPaddingKey(verify_reply(*a, **kw), padding_rng),
    )
    scfg, ccfg = _configs(mode)
    server, client = ReverseServerConnection(scfg), ReverseClientConnection(ccfg)
    wire: list[bytes] = []
    imports = 0
    for step in range(12):
        if step == 6:  # the handshake is long over: application data both ways
            assert client.handshake_complete and server.handshake_complete
            client.send_data(b"ping")
            server.send_data(b"pong")
        up = client.data_to_send()
        wire.append(up)
        if up:
            server.receive_data(up)
        if server.state is server_at:
            server = ReverseServerConnection.import_state(scfg, server.export_state())
            imports += 1
        down = server.data_to_send()
        wire.append(down)
        if down:
            client.receive_data(down)
        if client.state is client_at:
            client = ReverseClientConnection.import_state(ccfg, client.export_state())
            imports += 1
    return wire, server, client, imports


@pytest.mark.parametrize(
    ("mode", "server_at", "client_at"),
    [
        (Mode.CLIENT_AUTH, ReverseState.EXPECT_CLIENT_CERTIFICATE, None),
        (Mode.PUZZLE, ReverseState.EXPECT_PUZZLE_REPLY, None),
        (Mode.CLIENT_AUTH, None, ReverseState.EXPECT_SERVER_CERTIFICATE),
        (Mode.PUZZLE, None, ReverseState.EXPECT_SERVER_CERTIFICATE),
    ],
    ids=["server-client-auth", "server-puzzle", "client-client-auth", "client-puzzle"],
)
def test_export_in_a_reverse_state_continues_byte_identically(
    mode: Mode, server_at: Enum | None, client_at: Enum | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    reference, ref_server, ref_client, none = _run(mode, monkeypatch)
    assert none == 0 and ref_server.handshake_complete and ref_client.mode is mode
    wire, server, client, imports = _run(
        mode, monkeypatch, server_at=server_at, client_at=client_at
    )
    assert imports == 1
    assert wire == reference
    assert server.handshake_complete and client.handshake_complete
    # the subclass fields came through the export
    assert server.mode is client.mode is mode
    assert isinstance(server.context, ReverseServerContext) and isinstance(
        client.context, ReverseClientContext
    )
    assert server.master_secret == client.master_secret == ref_server.master_secret


def test_puzzle_challenge_and_mode_survive_the_export() -> None:
    scfg, ccfg = _configs(Mode.PUZZLE)
    server = ReverseServerConnection(scfg)
    server.receive_data(ReverseClientConnection(ccfg).data_to_send())
    assert server.state is ReverseState.EXPECT_PUZZLE_REPLY
    copy = ReverseServerConnection.import_state(scfg, server.export_state())
    assert copy.state is ReverseState.EXPECT_PUZZLE_REPLY
    assert copy.mode is Mode.PUZZLE
    assert isinstance(copy.context.challenge, PuzzleChallenge)
    assert copy.context.challenge == server.context.challenge
    assert copy.context.transcript == server.context.transcript
    assert copy.data_to_send() == server.data_to_send()


def test_reverse_state_cannot_be_imported_into_a_plain_server() -> None:
    scfg, ccfg = _configs(Mode.CLIENT_AUTH)
    server = ReverseServerConnection(scfg)
    server.receive_data(ReverseClientConnection(ccfg).data_to_send())
    with pytest.raises(ValueError, match="ReverseServerContext"):
        ServerConnection.import_state(scfg.tls, server.export_state())
