"""The broker on sockets: the join protocol through :class:`BrokerClient`, hostile HTTP, rate
limits, leases seen through DNS, SIGKILL and restart of a real broker process, and its CLI."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import dns.asyncresolver
import pytest

from sslsplit.barnraising import protocol as p
from sslsplit.barnraising.aio.broker import Broker
from sslsplit.barnraising.aio.client import BrokerClient, Membership
from sslsplit.barnraising.broker import main

from .helpers import SITE, registry

REPO = Path(__file__).resolve().parents[3]


async def _resolve(port: int, name: str = "www.news.test") -> list[str]:
    resolver = dns.asyncresolver.Resolver(configure=False)
    resolver.nameservers, resolver.port = ["127.0.0.1"], port
    answer = await resolver.resolve(name, "A", raise_on_no_answer=False)
    return sorted(rd.to_text() for rd in answer)


async def _raw(port: int, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    reply = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    return reply


async def _protocol_and_hostile_input() -> None:
    broker = Broker(registry(lease_seconds=60, join_rate=1.0, join_burst=2.0))
    await broker.start("127.0.0.1", 0, dns_port=0)
    assert broker.dns is not None
    uri = f"barnraising://127.0.0.1:{broker.port}/{SITE.name}"
    try:
        vols = [BrokerClient(uri, local_host=f"127.0.0.{i}") for i in (2, 3)]
        joined = [await c.join(4433, capacity=160.0) for c in vols]
        assert joined[0].site == SITE.info and joined[0].lease_seconds == 60
        assert await _resolve(broker.dns.port) == ["127.0.0.2", "127.0.0.3"]

        origin = BrokerClient(uri)
        assert (await origin.lookup()).volunteers == 2
        with pytest.raises(p.Forbidden):
            await origin.report("127.0.0.3", "wrong")
        assert await origin.report("127.0.0.3", SITE.report_token, reason="black hole") == 1
        assert await _resolve(broker.dns.port) == ["127.0.0.2"]
        with pytest.raises(p.Banned):
            await vols[1].join(4433)

        # rate limit: burst 2 from 127.0.0.2 (one used), then 429 with Retry-After
        await vols[0].join(4434)
        with pytest.raises(p.RateLimited) as info:
            await vols[0].join(4435)
        assert info.value.retry_after is not None and 0 < info.value.retry_after <= 1
        reader, writer = await asyncio.open_connection("127.0.0.1", broker.port,
                                                       local_addr=("127.0.0.2", 0))
        writer.write(b"POST /barnraising/1/join HTTP/1.1\r\nhost: x\r\ncontent-length: 30\r\n"
                     b'connection: close\r\n\r\n{"site":"news/front","port":9}')
        limited = await asyncio.wait_for(reader.read(), 5)
        writer.close()
        assert limited.startswith(b"HTTP/1.1 429 ") and b"\r\nretry-after: 1\r\n" in limited
        truncated = b'{"site":"news/front","port":1}'[:26]
        raw = await _raw(broker.port, b"POST /barnraising/1/join HTTP/1.1\r\nhost: x\r\n"
                         b"content-length: 26\r\nconnection: close\r\n\r\n" + truncated)
        assert raw.startswith(b"HTTP/1.1 400 ") and b"not JSON" in raw
        assert await vols[0].leave(joined[0].volunteer_id) is True

        # hostile HTTP: each gets a clear error, the broker keeps serving
        cases = [
            (b"\x16\x03\x01\x00\x05hello\r\n\r\n", b"400"),
            (b"GET /barnraising/1/lookup HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n", b"405"),
            (b"POST /admin HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
             b"404"),
            (b"POST /barnraising/1/join HTTP/1.1\r\nhost: x\r\ncontent-length: 99999999\r\n\r\n",
             b"413"),
            (b"POST /barnraising/1/join HTTP/1.1\r\nhost: x\r\nx-pad: " + b"a" * 20000
             + b"\r\n\r\n", b"400"),
            (b"POST /barnraising/9/join HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n"
             b"connection: close\r\n\r\n{}",
             b"400"),
        ]
        for request, status in cases:
            reply = await _raw(broker.port, request + b"")
            assert reply.split(b" ")[1] == status, reply[:200]
            assert b'"error"' in reply
        assert (await origin.lookup()).volunteers == 1  # still answering
        for c in (*vols, origin):
            await c.close()
    finally:
        await broker.close()


def test_protocol_and_hostile_input() -> None:
    asyncio.run(_protocol_and_hostile_input())


async def _lease_expiry_and_rejoin() -> None:
    reg = registry(lease_seconds=1.0)
    broker = Broker(reg)
    await broker.start("127.0.0.1", 0, dns_port=0)
    assert broker.dns is not None
    uri = f"barnraising://127.0.0.1:{broker.port}/{SITE.name}"
    try:
        steady = Membership(BrokerClient(uri, local_host="127.0.0.2"), 4433)
        dying = Membership(BrokerClient(uri, local_host="127.0.0.3"), 4433)
        assert (await steady.start()).params == SITE.params
        await dying.start()
        assert await _resolve(broker.dns.port) == ["127.0.0.2", "127.0.0.3"]
        await dying.pause()  # stops renewing, as a crashed volunteer would
        await asyncio.sleep(1.6)
        assert await _resolve(broker.dns.port) == ["127.0.0.2"]
        assert steady.renewals >= 2
        # the broker forgets everyone (its database replaced): the volunteer joins again
        reg._live[SITE.name].clear()
        await asyncio.sleep(0.8)
        assert await _resolve(broker.dns.port) == ["127.0.0.2"]
        await steady.stop()
        assert await _resolve(broker.dns.port) == []
        await dying.stop()
    finally:
        await broker.close()


def test_lease_expiry_and_rejoin() -> None:
    asyncio.run(_lease_expiry_and_rejoin())


# --- a real broker process ---------------------------------------------------------------


def _start(db: Path, *extra: str) -> tuple[subprocess.Popen[str], int, int]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "sslsplit.barnraising.broker", "--site", SITE.name,
         "--server", "127.0.0.1:8443", "--store", "127.0.0.1:8444", "--name", "www.news.test",
         "--report-token", "origin-secret", "--param", "memory_mb=64", "--db", str(db),
         "--listen", "127.0.0.1:0", "--dns-port", "0", "--lease", "300", *extra],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    ports = []
    for _ in range(2):
        line = proc.stdout.readline()
        match = re.search(r":(\d+)$", line.strip())
        assert match, (line, proc.stderr.read() if proc.poll() is not None else "")
        ports.append(int(match.group(1)))
    return proc, ports[0], ports[1]


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


async def _join_all(port: int, hosts: list[str]) -> list[str]:
    ids = []
    for host in hosts:
        client = BrokerClient(f"barnraising://127.0.0.1:{port}/{SITE.name}", local_host=host)
        ids.append((await client.join(4433)).volunteer_id)
        await client.close()
    return ids


async def _after_restart(port: int, dns_port: int, ids: list[str]) -> None:
    client = BrokerClient(f"barnraising://127.0.0.1:{port}/{SITE.name}")
    lookup = await client.lookup()
    assert lookup.volunteers == len(ids) and lookup.site.params == {"memory_mb": 64}
    for vid in ids:
        assert (await client.renew(vid)).lease_seconds == 300
    await client.close()
    assert await _resolve(dns_port) == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]


def test_sigkill_and_restart_lose_no_registration(tmp_path: Path,
                                                  procs: list[subprocess.Popen[str]]) -> None:
    db = tmp_path / "broker.db"
    proc, port, dns_port = _start(db)
    procs.append(proc)
    ids = asyncio.run(_join_all(port, ["127.0.0.2", "127.0.0.3", "127.0.0.4"]))
    os.kill(proc.pid, signal.SIGKILL)  # every join above was acknowledged
    assert proc.wait(10) == -signal.SIGKILL
    proc, port, dns_port = _start(db)
    procs.append(proc)
    asyncio.run(_after_restart(port, dns_port, ids))
    proc.send_signal(signal.SIGTERM)  # an orderly stop
    assert proc.wait(10) == 0


# --- command line ------------------------------------------------------------------------


@pytest.mark.parametrize("argv, words", [
    ([], "no site"),
    (["--site", "a"], "--site needs --server and --store"),
    (["--server", "h:1"], "describe a --site"),
    (["--site", "a/../b", "--server", "h:1", "--store", "h:2"], "segment"),
    (["--site", "a", "--server", "h:1", "--store", "h:2", "--param", "x"], "KEY=VALUE"),
    (["--site", "a", "--server", "h:1", "--store", "h:2", "--param", "Bad=1"], "snake_case"),
    (["--sites", "/nonexistent/sites.toml"], "--sites"),
    (["--site", "a", "--server", "h", "--store", "h:2"], "HOST:PORT"),
    (["--site", "a", "--server", "h:1", "--store", "h:2", "--lease", "0"], "--lease"),
    (["--site", "a", "--server", "h:1", "--store", "h:2", "--dns-port", "x"], "--dns-port"),
])
def test_cli_usage_errors(argv: list[str], words: str, capsys: pytest.CaptureFixture[str],
                          tmp_path: Path) -> None:
    try:
        status = main([*argv, "--db", str(tmp_path / "x.db")])
    except SystemExit as exc:  # argparse's own type errors
        status = exc.code  # type: ignore[assignment]
    err = capsys.readouterr().err
    assert status == 2
    last = err.strip().splitlines()[-1]
    assert last.startswith("python -m sslsplit.barnraising.broker: error:") and words in last
    assert "Traceback" not in err


def test_cli_bad_sites_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "sites.toml"
    bad.write_text('[sites."a"]\nserver = "h:1"\n')
    assert main(["--sites", str(bad), "--db", str(tmp_path / "x.db")]) == 2
    assert "store must be" in capsys.readouterr().err


def test_cli_busy_port(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        status = main(["--site", "a", "--server", "h:1", "--store", "h:2", "--listen",
                       f"127.0.0.1:{port}", "--db", str(tmp_path / "x.db")])
    assert status == 1
    assert "address already in use" in capsys.readouterr().err.lower()
