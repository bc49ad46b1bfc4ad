"""The reverse handshake in memory: both flavours, fallback to the standard one, every refusal."""

from __future__ import annotations

import dataclasses

import pytest

from reverse_ssl.aio.pool import SignaturePool
from reverse_ssl.client_connection import ReverseClientConnection
from reverse_ssl.config import SeenKeyCache
from reverse_ssl.errors import (
    BadOfflineSignature,
    BadSelfSignature,
    ForgedOneTimeSignature,
    MissingSelfSignature,
    ModulusOutOfRange,
    PuzzleReplayed,
    ReusedOneTimeKey,
    WrongPreimage,
)
from reverse_ssl.messages import Mode
from reverse_ssl.onoff import make_offline_token
from reverse_ssl.ots import OTSScheme, lamport_keygen
from reverse_ssl.puzzle import Construction, PuzzleParams, SignaturePolicy
from reverse_ssl.server_connection import ReverseServerConnection
from tests.reverse_ssl.rssl_helpers import (
    SUITES,
    LeakyPool,
    TamperingClient,
    client_config,
    server_config,
    server_credentials,
)
from tls12 import ClientConfig, ClientConnection, ServerConfig, ServerConnection
from tls12.certs import generate_self_signed
from tls12.errors import HandshakeFailure, RemoteProtocolError
from tls12.events import ApplicationData
from tls12.testing import pipe, seeded_rng


def _exchange(client: ClientConnection, server: ServerConnection) -> None:
    client.send_data(b"to server")
    assert server.receive_data(client.data_to_send()) == [ApplicationData(b"to server")]
    server.send_data(b"to client")
    assert client.receive_data(server.data_to_send()) == [ApplicationData(b"to client")]


@pytest.mark.parametrize("mode", [Mode.CLIENT_AUTH, Mode.PUZZLE])
def test_reverse_handshake_carries_data_both_ways(mode: Mode) -> None:
    cfg = server_config()
    server = ReverseServerConnection(cfg)
    client = ReverseClientConnection(client_config(modes=(mode,)))
    pipe(client, server)
    assert client.handshake_complete and server.handshake_complete
    assert client.mode is server.mode is mode
    assert client.master_secret == server.master_secret
    assert not server.used_fallback_signature and not client.server_used_fallback_signature
    assert cfg.pool is not None and cfg.pool.metrics().taken == 1
    _exchange(client, server)


def test_server_preference_decides_the_mode() -> None:
    server = ReverseServerConnection(server_config(modes=(Mode.PUZZLE, Mode.CLIENT_AUTH)))
    client = ReverseClientConnection(client_config())
    pipe(client, server)
    assert server.mode is Mode.PUZZLE and client.handshake_complete


def test_second_construction_and_winternitz() -> None:
    creds = server_credentials()
    pool = SignaturePool(1)
    pool.put(make_offline_token(creds.private_key, seeded_rng(b"w"), OTSScheme.WINTERNITZ_16))
    cfg = dataclasses.replace(
        server_config(pool_size=0), pool=pool,
        puzzle=PuzzleParams(Construction.HASH_AND_RANGE, n_bits=512, preimage_bits=6),
    )
    server = ReverseServerConnection(cfg)
    client = ReverseClientConnection(client_config(modes=(Mode.PUZZLE,)))
    pipe(client, server)
    assert client.handshake_complete and client.puzzle_solution is not None
    assert client.puzzle_solution.hashes_tried >= 1
    _exchange(client, server)


def test_empty_pool_falls_back_to_rsa_and_says_so() -> None:
    cfg = dataclasses.replace(server_config(pool_size=0), pool=SignaturePool(2))
    server = ReverseServerConnection(cfg)
    client = ReverseClientConnection(client_config(modes=(Mode.CLIENT_AUTH,)))
    pipe(client, server)
    assert client.handshake_complete
    assert server.used_fallback_signature and client.server_used_fallback_signature
    m = cfg.pool.metrics()  # type: ignore[union-attr]
    assert (m.exhausted, m.fallbacks) == (1, 1)


def test_client_can_refuse_the_rsa_fallback() -> None:
    server = ReverseServerConnection(server_config(pool_size=0))
    client = ReverseClientConnection(client_config(modes=(Mode.CLIENT_AUTH,), accept_rsa_fallback=False))
    with pytest.raises(RemoteProtocolError, match="not accepted"):
        pipe(client, server)


# --- version negotiation: peers without Reverse SSL -------------------------------------


def test_plain_tls12_client_gets_the_standard_handshake() -> None:
    server = ReverseServerConnection(server_config())
    client = ClientConnection(ClientConfig(server_name="localhost", cipher_suites=SUITES))
    pipe(client, server)
    assert client.handshake_complete and server.mode is None
    _exchange(client, server)


def test_reverse_client_against_plain_tls12_server_falls_back() -> None:
    server = ServerConnection(ServerConfig(credentials=server_credentials(), cipher_suites=SUITES))
    client = ReverseClientConnection(client_config())
    pipe(client, server)
    assert client.handshake_complete and client.mode is None
    _exchange(client, server)


def test_server_can_require_reverse_ssl() -> None:
    server = ReverseServerConnection(server_config(allow_original=False))
    client = ClientConnection(ClientConfig(server_name="localhost", cipher_suites=SUITES))
    with pytest.raises(HandshakeFailure):
        pipe(client, server)
    assert server.closed


# --- client-side refusals: a misbehaving server ----------------------------------------


