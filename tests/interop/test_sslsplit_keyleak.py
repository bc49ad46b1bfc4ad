"""No MAC key, no client-write key and no master secret ever leaves the splitting origin.

The origin's side of the bargain (paper §3.2, §3.4): proxies get handshakes,
MACs, payload ids, cached payloads and -- in key-expose mode -- the
server-write encryption key and IV, and nothing else.  Here every byte the
origin sends towards a proxy is captured by taps (:mod:`split_taps`) on both
of its ports: the splitting port (stubs, key-expose, verbatim records) and
the record store (the payloads a cold proxy fetches on cache misses).  The
real key block of each connection is read on the origin itself, from the
state :func:`tls12.state.export_connection` exports.  For every suite the
origin accepts, in NULL, key-expose and ``auto`` mode, with one cold download
(the store path used) and one warm download (served from the proxy's cache):

* no 8-byte window of the master secret, of either MAC key, of the
  client-write key or IV, or of the ECDHE private key occurs anywhere in the
  captured bytes (a full-key substring search, and stricter: no partial leak);
* the one key-expose message of each connection carries exactly the
  server-write key and IV (empty for NULL suites);
* the capture is real: it holds the file's payloads (cold) and, in
  key-expose mode, the exposed key itself -- so a leak would have been seen.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sslsplit.aio import BackgroundLoop
from sslsplit.wire import KeyExpose
from sslsplit.writer import ENCRYPTING_SUITES, NULL_SUITES
from tests.interop.split_taps import KeyRecordingServer, TappedProxy, close_tapped, tapped_proxy
from tests.interop.tls_peers import assert_same_bytes, curl, make_docroot, python_ssl_get, suite_id
from tls12.certs import Credentials
from tls12.suites import SUITES, CipherSuite

pytestmark = pytest.mark.interop

SIZE = 150_000  # ten records: nine full 16 KiB digest stubs and a tail
WINDOW = 8
CASES = [("null", s) for s in NULL_SUITES] + [("key-expose", s) for s in ENCRYPTING_SUITES]
CASES += [("auto", s) for s in NULL_SUITES + ENCRYPTING_SUITES]


@pytest.fixture(scope="module")
def leak_docroot(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes]:
    root = tmp_path_factory.mktemp("keyleak-www")
    return root, make_docroot(root, [SIZE])[SIZE]


@pytest.fixture(scope="module")
def origins(credentials: Credentials, leak_docroot: tuple[Path, bytes]) -> Iterator[tuple[BackgroundLoop, dict[str, KeyRecordingServer]]]:
    with BackgroundLoop() as loop:
        servers = {m: KeyRecordingServer(leak_docroot[0], credentials, mode=m, idle_timeout=10.0) for m in ("null", "key-expose", "auto")}
        for server in servers.values():
            loop.run(server.start())
        try:
            yield loop, servers
        finally:
            for server in servers.values():
                loop.run(server.close())


def secrets_of(state: dict[str, Any]) -> dict[str, bytes]:
    """What must stay on the origin, from one exported connection state (empty values dropped)."""
    client_write, server_write = state["reader"]["keys"], state["writer"]["keys"]
    named = {
        "master_secret": state["master_secret"],
        "client_write_MAC_key": client_write["mac_key"],
        "client_write_key": client_write["enc_key"],
        "client_write_IV": client_write["iv"],
        "server_write_MAC_key": server_write["mac_key"],
        "ecdhe_private": state["server"]["ecdhe_private"],
    }
    return {name: bytes.fromhex(value) for name, value in named.items() if value}


def leaks(secret: bytes, streams: list[bytes]) -> list[int]:
    """Offsets of the ``WINDOW``-byte windows of ``secret`` that occur in any stream."""
    return [i for i in range(len(secret) - WINDOW + 1) if any(secret[i : i + WINDOW] in s for s in streams)]


def _wait_closed(loop: BackgroundLoop, tapped: TappedProxy, count: int) -> None:
    async def wait() -> None:
        while len(tapped.stubs.connections) < count:
            await asyncio.sleep(0.01)
        await asyncio.gather(*(c.origin_closed.wait() for c in tapped.stubs.connections))

    loop.run(asyncio.wait_for(wait(), 15))


@pytest.mark.parametrize(("mode", "suite"), CASES, ids=[f"{m}-{suite_id(s)}" for m, s in CASES])
def test_origin_sends_proxies_no_secret_key_material(
    origins: tuple[BackgroundLoop, dict[str, KeyRecordingServer]],
    leak_docroot: tuple[Path, bytes],
    mode: str,
    suite: CipherSuite,
    tmp_path: Path,
) -> None:
    loop, servers = origins
    server = servers[mode]
    genuine = leak_docroot[1]
    first_connection = len(server.tls_connections)
    tapped = tapped_proxy(loop, server)
    try:
        status, body, _ = python_ssl_get(tapped.port, f"/file_{SIZE}.bin", suite, timeout=30)  # cold
        assert status == 200
        assert_same_bytes(body, genuine)
        _wait_closed(loop, tapped, 1)
        store_after_cold = tapped.store.bytes_down
        out = tmp_path / "warm.bin"
        result = curl(f"https://127.0.0.1:{tapped.port}/file_{SIZE}.bin", suite, out, timeout=30)  # warm
        assert result.returncode == 0, result.stderr
        assert_same_bytes(out.read_bytes(), genuine)
        _wait_closed(loop, tapped, 2)
    finally:
        close_tapped(loop, tapped)
    assert not tapped.stubs.errors and not tapped.store.errors

    # cold: every body record was a miss, fetched through the store tap; warm: none was
    assert store_after_cold > SIZE and genuine[:16384] in bytes(tapped.store.connections[0].down)
    assert tapped.store.bytes_down == store_after_cold

    states = server.exported_states(loop)[first_connection:]
    assert len(states) == 2 and all(s["cipher_suite"] == suite for s in states)
    streams = [bytes(c.down) for c in tapped.stubs.connections] + [bytes(c.down) for c in tapped.store.connections]
    params = SUITES[suite]
    for conn, state in zip(tapped.stubs.connections, states, strict=True):
        secrets = secrets_of(state)
        expected = {"master_secret", "client_write_MAC_key", "server_write_MAC_key"}
        if params.cipher != "null":
            expected |= {"client_write_key", "client_write_IV"}
        assert expected <= secrets.keys()
        for name, secret in secrets.items():
            assert leaks(secret, streams) == [], f"{name} ({len(secret)} B) leaked to the proxy"

        exposed = [m for m in conn.messages() if isinstance(m, KeyExpose)]
        server_write = state["writer"]["keys"]
        assert len(exposed) == 1
        assert exposed[0].key == bytes.fromhex(server_write["enc_key"])
        assert exposed[0].iv == bytes.fromhex(server_write["iv"])
        if params.cipher == "null":
            assert exposed[0].key == exposed[0].iv == b""  # nothing to expose: the suite does not encrypt
        else:
            assert len(exposed[0].key) == params.key_length and len(exposed[0].iv) == 16
            assert exposed[0].key in bytes(conn.down)  # the capture would have shown a leak
