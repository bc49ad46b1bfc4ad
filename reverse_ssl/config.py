"""Configuration of Reverse SSL endpoints (immutable, validated at construction).

A Reverse SSL endpoint *is* a :mod:`tls12` endpoint with more options: the
``tls`` field holds the ordinary :class:`tls12.ServerConfig` /
:class:`tls12.ClientConfig` (credentials, suites, RNG), used unchanged when
the peer does not speak Reverse SSL.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tls12.certs import Credentials
from tls12.config import ClientConfig, ServerConfig
from tls12.suites import CipherSuite

from .messages import Mode
from .ots import OTSScheme
from .puzzle import PuzzleParams, ReplayCache, SignaturePolicy

if TYPE_CHECKING:
    from .aio.pool import SignaturePool

__all__ = ["RSA_SUITES", "ReverseServerConfig", "ReverseClientConfig", "SeenKeyCache"]

#: The suites Reverse SSL runs over: RSA key transport, whose premaster the client decrypts.
RSA_SUITES = (CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA256, CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA)


class SeenKeyCache:
    """The one-time public keys a client has already seen (bounded; by SHA-256).

    A server that signs twice with one one-time key hands out enough of the
    secret to forge; the only party that can notice is a client that sees
    the same key again.  Share one cache between a client's connections.
    """

    def __init__(self, capacity: int = 100_000) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._seen: OrderedDict[bytes, None] = OrderedDict()

    def check_and_add(self, public_key: bytes) -> bool:
        """True if ``public_key`` is new (and remember it); False if seen before."""
        digest = hashlib.sha256(public_key).digest()
        if digest in self._seen:
            return False
        self._seen[digest] = None
        while len(self._seen) > self.capacity:
            self._seen.popitem(last=False)
        return True


@dataclass(frozen=True)
class ReverseServerConfig:
    """A Reverse SSL server.

    ``modes`` in preference order; ``allow_original`` lets clients without
    Reverse SSL run the standard handshake (False makes puzzles mandatory).
    ``pool`` holds the offline-signed one-time keys (None: always the RSA
    fallback).  ``signature_policy`` decides when the puzzle's
    self-signature is verified; ``replay_cache`` is shared by all
    connections of the server.  ``verify_client_certificate`` receives the
    client's DER chain and raises :class:`tls12.errors.BadCertificate` to
    refuse it (chains are not verified by default: the testbed studies cost,
    not PKI).
    """

    tls: ServerConfig
    modes: tuple[Mode, ...] = (Mode.CLIENT_AUTH, Mode.PUZZLE)
    allow_original: bool = True
    pool: SignaturePool | None = None
    puzzle: PuzzleParams = field(default_factory=PuzzleParams)
    signature_policy: SignaturePolicy = SignaturePolicy.WHEN_POOL_EMPTY
    replay_cache: ReplayCache = field(default_factory=ReplayCache)
    verify_client_certificate: Callable[[list[bytes]], None] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "modes", tuple(Mode(m) for m in self.modes))
        if not self.modes and not self.allow_original:
            raise ValueError("a server needs at least one mode or allow_original")


@dataclass(frozen=True)
class ReverseClientConfig:
    """A Reverse SSL client.

    ``modes`` are offered in the ClientHello; ``CLIENT_AUTH`` only with
    ``credentials`` (the client's certificate and key).  ``seen_keys``
    detects one-time key reuse across this client's connections.  A puzzle
    larger than ``max_puzzle_bits`` / ``max_preimage_bits`` is refused
    (a server must not make a client spin forever).  ``accept_rsa_fallback``
    accepts a plain RSA signature when the server's pool ran dry.
    """

    tls: ClientConfig
    modes: tuple[Mode, ...] = (Mode.CLIENT_AUTH, Mode.PUZZLE)
    credentials: Credentials | None = None
    seen_keys: SeenKeyCache | None = field(default_factory=SeenKeyCache)
    max_puzzle_bits: int = 4096
    max_preimage_bits: int = 24
    accept_rsa_fallback: bool = True
    accepted_schemes: tuple[OTSScheme, ...] = tuple(OTSScheme)

    def __post_init__(self) -> None:
        modes = tuple(Mode(m) for m in self.modes)
        if Mode.CLIENT_AUTH in modes and self.credentials is None:
            modes = tuple(m for m in modes if m is not Mode.CLIENT_AUTH)
        object.__setattr__(self, "modes", modes)
        if self.max_preimage_bits < 0 or self.max_puzzle_bits < 512:
            raise ValueError("puzzle limits are too small")
