"""A malicious or unlucky proxy: tampering fails closed at the client; cache misses are transparent.

The adversarial proxies below are subclasses of the real proxy that change
what it sends (they skip its own digest check, as a malicious proxy would).
The clients are unmodified curl and Python ssl; each must abort with a
bad_record_mac (or a truncation error) and never deliver bytes that are not a
prefix of the genuine file.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sslsplit.aio.proxy import SplittingProxy
from sslsplit.cache import DiskCache, MemoryCache
from sslsplit.splicer import Splicer
from sslsplit.wire import IDEncoding, Stub, payload_id
from tests.interop.split_fixtures import SplitSetup, split_setup
from tests.interop.tls_peers import (
    MIB,
    assert_same_bytes,
    curl,
    make_docroot,
    python_ssl_context,
    python_ssl_get,
)
from tls12.certs import Credentials
from tls12.errors import AlertDescription
from tls12.suites import CipherSuite

pytestmark = pytest.mark.interop

SIZE = 200_000
SUITES_UNDER_ATTACK = [CipherSuite.TLS_RSA_WITH_NULL_SHA256, CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA]


@pytest.fixture(scope="module")
def adv_docroot(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, bytes]]:
    root = tmp_path_factory.mktemp("advwww")
    files = make_docroot(root, [SIZE, MIB, 40_000, 100_000])
    return root, files


@pytest.fixture(scope="module")
def split(credentials: Credentials, adv_docroot: tuple[Path, dict[int, bytes]]) -> Iterator[SplitSetup]:
    with split_setup(adv_docroot[0], credentials) as setup:
        yield setup


class FlipProxy(SplittingProxy):
    """Flips one byte of the third cached payload of every connection."""

    def record_for(self, splicer: Splicer, stub: Stub, payload: bytes) -> bytes:
        n = splicer.n = getattr(splicer, "n", 0) + 1  # type: ignore[attr-defined]
        if n == 3:
            payload = bytes([payload[0] ^ 0x20]) + payload[1:]
        return splicer._build(stub, payload)


class SwapProxy(SplittingProxy):
    """Learns a file's payloads from a first connection, then serves the 2nd and 3rd swapped."""

    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
        super().__init__(*args, **kwargs)
        self.learned: list[bytes] = []
        self.swapping = False

    def record_for(self, splicer: Splicer, stub: Stub, payload: bytes) -> bytes:
        n = splicer.n = getattr(splicer, "n", 0) + 1  # type: ignore[attr-defined]
        if not self.swapping:
            self.learned.append(payload)
        elif n in (2, 3):
            payload = self.learned[3 - n + 1]  # position 2 gets payload 3, position 3 gets payload 2
        return splicer._build(stub, payload)


class ReplayProxy(SplittingProxy):
    """Replays, in a second connection, a stub (MAC and all) recorded from a first connection."""

    recorded: list[Stub] = []
    replaying = False

    def record_for(self, splicer: Splicer, stub: Stub, payload: bytes) -> bytes:
        if stub.mac and not self.replaying:
            type(self).recorded.append(stub)
        elif stub.mac and len(type(self).recorded) > 1:
            old = type(self).recorded.pop(1)  # the second body record of the first connection
            return splicer._build(old, payload)  # its MAC, with this connection's payload and keys
        return splicer.rebuild(stub, payload)


class TruncateProxy(SplittingProxy):
    """Hangs up on the client after a few records (no close_notify)."""

    async def payload_for(self, stub: Stub) -> bytes:
        self.count = getattr(self, "count", 0) + 1
        if self.count > 4:
            raise ConnectionError("proxy cuts the connection")
        return await super().payload_for(stub)


# OpenSSL reports a failed MAC check as one of these (the stitched AES-SHA1 cipher says the last)
CURL_MAC_ERRORS = ("bad record mac", "decryption failed", "cipher operation failed")


def _wait_for_alert(split: SplitSetup, before: set[int], alert: AlertDescription, timeout: float = 10.0) -> None:
    """Wait until a connection that ended after the snapshot ``before`` reports ``alert`` from the client."""
    deadline = time.monotonic() + timeout
    while not any(alert in r.alerts_received for r in list(split.server.stats.connections) if id(r) not in before):
        assert time.monotonic() < deadline, f"no {alert.name} alert reached the origin"
        time.sleep(0.01)


def _assert_fails_closed(
    split: SplitSetup, proxy: SplittingProxy, suite: CipherSuite, genuine: bytes, tmp_path: Path, mac_error: bool = True
) -> None:
    out = tmp_path / "partial.bin"
    done = {id(r) for r in split.server.stats.connections}
    result = curl(f"https://127.0.0.1:{proxy.port}/file_{len(genuine)}.bin", suite, out)
    assert result.returncode != 0
    if mac_error:
        assert any(e in result.stderr.lower() for e in CURL_MAC_ERRORS), result.stderr
        # curl's OpenSSL told the origin why, through the proxy: a fatal bad_record_mac alert
        _wait_for_alert(split, done, AlertDescription.BAD_RECORD_MAC)
    got = out.read_bytes() if out.exists() else b""
    assert len(got) < len(genuine) and genuine.startswith(got)  # nothing altered was delivered
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)) as info:
        python_ssl_get(proxy.port, f"/file_{len(genuine)}.bin", suite)
    if mac_error:
        assert "BAD_RECORD_MAC" in str(info.value) or "bad record mac" in str(info.value).lower()


