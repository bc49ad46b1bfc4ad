"""Reverse SSL (Bicakci, Crispo, Tanenbaum): the server signs online/offline, the client decrypts.

In the standard RSA handshake the server *decrypts* the premaster secret,
one RSA private-key operation per client.  Reverse SSL swaps the roles:

* the client sends a public key -- its certificate (client authentication,
  Figure 1b) or a key generated on the fly inside a window the server chose,
  which makes key generation a **client puzzle** (Figure 2, :mod:`.puzzle`);
* the server encrypts the premaster secret for it (a cheap public-key
  operation) and proves who it is with an **online/offline signature**
  (:mod:`.onoff`): the RSA signature over a one-time public key was made
  earlier, during idle time (:mod:`.pool`); online only the one-time
  signature remains (:mod:`.ots`, Lamport or Winternitz: table look-ups).

Layout: sans-IO cores (:mod:`.ots`, :mod:`.onoff`, :mod:`.primes`,
:mod:`.puzzle`, :mod:`.messages`, :mod:`.server_connection`,
:mod:`.client_connection`) built on :mod:`tls12` through its seams; asyncio
in :mod:`.aio`, :mod:`.server` and :mod:`.client` (both ``python -m``
CLIs); the SimPy DoS model in :mod:`.dos`; tables and figures in
:mod:`.experiments`.
"""

from .client_connection import ReverseClientConnection
from .config import ReverseClientConfig, ReverseServerConfig, SeenKeyCache
from .errors import (
    BadOfflineSignature,
    BadSelfSignature,
    ForgedOneTimeSignature,
    MissingSelfSignature,
    ModulusOutOfRange,
    OneTimeKeyReused,
    PuzzleRefused,
    PuzzleReplayed,
    ReusedOneTimeKey,
    ReverseSSLRefused,
    WrongPreimage,
)
from .messages import Mode
from .onoff import OfflineToken, OnlineOfflineSignature, make_offline_token, sign_online
from .ots import OneTimeSigner, OTSScheme
from .pool import PoolMetrics, PoolRefiller, SignaturePool
from .puzzle import Construction, PuzzleParams, ReplayCache, SignaturePolicy
from .server_connection import ReverseServerConnection

__all__ = [
    "ReverseServerConnection",
    "ReverseClientConnection",
    "ReverseServerConfig",
    "ReverseClientConfig",
    "SeenKeyCache",
    "Mode",
    "OTSScheme",
    "OneTimeSigner",
    "OfflineToken",
    "OnlineOfflineSignature",
    "make_offline_token",
    "sign_online",
    "SignaturePool",
    "PoolRefiller",
    "PoolMetrics",
    "Construction",
    "PuzzleParams",
    "SignaturePolicy",
    "ReplayCache",
    "ReverseSSLRefused",
    "PuzzleRefused",
    "OneTimeKeyReused",
    "BadOfflineSignature",
    "ForgedOneTimeSignature",
    "ReusedOneTimeKey",
    "WrongPreimage",
    "ModulusOutOfRange",
    "MissingSelfSignature",
    "BadSelfSignature",
    "PuzzleReplayed",
]
