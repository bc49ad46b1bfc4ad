"""Everything of Reverse SSL that touches sockets, threads or processes.

* :mod:`.stream` -- asyncio streams around the sans-IO connections (:func:`serve`,
  :func:`connect`), the per-server counters :class:`ReverseServerStats` and the
  closed-loop load generator;
* :mod:`.server` and :mod:`.client` -- the programs behind ``python -m reverse_ssl.server``
  and ``python -m reverse_ssl.client``;
* :mod:`.pool` -- the stock of offline-signed one-time keys and the thread that refills it;
* :mod:`.measure` -- the measuring plumbing of :mod:`reverse_ssl.experiments`: ``openssl
  speed`` and a server and load generator started as subprocesses.

The protocol itself is not here: it lives in the sans-IO cores one level up.
"""

from __future__ import annotations

from .pool import PoolMetrics, PoolRefiller, SignaturePool
from .stream import LoadResult, ReverseServerStats, closed_loop_load, connect, echo_handler, serve

__all__ = [
    "ReverseServerStats",
    "serve",
    "connect",
    "echo_handler",
    "LoadResult",
    "closed_loop_load",
    "SignaturePool",
    "PoolRefiller",
    "PoolMetrics",
]