@pytest.mark.parametrize("suite", SUITES_UNDER_ATTACK, ids=lambda s: s.name)
def test_flipped_payload_byte_fails_closed(split: SplitSetup, adv_docroot, suite: CipherSuite, tmp_path: Path) -> None:
    proxy = split.proxy(cls=FlipProxy)
    _assert_fails_closed(split, proxy, suite, adv_docroot[1][SIZE], tmp_path)


@pytest.mark.parametrize("suite", SUITES_UNDER_ATTACK, ids=lambda s: s.name)
def test_swapped_payloads_fail_closed(split: SplitSetup, adv_docroot, suite: CipherSuite, tmp_path: Path) -> None:
    proxy = split.proxy(cls=SwapProxy)
    assert python_ssl_get(proxy.port, f"/file_{SIZE}.bin", suite)[1] == adv_docroot[1][SIZE]
    proxy.swapping = True
    _assert_fails_closed(split, proxy, suite, adv_docroot[1][SIZE], tmp_path)


@pytest.mark.parametrize("suite", SUITES_UNDER_ATTACK, ids=lambda s: s.name)
def test_stub_replayed_from_another_connection_fails_closed(split: SplitSetup, adv_docroot, suite: CipherSuite, tmp_path: Path) -> None:
    ReplayProxy.recorded = []
    proxy = split.proxy(cls=ReplayProxy)
    status, body, _ = python_ssl_get(proxy.port, f"/file_{SIZE}.bin", suite)  # connection 1, recorded
    assert status == 200 and body == adv_docroot[1][SIZE]
    proxy.replaying = True
    out = tmp_path / "replay.bin"
    result = curl(f"https://127.0.0.1:{proxy.port}/file_{SIZE}.bin", suite, out)
    assert result.returncode != 0 and any(e in result.stderr.lower() for e in CURL_MAC_ERRORS), result.stderr
    got = out.read_bytes() if out.exists() else b""
    assert adv_docroot[1][SIZE].startswith(got) and len(got) < SIZE


@pytest.mark.parametrize("suite", SUITES_UNDER_ATTACK, ids=lambda s: s.name)
def test_truncation_is_detected(split: SplitSetup, adv_docroot, suite: CipherSuite, tmp_path: Path) -> None:
    proxy = split.proxy(cls=TruncateProxy)
    _assert_fails_closed(split, proxy, suite, adv_docroot[1][SIZE], tmp_path, mac_error=False)


# --- cache misses ----------------------------------------------------------------------


def test_evicted_entries_are_refetched(split: SplitSetup, adv_docroot, tmp_path: Path) -> None:
    tiny = MemoryCache(max_bytes=3 * 16384)  # holds three records: a 1 MiB file keeps evicting
    proxy = split.proxy(local=[tiny])
    for _ in range(2):
        status, body, _ = python_ssl_get(proxy.port, f"/file_{MIB}.bin", CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA)
        assert status == 200
        assert_same_bytes(body, adv_docroot[1][MIB])
    assert tiny.evictions > 100
    assert proxy.hierarchy.stats.hits["origin"] >= 2 * 64  # every record fetched again the second time


def test_poisoned_entries_are_dropped_and_refetched(split: SplitSetup, adv_docroot, tmp_path: Path) -> None:
    memory, disk = MemoryCache(verify_on_read=True), DiskCache(tmp_path / "disk")
    proxy = split.proxy(local=[memory, disk])
    genuine = adv_docroot[1][100_000]
    suite = CipherSuite.TLS_RSA_WITH_NULL_SHA
    assert python_ssl_get(proxy.port, "/file_100000.bin", suite)[1] == genuine  # warms both levels
    # poison both levels under the ids of the file's first record
    first = genuine[:16384]
    ident = payload_id(IDEncoding.DIGEST_SHA256, first)
    assert memory.get(IDEncoding.DIGEST_SHA256, ident) == first
    memory._data[(int(IDEncoding.DIGEST_SHA256), ident)] = b"evil" + first[4:]
    disk.discard(IDEncoding.DIGEST_SHA256, ident)
    disk.put(IDEncoding.DIGEST_SHA256, ident, b"EVIL" + first[4:])
    before = proxy.hierarchy.stats.hits.get("origin", 0)
    status, body, _ = python_ssl_get(proxy.port, "/file_100000.bin", suite)
    assert status == 200 and body == genuine
    assert proxy.hierarchy.stats.poisoned == {"memory": 1, "disk": 1}
    assert proxy.hierarchy.stats.hits["origin"] == before + 1  # refetched from the origin once
    assert memory.get(IDEncoding.DIGEST_SHA256, ident) == first  # and the good copy replaced the bad one


# --- many clients at once -------------------------------------------------------------------


async def _get(port: int, path: str, ctx: ssl.SSLContext) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="localhost")
    writer.write(f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    raw = await reader.read()
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    return body


def test_one_hundred_concurrent_clients(split: SplitSetup, adv_docroot) -> None:
    proxy = split.proxy()
    sizes = [40_000, 100_000, SIZE]
    suites = [CipherSuite.TLS_RSA_WITH_NULL_SHA, CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA, CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256]

    async def run_all() -> list[bytes]:
        jobs = []
        for i in range(120):
            ctx = python_ssl_context(suites[i % 3])
            jobs.append(_get(proxy.port, f"/file_{sizes[i % 3 if i % 2 else (i // 2) % 3]}.bin", ctx))
        return await asyncio.wait_for(asyncio.gather(*jobs), 120)

    bodies = asyncio.run(run_all())
    for i, body in enumerate(bodies):
        size = sizes[i % 3 if i % 2 else (i // 2) % 3]
        assert_same_bytes(body, adv_docroot[1][size], f"client {i}")
    assert proxy.stats.failed == 0 and proxy.stats.connections == 120
