"""Reverse SSL (Bicakci, Crispo, Tanenbaum): the server signs online/offline, the client decrypts.

In the standard RSA handshake the server *decrypts* the premaster secret,
one RSA private-key operation per client.  Reverse SSL swaps the roles:

* the client sends a public key -- its certificate (client authentication,
  Figure 1b) or a key generated on the fly inside a window the server chose,
  which makes key generation a **client puzzle** (Figure 2, :mod:`.puzzle`);
* the server encrypts the premaster secret for it (a cheap public-key
  operation) and proves who it is with an **online/offline signature**
  (:mod:`.onoff`): the RSA signature over a one-time public key was made
  earlier, during idle time (:mod:`.aio.pool`); online only the one-time
  signature remains (:mod:`.ots`, Lamport or Winternitz: table look-ups).

Layout: sans-IO cores (:mod:`.ots`, :mod:`.onoff`, :mod:`.primes`,
:mod:`.puzzle`, :mod:`.messages`, :mod:`.server_connection`,
:mod:`.client_connection`) built on :mod:`tls12` through its seams, with the
state machine in :mod:`.state` and the exception root in :mod:`.errors`;
everything with sockets, threads or subprocesses in :mod:`.aio` (streams,
server, client, the pool refiller, the measuring plumbing of the
experiments); ``python -m reverse_ssl.server`` / ``reverse_ssl.client`` are
the programs; the SimPy models :mod:`.model_dos` (hand-written) and
:mod:`.simulate` (on the driver); tables and figures in :mod:`.experiments`.
"""

from .aio.pool import PoolMetrics, PoolRefiller, SignaturePool
from .client_connection import ReverseClientConnection
from .config import RSA_SUITES, ReverseClientConfig, ReverseServerConfig, SeenKeyCache
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
    ReverseSSLError,
    ReverseSSLRefused,
    WrongPreimage,
)
from .messages import Mode
from .onoff import OfflineToken, OnlineOfflineSignature, make_offline_token, sign_online
from .ots import OneTimeSigner, OTSScheme
from .puzzle import Construction, PuzzleParams, ReplayCache, SignaturePolicy
from .server_connection import ReverseServerConnection
from .state import ReverseState

__all__ = [
    "ReverseServerConnection",
    "ReverseClientConnection",
    "ReverseServerConfig",
    "ReverseClientConfig",
    "RSA_SUITES",
    "ReverseState",
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
    "ReverseSSLError",
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