def _server_with_token(token) -> ReverseServerConnection:  # type: ignore[no-untyped-def]
    pool = SignaturePool(1)
    pool.put(token)
    return ReverseServerConnection(dataclasses.replace(server_config(pool_size=0), pool=pool))


def test_forged_one_time_signature_is_refused() -> None:
    token = make_offline_token(server_credentials().private_key, seeded_rng(b"f"))
    token.signer.table = lamport_keygen(seeded_rng(b"other")).table  # signs with secrets that do not match pk
    client = ReverseClientConnection(client_config(modes=(Mode.CLIENT_AUTH,)))
    with pytest.raises(ForgedOneTimeSignature):
        pipe(client, _server_with_token(token))
    assert client.closed


def test_wrong_w_is_refused() -> None:
    impostor = generate_self_signed("impostor", key_size=1024).private_key
    token = make_offline_token(impostor, seeded_rng(b"w"))
    client = ReverseClientConnection(client_config(modes=(Mode.PUZZLE,)))
    with pytest.raises(BadOfflineSignature):
        pipe(client, _server_with_token(token))


def test_reused_one_time_key_is_refused() -> None:
    token = make_offline_token(server_credentials().private_key, seeded_rng(b"leak"))
    cfg = dataclasses.replace(server_config(pool_size=0), pool=LeakyPool(token))
    seen = SeenKeyCache()
    first = ReverseClientConnection(client_config(modes=(Mode.CLIENT_AUTH,), seen_keys=seen))
    pipe(first, ReverseServerConnection(cfg))
    assert first.handshake_complete
    second = ReverseClientConnection(client_config(modes=(Mode.CLIENT_AUTH,), seen_keys=seen))
    with pytest.raises(ReusedOneTimeKey):
        pipe(second, ReverseServerConnection(cfg))


# --- server-side refusals: a misbehaving client ------------------------------------------


def _bump_modulus(reply):  # type: ignore[no-untyped-def]
    n = int.from_bytes(reply.modulus, "big") + (2 << 300)
    return dataclasses.replace(reply, modulus=n.to_bytes(len(reply.modulus), "big"))


def _flip_signature(reply):  # type: ignore[no-untyped-def]
    return dataclasses.replace(reply, self_signature=bytes([reply.self_signature[0] ^ 1]) + reply.self_signature[1:])


def _wrong_preimage(reply):  # type: ignore[no-untyped-def]
    return dataclasses.replace(reply, preimage=bytes([reply.preimage[0] ^ 1]))


REFUSALS = [
    ("out_of_range", _bump_modulus, ModulusOutOfRange, None),
    ("missing_signature", lambda r: dataclasses.replace(r, self_signature=b""), MissingSelfSignature, None),
    ("invalid_signature", _flip_signature, BadSelfSignature, None),
    ("wrong_preimage", _wrong_preimage, WrongPreimage, PuzzleParams(Construction.HASH_AND_RANGE, n_bits=512, preimage_bits=4)),
]


@pytest.mark.parametrize(("tamper", "error", "puzzle"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_bad_puzzle_replies_are_refused(tamper, error, puzzle) -> None:  # type: ignore[no-untyped-def]
    kw = {"signature_policy": SignaturePolicy.ALWAYS}
    if puzzle is not None:
        kw["puzzle"] = puzzle
    server = ReverseServerConnection(server_config(**kw))
    client = TamperingClient(client_config(modes=(Mode.PUZZLE,)), tamper)
    with pytest.raises(error):
        pipe(client, server)
    assert server.closed
    assert client.receive_data(server.data_to_send()) or client.closed  # the alert reached the client


def test_replayed_puzzle_solution_is_refused() -> None:
    cfg = server_config()
    honest = ReverseClientConnection(client_config(modes=(Mode.PUZZLE,)))
    pipe(honest, ReverseServerConnection(cfg))
    assert honest.puzzle_solution is not None
    captured = honest.puzzle_solution.reply
    replayer = TamperingClient(client_config(modes=(Mode.PUZZLE,)), lambda _r: captured)
    with pytest.raises(PuzzleReplayed):
        pipe(replayer, ReverseServerConnection(cfg))


def test_signature_policy_when_pool_empty() -> None:
    """With a pre-signed key ready the server skips the self-signature check (the paper's option)."""
    ready = ReverseServerConnection(server_config(signature_policy=SignaturePolicy.WHEN_POOL_EMPTY))
    client = TamperingClient(client_config(modes=(Mode.PUZZLE,)), _flip_signature)
    pipe(client, ready)
    assert client.handshake_complete and not ready.verified_self_signature  # decryption proved the key
    empty = ReverseServerConnection(server_config(pool_size=0, signature_policy=SignaturePolicy.WHEN_POOL_EMPTY))
    with pytest.raises(BadSelfSignature):
        pipe(TamperingClient(client_config(modes=(Mode.PUZZLE,)), _flip_signature), empty)


def test_fake_modulus_without_private_key_cannot_finish() -> None:
    """Skipping the self-signature check is safe: a key the client cannot use fails at Finished."""
    creds = generate_self_signed("x", key_size=1024)
    server = ReverseServerConnection(server_config(signature_policy=SignaturePolicy.NEVER))
    client = TamperingClient(client_config(modes=(Mode.PUZZLE,)), lambda r: r)
    client_key_swap = creds.private_key

    original = client._handle_reverse_certificate

    def swap(raw: bytes) -> None:  # the client no longer holds the puzzle key
        client.context.private_key = client_key_swap
        original(raw)

    client._handle_reverse_certificate = swap  # type: ignore[method-assign]
    with pytest.raises(RemoteProtocolError):
        pipe(client, server)
    assert not server.handshake_complete
