"""Shared helpers for the Reverse SSL tests: small keys, configurations, misbehaving peers.

In-memory pairs run through :func:`tls12.testing.pipe`; deterministic randomness comes from
:func:`tls12.testing.seeded_rng`.
"""

from __future__ import annotations

from collections.abc import Callable

from cryptography.hazmat.primitives.asymmetric import rsa

from reverse_ssl.aio.pool import SignaturePool
from reverse_ssl.config import ReverseClientConfig, ReverseServerConfig
from reverse_ssl.onoff import OfflineToken, make_offline_token
from reverse_ssl.ots import OTSScheme
from reverse_ssl.puzzle import PuzzleParams
from tls12 import ClientConfig, ServerConfig
from tls12.certs import Credentials
from tls12.suites import CipherSuite
from tls12.testing import credentials, seeded_rng

KEY_BITS = 1024
SUITES = (CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA256, CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA)


def server_credentials() -> Credentials:
    """The server's small RSA key and certificate (made once per process)."""
    return credentials(bits=KEY_BITS, common_name="localhost")


def client_credentials() -> Credentials:
    """The client's own RSA key and certificate, for client authentication (made once)."""
    return credentials(bits=KEY_BITS, common_name="client")


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
