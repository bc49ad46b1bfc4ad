"""Barnraising end to end on loopback, every part a real program (paper §5, Figure 6).

An SSL-splitting origin (``python -m sslsplit.server``) serves a site whose certificate names
``www.news.test``; a broker (``python -m sslsplit.barnraising.broker --dns-port``) serves the
site; three volunteers on 127.0.0.2-4 are ``python -m sslsplit.volunteer URI``, configured by
nothing but the URI.  Then unmodified clients: ``dig`` finds the three volunteers, and
``curl`` connects to each address DNS gave while checking the *site's* certificate
(``--cacert``, no ``--insecure``) and gets the file byte for byte.  A volunteer killed with
SIGKILL (its renewals die with it) leaves DNS within its lease; one stopped with SIGTERM
leaves at once (it says *leave* before it closes).
"""

from __future__ import annotations

import asyncio
import random
import re
import shutil
import signal
import socket
import sys
import time
from pathlib import Path

import pytest

from sslsplit.barnraising.aio.client import BrokerClient
from tls12.certs import generate_self_signed, write_credentials

pytestmark = pytest.mark.interop

SITE = "news/front"
NAME = "www.news.test"
VOLUNTEERS = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
LEASE = 2.0
REPO = Path(__file__).resolve().parents[3]


def _port_free_on_all(hosts: list[str]) -> int:
    for _ in range(50):
        with socket.socket() as s:
            s.bind((hosts[0], 0))
            port = s.getsockname()[1]
        try:
            for host in hosts:
                with socket.socket() as s:
                    s.bind((host, port))
            return port
        except OSError:
            continue
    raise AssertionError("no port free on every volunteer address")


async def _start(*argv: str, lines: int = 1) -> tuple[asyncio.subprocess.Process, list[int]]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *argv, cwd=REPO, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    ports = []
    for _ in range(lines):
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        if not line:
            raise AssertionError(f"{argv[1]} did not start: {(await proc.stderr.read())!r}")
        ports += [int(p) for p in re.findall(r":(\d+)", line)]
    return proc, ports


async def _run(*argv: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, (argv, err.decode())
    return out.decode()


async def _dig(dns_port: int) -> list[str]:
    out = await _run("dig", "@127.0.0.1", "-p", str(dns_port), NAME, "A", "+short",
                     "+time=5", "+tries=3")  # patient under load
    return sorted(out.split())


async def _scenario(tmp: Path) -> None:
    body = random.Random(13).randbytes(300_000)
    (tmp / "www").mkdir()
    (tmp / "www" / "f.bin").write_bytes(body)
    cert, key = tmp / "site.pem", tmp / "site.key"
    write_credentials(generate_self_signed(NAME), cert, key)

    procs: list[asyncio.subprocess.Process] = []
    try:
        origin, (server_port, store_port) = await _start(
            "-m", "sslsplit.server", "--root", str(tmp / "www"), "--port", "0",
            "--store-port", "0", "--cert", str(cert), "--key", str(key))
        procs.append(origin)
        broker, (broker_port, dns_port) = await _start(
            "-m", "sslsplit.barnraising.broker", "--site", SITE,
            "--server", f"127.0.0.1:{server_port}", "--store", f"127.0.0.1:{store_port}",
            "--name", NAME, "--param", "memory_mb=32", "--db", str(tmp / "broker.db"),
            "--listen", "127.0.0.1:0", "--dns-port", "0", "--lease", str(LEASE), lines=2)
        procs.append(broker)
        uri = f"barnraising://127.0.0.1:{broker_port}/{SITE}"

        port = _port_free_on_all(VOLUNTEERS)
        volunteers = {}
        for host in VOLUNTEERS:
            volunteer, _ = await _start("-m", "sslsplit.volunteer", uri,
                                        "--listen", f"{host}:{port}", "--refresh", "0.5")
            procs.append(volunteer)
            volunteers[host] = volunteer
        observer = BrokerClient(uri)
        lookup = await observer.lookup()
        await observer.close()
        assert lookup.site.server == ("127.0.0.1", server_port)
        assert [h for h, _ in lookup.peers] == VOLUNTEERS  # all three share their caches

        assert await _dig(dns_port) == VOLUNTEERS
        for address in await _dig(dns_port):  # the client goes where DNS sends it
            out = tmp / f"out-{address}.bin"
            await _run("curl", "--silent", "--show-error", "--tlsv1.2", "--tls-max", "1.2",
                       "--ciphers", "AES128-SHA256", "--cacert", str(cert),
                       "--resolve", f"{NAME}:{port}:{address}",
                       f"https://{NAME}:{port}/f.bin", "--output", str(out))
            assert out.read_bytes() == body, address

        # a volunteer dies: SIGKILL, no leave; its lease runs out
        volunteers[VOLUNTEERS[2]].send_signal(signal.SIGKILL)
        killed = time.monotonic()
        while await _dig(dns_port) != VOLUNTEERS[:2]:
            assert time.monotonic() - killed < LEASE + 3, "dead volunteer still in DNS"
            await asyncio.sleep(0.2)
        assert time.monotonic() - killed <= LEASE + 1.5  # lease + one expiry period

        # a volunteer stops: SIGTERM, it leaves before it exits -- gone from DNS at once
        stopping = volunteers[VOLUNTEERS[1]]
        stopping.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(stopping.wait(), 10) == 0
        assert await _dig(dns_port) == VOLUNTEERS[:1]
        assert stopping.stdout is not None
        assert b"left;" in await stopping.stdout.read()
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                await asyncio.wait_for(proc.wait(), 15)
            except TimeoutError:
                proc.kill()
                await proc.wait()


def test_volunteers_join_and_curl_downloads_through_dns(tmp_path: Path) -> None:
    for tool in ("dig", "curl"):
        assert shutil.which(tool), f"{tool} not found (apt-get install bind9-dnsutils curl)"
    asyncio.run(_scenario(tmp_path))
