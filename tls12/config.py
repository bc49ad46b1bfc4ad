"""Configuration of server and client connections (immutable, validated at construction)."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .certs import Credentials
from .keylog import KeyLog
from .keys import LocalKey, PrivateKeyOperations
from .session import SessionStore
from .suites import DEFAULT_SUITES, SUITES, CipherSuite

__all__ = ["ServerConfig", "ClientConfig", "SUPPORTED_GROUPS", "Random", "SYSTEM_RNGS"]

Random = Callable[[int], bytes]
"""An injected source of random bytes: ``rng(n) -> n bytes``.  Default ``os.urandom``;
tests and simulations pass a seeded generator for reproducible transcripts."""

SUPPORTED_GROUPS: tuple[str, ...] = ("x25519", "secp256r1")

SYSTEM_RNGS: tuple[Random, ...] = (os.urandom, secrets.token_bytes)
"""The ``rng`` values that mean "no reproducible transcript wanted": the only ones that
``random_ivs=True`` accepts."""


def _check_random_ivs(random_ivs: bool, rng: Random) -> None:
    if random_ivs and rng not in SYSTEM_RNGS:
        raise ValueError("random_ivs=True needs the system rng (os.urandom): a seeded rng asks "
                         "for reproducible records, which OpenSSL's own IVs cannot give")


def _check_keylog(keylog: object) -> None:
    if keylog is not None and not callable(keylog):
        raise TypeError(f"keylog must be a callable that takes one line, or None, not {keylog!r} "
                        "(tls12.keylog.open_keylog(path) makes one that appends to a file)")


def _check_suites(suites: Sequence[CipherSuite]) -> tuple[CipherSuite, ...]:
    out = tuple(CipherSuite(s) for s in suites)
    if not out:
        raise ValueError("at least one cipher suite is required")
    for s in out:
        if s not in SUITES:
            raise ValueError(f"unsupported cipher suite {s!r}")
    return out


@dataclass(frozen=True)
class ServerConfig:
    """What a :class:`tls12.ServerConnection` needs.

    ``key_operations`` is seam 1 (see :mod:`tls12.keys`): by default the
    certificate's private key in this process; WebALPS passes an object that
    forwards the premaster decryption and the ServerKeyExchange signature to a
    guardian process.  ``credentials`` may hold the chain alone
    (:meth:`tls12.certs.Credentials.chain_only`) when every connection is given a
    session delegate (:mod:`tls12.delegate`) that holds the key: ``key_operations`` then stays
    ``None`` and a :class:`tls12.ServerConnection` without a delegate refuses the config.
    ``trace`` turns each connection's trace on at construction (``enable_trace()``).
    ``keylog`` is the debugging switch of :mod:`tls12.keylog` (off by default).
    """

    credentials: Credentials
    cipher_suites: tuple[CipherSuite, ...] = DEFAULT_SUITES
    session_store: SessionStore | None = None
    key_operations: PrivateKeyOperations | None = None
    groups: tuple[str, ...] = SUPPORTED_GROUPS
    rng: Random = field(default=os.urandom)
    random_ivs: bool = False
    """Draw explicit CBC IVs at random instead of from k' (:mod:`tls12.record`); off by default.
    On, bulk application-data writes go through OpenSSL's multi-block AES-CBC-HMAC-SHA pass
    (:meth:`tls12.record.WriteProtection.seal_many`), which draws their IVs itself, and every
    other record's IV comes from ``rng``.  The price: records are no longer byte-reproducible
    from exported state, so no mirror that re-seals them (SSLACC) may serve such a connection;
    and only a system ``rng`` (:data:`SYSTEM_RNGS`) is accepted."""
    trace: bool = False
    """Record what each connection does from its first byte (:mod:`tls12.trace`)."""
    keylog: KeyLog | None = None
    """Debugging switch: receives each connection's NSS key-log line (:mod:`tls12.keylog`);
    whoever reads those lines can decrypt the connection."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "cipher_suites", _check_suites(self.cipher_suites))
        _check_keylog(self.keylog)
        _check_random_ivs(self.random_ivs, self.rng)
        bad = [g for g in self.groups if g not in SUPPORTED_GROUPS]
        if bad or not self.groups:
            raise ValueError(f"groups must be a non-empty subset of {SUPPORTED_GROUPS}, got {self.groups}")
        if self.key_operations is None and self.credentials.private_key is not None:
            object.__setattr__(self, "key_operations", LocalKey(self.credentials.private_key))


@dataclass(frozen=True)
class ClientConfig:
    """What a :class:`tls12.ClientConnection` needs.

    ``session`` (from a previous connection's ``session`` attribute) asks the
    server to resume it.  The certificate chain is *not* verified unless
    ``verify_certificate`` is given: a callable that receives the DER chain and
    raises :class:`tls12.errors.BadCertificate` to reject it.  ``trace`` turns the
    connection's trace on before its ClientHello (``enable_trace()`` would miss it).
    ``keylog`` is the debugging switch of :mod:`tls12.keylog` (off by default).
    """

    server_name: str | None = None
    cipher_suites: tuple[CipherSuite, ...] = DEFAULT_SUITES
    groups: tuple[str, ...] = SUPPORTED_GROUPS
    offer_extended_master_secret: bool = True
    session: object | None = None
    verify_certificate: Callable[[list[bytes]], None] | None = None
    rng: Random = field(default=os.urandom)
    random_ivs: bool = False
    """As :attr:`ServerConfig.random_ivs`, for the client's writes."""
    trace: bool = False
    """Record what each connection does from its first byte (:mod:`tls12.trace`)."""
    keylog: KeyLog | None = None
    """Debugging switch: receives each connection's NSS key-log line (:mod:`tls12.keylog`);
    whoever reads those lines can decrypt the connection."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "cipher_suites", _check_suites(self.cipher_suites))
        _check_keylog(self.keylog)
        _check_random_ivs(self.random_ivs, self.rng)
        bad = [g for g in self.groups if g not in SUPPORTED_GROUPS]
        if bad or not self.groups:
            raise ValueError(f"groups must be a non-empty subset of {SUPPORTED_GROUPS}, got {self.groups}")
