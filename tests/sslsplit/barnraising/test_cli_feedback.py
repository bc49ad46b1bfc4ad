"""The command lines of Barnraising's volunteer and of the origin's feedback loop.

``python -m sslsplit.volunteer``: ``--help``, and one-line errors with the documented status
for a bad URI (2), an unreachable broker (1) and a site the broker does not serve (1).
``python -m sslsplit.server --broker``: option errors (2), then a real run of the three
programs -- broker, origin with ``--broker``, one volunteer -- where curl asks the trusted
name, gets a 302 naming the volunteer, and downloads the file through it byte for byte.
"""

from __future__ import annotations

import asyncio
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest

from tls12.certs import write_credentials

from .helpers import site_credentials

pytestmark = pytest.mark.interop
REPO = Path(__file__).resolve().parents[3]


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *argv], cwd=REPO, capture_output=True,
                          text=True, timeout=60)


def _free_port(host: str = "127.0.0.1") -> int:
    """A port free now, below Linux's ephemeral range (32768 and up): a port the kernel handed
    out for ``bind(0)`` could be handed to a test running beside this one before the program
    under test binds it (seen once in CI: "address already in use")."""
    rng = random.SystemRandom()
    while True:
        port = rng.randrange(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port


def test_volunteer_help_and_one_line_errors() -> None:
    out = _cli("sslsplit.volunteer", "--help")
    assert out.returncode == 0 and "barnraising://" in out.stdout and "--listen" in out.stdout
    bad = _cli("sslsplit.volunteer", "http://broker/site")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].startswith(
        "python -m sslsplit.volunteer: error: argument URI:")
    port = _free_port()
    down = _cli("sslsplit.volunteer", f"barnraising://127.0.0.1:{port}/a/site")
    assert down.returncode == 1
    assert down.stderr.strip() == (f"python -m sslsplit.volunteer: error: cannot connect to "
                                   f"broker 127.0.0.1:{port}: Connection refused")


def test_server_feedback_options_are_checked() -> None:
    for argv, message in (
        (["--root", ".", "--broker", "barnraising://127.0.0.1/a"], "--broker needs"),
        (["--root", ".", "--mirror", "mirror.x"], "go with --broker"),
        (["--root", ".", "--broker", "http://x/a", "--mirror", "m.x", "--report-token", "t"],
         "--broker: scheme"),
    ):
        out = _cli("sslsplit.server", *argv)
        assert out.returncode == 2 and message in out.stderr.strip().splitlines()[-1], out.stderr


async def _start(*argv: str, lines: int = 1) -> tuple[asyncio.subprocess.Process, list[int]]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", *argv, cwd=REPO, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    ports: list[int] = []
    for _ in range(lines):
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        if not line:
            raise AssertionError(f"{argv[0]} did not start: {(await proc.stderr.read())!r}")
        ports += [int(p) for p in re.findall(r":(\d+)", line)]
    return proc, ports


async def _curl(*args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        "curl", "--silent", "--show-error", "--tlsv1.2", "--tls-max", "1.2",
        "--ciphers", "AES128-SHA256", *args, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def _redirect_run(tmp: Path) -> None:
    body = random.Random(3).randbytes(120_000)
    (tmp / "www").mkdir()
    (tmp / "www" / "f.bin").write_bytes(body)
    cert, key = tmp / "site.pem", tmp / "site.key"
    write_credentials(site_credentials("www.news.test", "trusted.news.test", "*.mirror.news.test"),
                      cert, key)
    server_port, store_port = _free_port(), _free_port()
    procs: list[asyncio.subprocess.Process] = []
    try:
        broker, (broker_port, dns_port) = await _start(
            "sslsplit.barnraising.broker", "--site", "news/front",
            "--server", f"127.0.0.1:{server_port}", "--store", f"127.0.0.1:{store_port}",
            "--name", "www.news.test", "--name", "mirror.news.test", "--report-token", "s3cret",
            "--db", str(tmp / "b.db"), "--listen", "127.0.0.1:0", "--dns-port", "0", lines=2)
        procs.append(broker)
        uri = f"barnraising://127.0.0.1:{broker_port}/news/front"
        refused = await asyncio.to_thread(
            _cli, "sslsplit.volunteer", f"barnraising://127.0.0.1:{broker_port}/no/such/site")
        assert refused.returncode == 1 and refused.stderr.strip().startswith(
            "python -m sslsplit.volunteer: error: the broker refused: ")
        assert len(refused.stderr.strip().splitlines()) == 1
        volunteer, _ = await _start("sslsplit.volunteer", uri, "--listen", "127.0.0.2:0")
        procs.append(volunteer)
        origin, ports = await _start(
            "sslsplit.server", "--root", str(tmp / "www"), "--cert", str(cert), "--key", str(key),
            "--port", str(server_port), "--store-port", str(store_port), "--trusted-port", "0",
            "--broker", uri, "--mirror", "mirror.news.test", "--report-token", "s3cret", lines=2)
        procs.append(origin)
        trusted = ports[-1]
        location = await _curl("--cacert", str(cert), "--resolve",
                               f"trusted.news.test:{trusted}:127.0.0.1",
                               f"https://trusted.news.test:{trusted}/f.bin", "-o", "/dev/null",
                               "-w", "%{redirect_url}")
        url = urllib.parse.urlsplit(location)
        assert url.hostname == "v127-0-0-2.mirror.news.test" and url.path == "/f.bin"
        assert re.fullmatch(r"br=[\w-]+", url.query)
        dig = await asyncio.create_subprocess_exec(
            "dig", "@127.0.0.1", "-p", str(dns_port), url.hostname, "A", "+short",
            stdout=asyncio.subprocess.PIPE)
        out, _ = await dig.communicate()
        assert out.decode().split() == ["127.0.0.2"]  # the broker's DNS names that volunteer
        await _curl("--cacert", str(cert), "--resolve", f"{url.hostname}:{url.port}:127.0.0.2",
                    location, "-o", str(tmp / "out.bin"))
        assert (tmp / "out.bin").read_bytes() == body
    finally:
        for proc in reversed(procs):
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 15)
            except TimeoutError:
                proc.kill()
                await proc.wait()


def test_origin_redirects_trusted_name_to_a_volunteer(tmp_path: Path) -> None:
    for tool in ("dig", "curl"):
        assert shutil.which(tool), f"{tool} not found (apt-get install bind9-dnsutils curl)"
    asyncio.run(_redirect_run(tmp_path))
