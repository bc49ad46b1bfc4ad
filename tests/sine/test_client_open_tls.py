"""``SineClient.open_tls``: a SINEB session's handshake outside the fetch, over loopback.

What the measured SINEB figures rely on: after :meth:`~sine.aio.client.SineClient.open_tls` the
origin has seen one TLS connection and no request, and the next ``get`` reuses that connection
(one ``AT_sign`` round trip, no second handshake).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from pathlib import Path

import pytest

from sine.aio.client import ConnectFailed, SineClient
from sine.aio.server import OriginServer, make_self_signed
from sine.algorithms import SigningKey
from sine.site import sign_site
from tests.sine.sine_helpers import site_files, write_site


def _tls_context(tmp_path: Path) -> tuple[ssl.SSLContext, bytes]:
    cert, key = make_self_signed("127.0.0.1")
    (tmp_path / "c.pem").write_bytes(cert)
    (tmp_path / "k.pem").write_bytes(key)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(tmp_path / "c.pem", tmp_path / "k.pem")
    return ctx, cert


def test_open_tls_handshakes_once_and_get_reuses_the_connection(
    tmp_path: Path, ed_key: SigningKey
) -> None:
    root = write_site(tmp_path / "root", site_files())
    sign_site(root, ed_key, time.time())
    ctx, cert = _tls_context(tmp_path)

    async def go() -> None:
        origin = OriginServer(root)
        port, tls_port = await origin.start(tls=ctx)
        try:
            async with SineClient(f"http://127.0.0.1:{port}", mode="sineb",
                                  tls_origin=f"https://127.0.0.1:{tls_port}",
                                  tls_ca=cert) as c:
                await c.open_tls()
                await c.open_tls()  # open and idle: no second handshake
                assert c.counters.tls_handshakes == 1
                assert (c.counters.requests, c.counters.origin_round_trips) == (0, 0)
                for _ in range(50):  # the server counts the connection when it accepts it
                    if origin.stats.tls_connections:
                        break
                    await asyncio.sleep(0.01)
                assert (origin.stats.tls_connections, origin.stats.tls_requests) == (1, 0)
                r = await c.get("/img.bin")
                assert r.ok and r.method == "digest", r.error
                assert r.data == (root / "img.bin").read_bytes()
                assert c.counters.tls_handshakes == 1 and c.counters.origin_round_trips == 1
                assert (origin.stats.tls_connections, origin.stats.tls_requests) == (1, 1)
        finally:
            await origin.close()

    asyncio.run(asyncio.wait_for(go(), 30))


def test_open_tls_needs_a_tls_origin_and_reports_an_unreachable_one(
    tmp_path: Path, ed_key: SigningKey
) -> None:
    _, cert = _tls_context(tmp_path)

    async def go() -> None:
        plain = SineClient("http://127.0.0.1:9", mode="sine", public_key=ed_key.verifying_key())
        with pytest.raises(ValueError, match="no TLS origin"):
            await plain.open_tls()
        # a port bound but not listening: the connect is refused
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            async with SineClient(f"http://127.0.0.1:{port}", mode="sineb",
                                  tls_origin=f"https://127.0.0.1:{port}", tls_ca=cert) as c:
                with pytest.raises(ConnectFailed):
                    await c.open_tls()
                assert c.counters.tls_handshakes == 0

    asyncio.run(asyncio.wait_for(go(), 30))
