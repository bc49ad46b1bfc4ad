"""Shared fixtures for the Reverse SSL tests: small keys, seeded RNGs, in-memory pairs."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable

from cryptography.hazmat.primitives.asymmetric import rsa

from reverse_ssl.config import ReverseClientConfig, ReverseServerConfig
from reverse_ssl.onoff import OfflineToken, make_offline_token
from reverse_ssl.ots import OTSScheme
from reverse_ssl.pool import SignaturePool
from reverse_ssl.puzzle import PuzzleParams
from tls12 import ClientConfig, ServerConfig
from tls12.certs import Credentials, generate_self_signed
from tls12.connection import Connection
from tls12.events import Event
from tls12.suites import CipherSuite

KEY_BITS = 1024
SUITES = (CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA256, CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA)


def seeded_rng(seed: bytes) -> Callable[[int], bytes]:
    """A deterministic rng(n) (SHA-256 in counter mode) for reproducible tests."""
    counter = 0

    def rng(n: int) -> bytes:
        nonlocal counter
        out = bytearray()
        while len(out) < n:
            out += hashlib.sha256(seed + counter.to_bytes(8, "big")).digest()
            counter += 1
        return bytes(out[:n])

    return rng


@functools.cache
def server_credentials() -> Credentials:
    return generate_self_signed("localhost", key_size=KEY_BITS)


@functools.cache
def client_credentials() -> Credentials:
    return generate_self_signed("client", key_size=KEY_BITS)


def token_factory(key: rsa.RSAPrivateKey, seed: bytes = b"tok", scheme: OTSScheme = OTSScheme.LAMPORT) -> Callable[[], OfflineToken]:
    rng = seeded_rng(seed)
    return lambda: make_offline_token(key, rng, scheme)


def server_config(pool_size: int = 4, **kw: object) -> ReverseServerConfig:
    creds = server_credentials()
    pool = None
    if pool_size:
        pool = SignaturePool(pool_size)
        pool.fill(token_factory(creds.private_key))
    kw.setdefault("puzzle", PuzzleParams(n_bits=512))
    return ReverseServerConfig(ServerConfig(credentials=creds, cipher_suites=SUITES), pool=pool, **kw)  # type: ignore[arg-type]


def client_config(**kw: object) -> ReverseClientConfig:
    kw.setdefault("credentials", client_credentials())
    return ReverseClientConfig(ClientConfig(server_name="localhost", cipher_suites=SUITES), **kw)  # type: ignore[arg-type]


def pump(client: Connection, server: Connection, max_rounds: int = 20) -> tuple[list[Event], list[Event]]:
    """Move bytes both ways until neither side has anything to send."""
    c_events: list[Event] = []
    s_events: list[Event] = []
    for _ in range(max_rounds):
        to_server = client.data_to_send()
        if to_server:
            s_events += server.receive_data(to_server)
        to_client = server.data_to_send()
        if to_client:
            c_events += client.receive_data(to_client)
        if not to_server and not to_client:
            break
    return c_events, s_events


# --- misbehaving peers (test doubles of the *peer*, never of the code under test) --------

from reverse_ssl.client_connection import ReverseClientConnection  # noqa: E402
from reverse_ssl.puzzle import PuzzleReply  # noqa: E402


class TamperingClient(ReverseClientConnection):
    """Solves the puzzle honestly, then sends ``tamper(reply)`` instead of the reply."""

    def __init__(self, config: ReverseClientConfig, tamper: Callable[[PuzzleReply], PuzzleReply]) -> None:
        self.tamper = tamper
        super().__init__(config)

    def _handle_puzzle_request(self, raw: bytes) -> None:
        super()._handle_puzzle_request(raw)
        assert self.puzzle_solution is not None
        self.puzzle_solution.reply = self.tamper(self.puzzle_solution.reply)


class LeakyPool(SignaturePool):
    """A broken server pool that hands out the same one-time key again and again."""

    def __init__(self, token: OfflineToken) -> None:
        super().__init__(1)
        self._token = token

    def __len__(self) -> int:
        return 1

    def take(self) -> OfflineToken | None:
        import copy

        clone = copy.copy(self._token)
        clone.signer = copy.copy(self._token.signer)
        clone.signer.used = False
        return clone
