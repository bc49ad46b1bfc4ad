"""A tampering HTTP proxy for the SINE interop tests.

It sits between the client and the (real, unmodified) Squid: every request is forwarded to
the upstream proxy unchanged, the whole response body is read, and ``rewrite(path, body)`` may
return replacement bytes (``None`` keeps them).  ``Content-Length`` is recomputed, so the
client sees a well-formed HTTP response carrying a modified SINE stream -- exactly what a
malicious cache could send.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from urllib.parse import urlsplit

import h11

from sine.aio.client import HttpConnection

__all__ = ["TamperProxy"]

_DROP = {b"content-length", b"transfer-encoding", b"connection", b"keep-alive"}


class TamperProxy:
    """``await TamperProxy(upstream_url, rewrite).start()`` returns the listening port."""

    def __init__(self, upstream: str, rewrite: Callable[[str, bytes], bytes | None]) -> None:
        u = urlsplit(upstream)
        self.upstream_host, self.upstream_port = u.hostname or "127.0.0.1", u.port or 3128
        self.rewrite = rewrite
        self.rewritten: list[str] = []
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for w in list(self._writers):
                w.close()
            await self._server.wait_closed()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
                          ) -> None:
        conn = h11.Connection(h11.SERVER)
        upstream = HttpConnection(self.upstream_host, self.upstream_port)
        self._writers.add(writer)
        request: h11.Request | None = None
        try:
            for _ in range(10_000):  # bounded number of events per connection
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    data = await reader.read(65536)
                    conn.receive_data(data)
                elif isinstance(event, h11.Request):
                    request = event
                elif isinstance(event, h11.EndOfMessage) and request is not None:
                    await self._forward(conn, writer, upstream, request)
                    conn.start_next_cycle()
                    request = None
                else:
                    break
        except (h11.ProtocolError, ConnectionError):
            pass
        finally:
            self._writers.discard(writer)
            await upstream.close()
            writer.close()

    async def _forward(self, conn: h11.Connection, writer: asyncio.StreamWriter,
                       upstream: HttpConnection, req: h11.Request) -> None:
        headers = [(k.decode(), v.decode("latin-1")) for k, v in req.headers
                   if k not in (b"connection",)]
        resp, body = await upstream.request(req.target.decode(), headers)
        data = b"".join([chunk async for chunk in body])
        path = urlsplit(req.target.decode()).path
        new = self.rewrite(path, data)
        if new is not None:
            self.rewritten.append(path)
            data = new
        out = [(k, v) for k, v in resp.headers if k.lower() not in _DROP]
        out.append((b"Content-Length", str(len(data)).encode()))
        writer.write(conn.send(h11.Response(status_code=resp.status_code, headers=out)))
        writer.write(conn.send(h11.Data(data=data)))
        writer.write(conn.send(h11.EndOfMessage()))
        await writer.drain()
