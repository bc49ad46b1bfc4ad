"""The HTTPS file server on an event loop: TLS from :mod:`tls12.aio` (its transport-level adapter), HTTP from the handler.

:func:`start_server` binds a listening socket on the running event loop and serves, for each
accepted connection, a :class:`~testbed.apps.file_handler.HTTPFileHandler` on top of a
:class:`~tls12.aio.TLSProtocol` (the transport-level adapter: the handshake runs in
callbacks, the handler gets the :class:`~tls12.aio.TLSStream` API), with a :class:`~testbed.apps.stats.ServerStats` counting what
every connection cost.  Protocol variants reuse it through two seams: ``connection_factory``
builds their own sans-IO server connection (the SSL-splitting server of :mod:`sslsplit.server`)
and ``on_close`` releases per-connection state.  To run it from a thread (tests, the demo) see
:class:`testbed.apps.harness.BackgroundServer`; from a shell, :mod:`testbed.apps.https_cli`::

    server = await start_server("www", "127.0.0.1", 8443, ServerConfig(credentials=creds))
    async with server:
        await server.serve_forever()
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from tls12.aio import DEFAULT_HANDSHAKE_TIMEOUT, Answer, SansIOConnection, TLSStream, serve_protocol
from tls12.config import ServerConfig
from tls12.server_connection import ServerConnection

from .file_handler import DEFAULT_IDLE_TIMEOUT, HTTPFileHandler
from .stats import ServerStats

__all__ = ["LOOPS", "loop_factory", "start_server"]

LOOPS = ("asyncio", "uvloop")
"""Event loops the servers run on: asyncio's own, or uvloop's (the ``fast`` extra)."""


def loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """What ``asyncio.Runner(loop_factory=...)`` needs for the loop ``name`` (one of :data:`LOOPS`).

    ``uvloop`` is optional (``pip install 'websec-testbed[fast]'``): :class:`ModuleNotFoundError`
    says so when it is missing, :class:`ValueError` names an unknown loop.
    """
    if name == "asyncio":
        return asyncio.new_event_loop
    if name == "uvloop":
        try:
            import uvloop
        except ModuleNotFoundError as exc:
            raise ModuleNotFoundError(
                "--loop uvloop needs uvloop: pip install 'websec-testbed[fast]' (or uvloop)") from exc
        factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
        return factory
    raise ValueError(f"unknown event loop {name!r}; known: {', '.join(LOOPS)}")


async def start_server(
    root: str | Path,
    host: str,
    port: int,
    config: ServerConfig,
    *,
    stats: ServerStats | None = None,
    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT,
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    connection_factory: Callable[[ServerConfig], SansIOConnection] = ServerConnection,
    on_close: Callable[[TLSStream], None] | None = None,
    coalesce: bool = True,
    answer: Answer | None = None,
) -> asyncio.Server:
    """Serve the files under ``root`` over HTTPS on the running event loop.

    Counters go to ``stats`` (pass your own :class:`ServerStats` to read them).
    ``connection_factory`` and ``on_close`` are passed to :func:`tls12.aio.serve_protocol`:
    protocol variants (an SSL-splitting server) build their own connections
    and release per-connection state when a connection ends.  ``coalesce``
    decides whether the response head shares a record with the body (see
    :class:`HTTPFileHandler`); SSL splitting turns it off.  ``answer``: the
    delegate's answers for connections that ask by event (:func:`tls12.aio.serve`).
    The handler gets each connection as a :class:`~tls12.aio.TLSProtocol`, a
    :class:`~tls12.aio.TLSStream` subclass, and answers keep-alive GETs of small files inside
    the transport's callback (:attr:`~tls12.aio.TLSProtocol.fast_reader`).  The handler starts
    with the client's first bytes after the handshake (``lazy_handler``, HTTP's client speaks
    first): a client that handshakes and leaves costs no task; the first request's idle
    timeout counts from the end of the handshake all the same.
    """
    root_path = Path(root).resolve(strict=True)
    if not root_path.is_dir():
        raise NotADirectoryError(f"{root} is not a directory")
    the_stats = stats if stats is not None else ServerStats()

    async def handler(stream: TLSStream) -> None:
        await HTTPFileHandler(stream, root_path, the_stats, idle_timeout, coalesce=coalesce).run()

    return await serve_protocol(
        handler,
        host,
        port,
        config,
        handshake_timeout=handshake_timeout,
        connection_factory=connection_factory,
        answer=answer,
        on_open=the_stats.open,
        on_close=_chain(the_stats.record, on_close),
        lazy_handler=idle_timeout,  # HTTP: the client speaks first; a silent client costs no task
    )


def _chain(first: Callable[[TLSStream], None], second: Callable[[TLSStream], None] | None) -> Callable[[TLSStream], None]:
    if second is None:
        return first

    def both(stream: TLSStream) -> None:
        first(stream)
        second(stream)

    return both
