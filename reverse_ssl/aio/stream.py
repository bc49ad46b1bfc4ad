"""asyncio adapters for Reverse SSL: the :mod:`tls12.aio` stream around the Reverse SSL cores.

Nothing protocol-specific happens here: :func:`serve` and :func:`connect`
pass a connection factory to :func:`tls12.aio.serve` / :func:`tls12.aio.connect`,
which already guarantee that a misbehaving peer loses only its own connection
(fatal alert, socket closed, error logged, server keeps serving) and that a
silent peer is timed out.

:class:`ReverseServerStats` counts what happened per connection -- handshakes by
mode, refusals by error class, fallback signatures -- from the ``on_close``
callback; the experiments and the CLI report it.

:func:`closed_loop_load` is the load generator of the throughput experiment:
``concurrency`` clients each run handshake -> one request/response -> close,
back to back, for ``duration`` seconds.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from tls12.aio import DEFAULT_HANDSHAKE_TIMEOUT, TLSStream
from tls12.aio import connect as tls_connect
from tls12.aio import serve as tls_serve
from tls12.errors import TLSError

from ..client_connection import ReverseClientConnection
from ..config import ReverseClientConfig, ReverseServerConfig
from ..server_connection import ReverseServerConnection

__all__ = ["ReverseServerStats", "serve", "connect", "echo_handler", "LoadResult", "closed_loop_load"]


@dataclass
class ReverseServerStats:
    """Per-server counters filled as connections close."""

    handshakes: Counter[str] = field(default_factory=Counter)
    """Completed handshakes by mode name (``original``, ``CLIENT_AUTH``, ``PUZZLE``)."""
    refused: Counter[str] = field(default_factory=Counter)
    """Connections that ended in an error, by error class name."""
    fallback_signatures: int = 0
    self_signatures_verified: int = 0

    @property
    def total_handshakes(self) -> int:
        return sum(self.handshakes.values())

    def on_close(self, stream: TLSStream) -> None:
        conn = stream.conn
        if stream.handshake is not None and isinstance(conn, ReverseServerConnection):
            self.handshakes[conn.mode.name if conn.mode is not None else "original"] += 1
            self.fallback_signatures += int(conn.used_fallback_signature)
            self.self_signatures_verified += int(conn.verified_self_signature)
        elif stream.error is not None:
            self.refused[type(stream.error).__name__] += 1
        else:
            self.refused["closed_during_handshake"] += 1

    def as_dict(self) -> dict[str, object]:
        return {
            "handshakes": dict(self.handshakes),
            "refused": dict(self.refused),
            "fallback_signatures": self.fallback_signatures,
            "self_signatures_verified": self.self_signatures_verified,
        }


async def echo_handler(stream: TLSStream) -> None:
    """Echo every chunk of application data until the peer closes."""
    while data := await stream.read():
        stream.write(data)
        await stream.drain()


async def serve(
    handler: Callable[[TLSStream], Awaitable[None]],
    host: str,
    port: int,
    config: ReverseServerConfig,
    *,
    stats: ReverseServerStats | None = None,
    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT,
) -> asyncio.Server:
    """Start a Reverse SSL server (see :func:`tls12.aio.serve`)."""
    return await tls_serve(
        handler,
        host,
        port,
        config.tls,
        handshake_timeout=handshake_timeout,
        connection_factory=lambda _cfg: ReverseServerConnection(config),
        on_close=stats.on_close if stats is not None else None,
    )


async def connect(
    host: str, port: int, config: ReverseClientConfig, *, handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT
) -> TLSStream:
    """Open a Reverse SSL connection; ``stream.conn.mode`` tells what was negotiated."""
    return await tls_connect(
        host,
        port,
        config.tls,
        handshake_timeout=handshake_timeout,
        connection_factory=lambda _cfg: ReverseClientConnection(config),
    )


@dataclass(frozen=True)
class LoadResult:
    handshakes: int
    errors: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.handshakes / self.seconds if self.seconds > 0 else 0.0


async def closed_loop_load(
    host: str,
    port: int,
    config_factory: Callable[[], ReverseClientConfig],
    *,
    concurrency: int,
    duration: float,
    payload: bytes = b"ping",
) -> LoadResult:
    """``concurrency`` clients doing handshake + echo + close back to back for ``duration`` s."""
    if concurrency < 1 or duration <= 0:
        raise ValueError("concurrency must be >= 1 and duration > 0")
    deadline = time.monotonic() + duration
    done = 0
    errors = 0

    async def worker() -> None:
        nonlocal done, errors
        while time.monotonic() < deadline:
            try:
                stream = await connect(host, port, config_factory())
                stream.write(payload)
                await stream.read_exactly(len(payload))
                await stream.close()
                done += 1
            except (TLSError, OSError, asyncio.IncompleteReadError, TimeoutError):
                errors += 1
                await asyncio.sleep(0.01)

    start = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return LoadResult(done, errors, time.monotonic() - start)
