"""The HTTPS file server in a background thread: what tests, benchmarks and the demo start.

:class:`BackgroundServer` runs :func:`testbed.apps.server.start_server` on an event loop of its
own in a daemon thread, so synchronous code (a pytest test, a loop of ``curl`` runs) can talk
to it over loopback and then read its :class:`~testbed.apps.stats.ServerStats`::

    with BackgroundServer(root, ServerConfig(credentials=generate_self_signed())) as srv:
        before = srv.wait_idle()
        subprocess.run(["curl", "-k", f"{srv.url}/file.bin"])
        srv.wait_idle()
        print(srv.stats.connections[before].bytes_out)
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from tls12.aio import DEFAULT_HANDSHAKE_TIMEOUT, Answer, SansIOConnection, TLSStream
from tls12.config import ServerConfig
from tls12.server_connection import ServerConnection

from .file_handler import DEFAULT_IDLE_TIMEOUT
from .server import start_server
from .stats import ServerStats

__all__ = ["BackgroundServer"]


class BackgroundServer:
    """The HTTPS server in a daemon thread with its own event loop.

    Used as a context manager; ``port`` and ``url`` are known after entering.
    ``stop()`` closes the listening socket and cancels open connections.
    ``connection_factory`` and ``on_close`` are passed to :func:`~testbed.apps.server.start_server`
    (a WebALPS host builds delegated connections and releases their key handles), and so is
    ``answer`` (how those connections' questions to their delegate are answered).
    """

    def __init__(
        self,
        root: str | Path,
        config: ServerConfig,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        coalesce: bool = True,
        connection_factory: Callable[[ServerConfig], SansIOConnection] = ServerConnection,
        on_close: Callable[[TLSStream], None] | None = None,
        answer: Answer | None = None,
    ) -> None:
        self.root = Path(root)
        self.answer = answer
        self.connection_factory = connection_factory
        self.on_close = on_close
        self.config = config
        self.host = host
        self.port = port
        self.handshake_timeout = handshake_timeout
        self.idle_timeout = idle_timeout
        self.coalesce = coalesce
        self.stats = ServerStats()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        try:
            server = await start_server(
                self.root,
                self.host,
                self.port,
                self.config,
                stats=self.stats,
                handshake_timeout=self.handshake_timeout,
                idle_timeout=self.idle_timeout,
                coalesce=self.coalesce,
                connection_factory=self.connection_factory,
                on_close=self.on_close,
                answer=self.answer,
            )
        except BaseException as exc:
            self._failure = exc
            self._ready.set()
            raise
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stop.wait()
        # asyncio.run() cancels the connection tasks still running

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # reported through start()
            if self._failure is None:
                self._failure = exc

    def wait_idle(self, timeout: float = 10.0) -> int:
        """Wait until no connection is open; returns the number of finished connections.

        Call it before starting a client whose connection record you want:
        the record will then be ``stats.connections[returned value]``.
        """
        deadline = time.monotonic() + timeout
        while self.stats.active > 0:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.stats.active} connection(s) still open after {timeout} s")
            time.sleep(0.005)
        return len(self.stats.connections)

    def start(self, timeout: float = 10.0) -> BackgroundServer:
        """Start the thread and wait until the server accepts connections."""
        if self._thread is not None:
            raise RuntimeError("already started")
        self._thread = threading.Thread(target=self._run, name="https-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError(f"server not ready after {timeout} s")
        if self._failure is not None:
            raise RuntimeError(f"server failed to start: {self._failure!r}") from self._failure
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving and join the thread."""
        if self._thread is None:
            return
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            try:
                self._loop.call_soon_threadsafe(self._stop.set)
            except RuntimeError:
                pass  # loop already closed
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"server thread still running after {timeout} s")
        self._thread = None

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
