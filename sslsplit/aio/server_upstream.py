"""Forwarding to an existing HTTP server (the paper's STunnel deployment, §4.1, §5.4).

Instead of serving a document root, the splitting server can sit in front of
any plain HTTP server: each request that arrives inside TLS is forwarded to
the upstream server and the response is relayed back.  For the payloads to be
cacheable across connections, the relay writes the response head in its own
record and the body in 16 KiB-aligned pieces, so the same file always splits
into the same records whatever chunks the upstream server happened to send.
"""

from __future__ import annotations

import asyncio
import logging
from http import HTTPStatus

import h11

from tls12.aio import TLSStream

__all__ = ["UpstreamForwarder", "MAX_HEAD"]

logger = logging.getLogger("sslsplit.upstream")
RECORD = 16384
MAX_HEAD = 64 * 1024
HOP_BY_HOP = {b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding", b"te", b"trailer", b"upgrade"}


class UpstreamForwarder:
    """The HTTP side of one TLS connection: requests go to ``upstream``, responses come back."""

    def __init__(self, stream: TLSStream, upstream: tuple[str, int], *, timeout: float = 30.0) -> None:
        self.stream = stream
        self.upstream = upstream
        self.timeout = timeout
        self.client = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)

    async def _send(self, event: h11.Event) -> None:
        data = self.client.send(event)
        if data:
            self.stream.write(data)
            await self.stream.drain()

    async def _next_client_event(self) -> h11.Event | type[h11.NEED_DATA] | type[h11.PAUSED]:
        while (event := self.client.next_event()) is h11.NEED_DATA:
            async with asyncio.timeout(self.timeout):
                self.client.receive_data(await self.stream.read())
        return event

    async def run(self) -> None:
        while True:
            if h11.MUST_CLOSE in (self.client.our_state, self.client.their_state):
                return
            if self.client.our_state is h11.DONE and self.client.their_state is h11.DONE:
                self.client.start_next_cycle()
            try:
                event = await self._next_client_event()
            except (h11.RemoteProtocolError, TimeoutError):
                return
            if isinstance(event, h11.Request):
                body = bytearray()
                while not isinstance(ev := await self._next_client_event(), h11.EndOfMessage):
                    if isinstance(ev, h11.Data):
                        body += ev.data
                        if len(body) > MAX_HEAD:
                            return
                    elif isinstance(ev, h11.ConnectionClosed):
                        return
                await self._forward(event, bytes(body))
            elif isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                return

    async def _forward(self, request: h11.Request, body: bytes) -> None:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(*self.upstream), self.timeout)
        except (OSError, TimeoutError):
            await self._error(502, b"upstream unreachable\n")
            return
        try:
            up = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD)
            headers = [(k, v) for k, v in request.headers if k.lower() not in HOP_BY_HOP and k.lower() != b"content-length"]
            headers.append((b"Connection", b"close"))
            if body:
                headers.append((b"Content-Length", str(len(body)).encode()))
            out = up.send(h11.Request(method=request.method, target=request.target, headers=headers)) or b""
            if body:
                out += up.send(h11.Data(data=body)) or b""
            writer.write(out + (up.send(h11.EndOfMessage()) or b""))
            await writer.drain()
            pending = bytearray()
            while True:
                event = up.next_event()
                if event is h11.NEED_DATA:
                    async with asyncio.timeout(self.timeout):
                        up.receive_data(await reader.read(65536))
                    continue
                if isinstance(event, h11.Response):
                    resp_headers = [(k, v) for k, v in event.headers if k.lower() not in HOP_BY_HOP]
                    await self._send(h11.Response(status_code=event.status_code, headers=resp_headers, reason=event.reason))
                elif isinstance(event, h11.Data):
                    pending += event.data
                    if len(pending) >= RECORD:
                        cut = len(pending) - len(pending) % RECORD
                        await self._send(h11.Data(data=bytes(pending[:cut])))
                        del pending[:cut]
                elif isinstance(event, h11.EndOfMessage):
                    if pending:
                        await self._send(h11.Data(data=bytes(pending)))
                    await self._send(h11.EndOfMessage())
                    return
                elif isinstance(event, h11.ConnectionClosed):
                    raise ConnectionError("upstream closed mid-response")
        except (h11.ProtocolError, TimeoutError, ConnectionError) as exc:
            logger.info("upstream failed: %r", exc)
            if self.client.our_state is h11.SEND_RESPONSE:
                await self._error(502, b"bad upstream response\n")
            else:
                raise ConnectionAbortedError("upstream failed mid-response") from exc
        finally:
            writer.close()

    async def _error(self, status: int, text: bytes) -> None:
        headers = [("Content-Length", str(len(text))), ("Content-Type", "text/plain"), ("Connection", "close")]
        await self._send(h11.Response(status_code=status, headers=headers, reason=HTTPStatus(status).phrase.encode()))
        await self._send(h11.Data(data=text))
        await self._send(h11.EndOfMessage())
