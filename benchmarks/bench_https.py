"""End-to-end HTTPS: testbed.https_server vs nginx, large-file throughput and small-file requests/s.

Default mode -- **throughput**: curl downloads one large file from both
servers.  Both run on loopback in the same run, serve the same file with the
same certificate, and are restricted to the same TLS 1.2 cipher suite; curl
downloads the file to ``/dev/null`` ``--repeats`` times from each (alternating:
ours, nginx, ours, ...) and the throughputs and the ratio ``ours / nginx`` are
printed as ``median (min–max, n)``, the ratio taken pair by pair.  On loopback there is no network bottleneck: the figure
compares the CPU cost per byte of the two TLS record paths (our Python core
with its C record extension vs nginx's OpenSSL), plus curl's own decryption,
which is the same for both.

Because curl's own decryption is often the bottleneck on loopback (both
servers then reach the same wall-clock rate), the server-side CPU time per
download is measured too (Linux ``/proc``: user + system time of the server
process tree) and its ratio printed -- the figure that shows what our record
path costs compared with nginx's.

Two more servers are measured in the same rounds: a **Python ``ssl`` asyncio server**
(``asyncio.start_server(..., ssl=context)``, what a Python user would pick instead:
``pyssl_server.py`` beside this script, encrypt-then-MAC off as for nginx) and, with
``--loop both`` (the default when uvloop is installed, the ``fast`` extra), ours on uvloop's
event loop (``--loop uvloop`` of the server).  Their ratios are ours / theirs, pair by pair.
Ours runs twice on each loop: as configured by default (explicit IVs derived from k',
reproducible) and with ``--random-ivs`` (``tls12-mb``, ``tls12-uvloop-mb``): random IVs as
nginx and Python's ``ssl`` have, which lets 256 KiB writes go through OpenSSL's multi-block
seal of 8 records at once (``tls12.record``, "Random IVs").

``--small`` mode -- **small-file requests/s**: keep-alive GETs of a 30-byte
and a 1 KiB file, over Python's ``ssl`` from ``--clients`` load processes,
against three servers measured alternately in the same run: ours with the
response head coalesced into the body's record (the default), ours with
``--no-coalesce`` (head in a record of its own, as SSL splitting needs) and
nginx (and ours on uvloop with ``--loop both``).  Printed per server and size: requests per
wall second, server CPU
microseconds per request (from ``/proc``, independent of the load
generator), and the TLS records and bytes one response takes on the wire
(counted by a relay on the server->client path).

nginx is configured with ``ssl_conf_command Options -EncryptThenMac``:
OpenSSL servers otherwise agree to encrypt-then-MAC (RFC 7366) with curl and
Python's ``ssl``, which our server does not implement (SSL splitting needs
MAC-then-encrypt).  With it, both servers send byte-for-byte the same kind of
record, and nginx keeps OpenSSL's stitched AES-CBC-HMAC-SHA1 path, which
OpenSSL does not use for encrypt-then-MAC -- without the option nginx would
be measured on a slower path than ours.

Usage::

    python benchmarks/bench_https.py                 # 256 MiB, AES128-SHA, 5 repeats
    python benchmarks/bench_https.py --size 64M --cipher ECDHE-RSA-AES128-SHA256 --repeats 7
    python benchmarks/bench_https.py --small --seconds 2 --repeats 5
    python benchmarks/bench_https.py --loop asyncio     # ours on asyncio's loop only

Requires curl and nginx (``apt-get install curl nginx-light``) on ``PATH`` and
the built C extension; without them it exits with status 1 and one line
saying what is missing.  nginx is started with a generated ``nginx.conf`` in a
temporary prefix (``daemon off;``) and killed at the end.
"""

from __future__ import annotations

import argparse
import importlib.util
import multiprocessing
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    REPO,
    Repeated,
    add_repeats_option,
    free_port,
    kill_group,
    repo_env,
    require_c_extension,
    require_tools,
    start_and_read_port,
    tls12_server,
    tree_cpu_seconds,
    wait_for_port,
    write_json,
)

sys.path.insert(0, str(REPO))

from testbed.apps.demo import curl_cipher_arg, parse_size  # noqa: E402
from tls12.certs import generate_self_signed, write_credentials  # noqa: E402
from tls12.suites import SUITES, suite_by_name  # noqa: E402

BENCH = "bench_https"
SMALL_SIZES = (30, 1024)
LISTENING = r"listening on https://[^\s:]+:(\d+)"

NGINX_CONF = """\
worker_processes 1;
daemon off;
master_process on;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/tmp_body;
    proxy_temp_path {prefix}/tmp_proxy;
    fastcgi_temp_path {prefix}/tmp_fastcgi;
    uwsgi_temp_path {prefix}/tmp_uwsgi;
    scgi_temp_path {prefix}/tmp_scgi;
    types {{ application/octet-stream bin; }}
    keepalive_requests 100000000;
    keepalive_timeout 60s;
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        ssl_protocols TLSv1.2;
        ssl_ciphers {ciphers};
        ssl_prefer_server_ciphers on;
        ssl_session_cache off;
        ssl_conf_command Options -EncryptThenMac;
        root {root};
    }}
}}
"""


@contextmanager
def ours(root: Path, cert: Path, key: Path, cipher: str, *extra: str) -> Iterator[tuple[int, int]]:
    """Run ``python -m testbed.https_server`` in its own process; yields ``(port, pid)``."""
    with start_and_read_port(tls12_server(root, cert, key, cipher, *extra), LISTENING, env=repo_env()) as running:
        yield running


def loops(choice: str) -> tuple[str, ...]:
    """The event loops ``--loop`` asks ours to be measured on (``both``: uvloop only if installed)."""
    if choice == "both":
        if importlib.util.find_spec("uvloop") is None:
            print("uvloop is not installed (pip install '.[fast]'): ours is measured on asyncio's loop only")
            return ("asyncio",)
        return ("asyncio", "uvloop")
    return (choice,)


@contextmanager
def pyssl(root: Path, cert: Path, key: Path, cipher: str) -> Iterator[tuple[int, int]]:
    """The Python ``ssl`` asyncio server (``pyssl_server.py`` beside this script); yields ``(port, pid)``."""
    cmd = [sys.executable, str(Path(__file__).with_name("pyssl_server.py")), str(root), str(cert), str(key),
           cipher]
    with start_and_read_port(cmd, LISTENING, env=repo_env()) as running:
        yield running


@contextmanager
def nginx(exe: str, root: Path, cert: Path, key: Path, cipher: str, prefix: Path) -> Iterator[tuple[int, int]]:
    """Run nginx (foreground, own prefix) with the same certificate and suite; yields ``(port, pid)``."""
    port = free_port()
    conf = prefix / "nginx.conf"
    conf.write_text(NGINX_CONF.format(prefix=prefix, port=port, cert=cert, key=key, ciphers=cipher, root=root))
    proc = subprocess.Popen(
        [exe, "-p", str(prefix), "-c", str(conf), "-e", str(prefix / "error.log")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        try:
            wait_for_port(port, proc)
        except (RuntimeError, TimeoutError) as exc:
            log = (prefix / "error.log").read_text() if (prefix / "error.log").exists() else ""
            raise RuntimeError(f"nginx did not start: {exc}\n{log}") from exc
        yield port, proc.pid
    finally:
        kill_group(proc)


def curl_download(curl: str, port: int, name: str, cipher: str, size: int, timeout: float) -> float:
    """Download once to /dev/null; returns seconds (curl's own total time)."""
    cmd = [
        curl, "--silent", "--show-error", "--insecure", "--ciphers", cipher, "--output", os.devnull,
        "--write-out", "%{size_download} %{time_total}", f"https://127.0.0.1:{port}/{name}",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"curl failed ({proc.returncode}): {proc.stderr.strip()}")
    got, seconds = proc.stdout.split()
    if int(got) != size:
        raise RuntimeError(f"curl downloaded {got} bytes, expected {size}")
    return float(seconds)


def write_file(path: Path, size: int) -> bytes | None:
    """``size`` random bytes at ``path``, readable by nginx workers; returns them if small."""
    with path.open("wb") as f:
        left = size
        while left:
            chunk = os.urandom(min(left, 1 << 20))
            f.write(chunk)
            left -= len(chunk)
    path.chmod(0o644)
    return path.read_bytes() if size <= 1 << 20 else None


# -- large files: throughput -----------------------------------------------------------


def _site(base: Path) -> tuple[Path, Path, Path, Path]:
    """Under ``base`` (made readable by nginx workers): document root, certificate, key and nginx prefix."""
    base.chmod(0o755)  # nginx workers may run as an unprivileged user
    root = base / "www"
    root.mkdir(mode=0o755)
    cert, key = base / "cert.pem", base / "key.pem"
    write_credentials(generate_self_signed(), cert, key)
    prefix = base / "nginx"
    prefix.mkdir()
    return root, cert, key, prefix


def _download_rounds(
    curl: str, servers: tuple[tuple[str, int, int], ...], name: str, cipher: str, size: int, timeout: float,
    repeats: int,
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """A warm-up download from each server, then ``repeats`` rounds of one download from each, printed.

    ``servers`` is ``((server, port, pid), ...)``.  Returns per server curl's
    seconds per download and the server's CPU seconds per download (missing
    where ``/proc`` could not be read).
    """
    times: dict[str, list[float]] = {server: [] for server, _, _ in servers}
    cpu: dict[str, list[float]] = {server: [] for server, _, _ in servers}
    for _, port, _ in servers:
        curl_download(curl, port, name, cipher, size, timeout)  # warm-up: page cache, imports
    for i in range(repeats):
        for server, port, pid in servers:
            cpu_before = tree_cpu_seconds(pid)
            seconds = curl_download(curl, port, name, cipher, size, timeout)
            cpu_after = tree_cpu_seconds(pid)
            times[server].append(seconds)
            used = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
            if used is not None:
                cpu[server].append(used)
            cpu_text = "" if used is None else f"  server CPU {used:6.3f} s"
            print(f"  round {i + 1}: {server:<12} {seconds:7.3f} s  {size / seconds / 1e6:8.1f} MB/s{cpu_text}", flush=True)
    return times, cpu


def _report_throughput(args: argparse.Namespace, size: int, suite_name: str, times: dict[str, list[float]],
                       cpu: dict[str, list[float]], began: float) -> None:
    """Print MB/s and server CPU s/GB per server and the ratios of ours to each reference; write the JSON."""
    rates = {k: Repeated.of(size / t / 1e6 for t in v) for k, v in times.items()}
    ratio = rates["tls12"].over(rates["nginx"])
    have_cpu = all(len(cpu[k]) == args.repeats for k in cpu)
    cpu_per_gb = {k: Repeated.of(c / size * 1e9 for c in v) for k, v in cpu.items()} if have_cpu else None
    cpu_ratio = cpu_per_gb["tls12"].over(cpu_per_gb["nginx"]) if cpu_per_gb else None
    print(f"\nmedian (min–max, n) of {args.repeats} interleaved repeats (measured)")
    for k in rates:
        per_gb = "(no /proc)" if cpu_per_gb is None else cpu_per_gb[k].text(".2f")
        print(f"{k:<12} {rates[k].text('.1f')} MB/s, server CPU {per_gb} s/GB")
    print(f"throughput ratio tls12 / nginx (pairwise): {ratio.text()}")
    if cpu_ratio is not None:
        print(f"server CPU ratio tls12 / nginx (pairwise): {cpu_ratio.text()}  (> 1: we spend more CPU per byte)")
    versus: dict[str, dict[str, Any]] = {}
    for ours_name, ref in (("tls12", "pyssl"), ("tls12-uvloop", "nginx"), ("tls12-uvloop", "pyssl"),
                           ("tls12-mb", "nginx"), ("tls12-mb", "pyssl"), ("tls12-mb", "tls12"),
                           ("tls12-uvloop-mb", "nginx"), ("tls12-uvloop-mb", "pyssl")):
        if ours_name in rates and ref in rates:
            r = rates[ours_name].over(rates[ref])
            c = cpu_per_gb[ours_name].over(cpu_per_gb[ref]) if cpu_per_gb else None
            versus[f"{ours_name}/{ref}"] = {"ratio": r.to_json(), "server_cpu_ratio": None if c is None else c.to_json()}
            cpu_text = "" if c is None else f", server CPU {c.text()}"
            print(f"{ours_name} / {ref} (pairwise): throughput {r.text()}{cpu_text}")
    wall = time.perf_counter() - began
    print(f"MB = 10^6 bytes; loopback, curl to /dev/null, times from curl's time_total; wall time {wall:.0f} s")
    if args.json:
        write_json(args.json, {
            "size_bytes": size,
            "suite": suite_name,
            "mb_per_s": {k: v.to_json() for k, v in rates.items()},
            "ratio": ratio.to_json(),
            "server_cpu_s_per_gb": None if cpu_per_gb is None else {k: v.to_json() for k, v in cpu_per_gb.items()},
            "server_cpu_ratio": None if cpu_ratio is None else cpu_ratio.to_json(),
            "versus": versus,
        }, repeats=args.repeats, wall_s=wall)  # fmt: skip


def throughput(args: argparse.Namespace, tools: dict[str, str], suite_name: str, cipher: str) -> int:
    """Large-file mode: one ``--size`` file downloaded by curl from both servers in interleaved rounds."""
    began = time.perf_counter()
    size = parse_size(args.size)
    timeout = max(120.0, size / 5e6)
    with tempfile.TemporaryDirectory(prefix="bench-https-") as tmp:
        root, cert, key, prefix = _site(Path(tmp))
        name = f"file_{size}.bin"
        write_file(root / name, size)
        print(f"{size} bytes ({size / 2**20:.0f} MiB), suite {suite_name}, {args.repeats} interleaved repeats")
        with ExitStack() as stack:
            running = [("tls12", *stack.enter_context(ours(root, cert, key, suite_name)))]
            running.append(("tls12-mb", *stack.enter_context(ours(root, cert, key, suite_name, "--random-ivs"))))
            if "uvloop" in loops(args.loop):
                running.append(("tls12-uvloop", *stack.enter_context(ours(root, cert, key, suite_name, "--loop", "uvloop"))))
                running.append(("tls12-uvloop-mb", *stack.enter_context(
                    ours(root, cert, key, suite_name, "--loop", "uvloop", "--random-ivs"))))
            running.append(("nginx", *stack.enter_context(nginx(tools["nginx"], root, cert, key, cipher, prefix))))
            running.append(("pyssl", *stack.enter_context(pyssl(root, cert, key, cipher))))
            servers = tuple(running)
            times, cpu = _download_rounds(tools["curl"], servers, name, cipher, size, timeout, args.repeats)
    _report_throughput(args, size, suite_name, times, cpu, began)
    return 0


# -- small files: keep-alive requests/s ----------------------------------------------------


def client_context(cipher: str) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(cipher)
    return ctx


def _read_response(tls: ssl.SSLSocket, buf: bytearray) -> bytes:
    """One whole ``Content-Length`` response from ``tls`` (extra bytes stay in ``buf``)."""
    while b"\r\n\r\n" not in buf:
        chunk = tls.recv(65536)
        if not chunk:
            raise ConnectionError("server closed the connection")
        buf += chunk
    end = buf.index(b"\r\n\r\n") + 4
    length = next(
        int(line.split(b":", 1)[1]) for line in bytes(buf[:end]).split(b"\r\n") if line.lower().startswith(b"content-length:")
    )
    while len(buf) < end + length:
        chunk = tls.recv(65536)
        if not chunk:
            raise ConnectionError("server closed the connection")
        buf += chunk
    response = bytes(buf[: end + length])
    del buf[: end + length]
    return response


def keepalive_client(port: int, path: str, cipher: str, expect: bytes, seconds: float) -> int:
    """GET ``path`` back to back on one keep-alive connection for ``seconds``; returns the request count.

    The first response is checked byte for byte; later ones by status line and
    length (every response of a server to the same request is the same size).
    """
    request = f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as raw, client_context(cipher).wrap_socket(raw) as tls:
        buf = bytearray()
        tls.sendall(request)
        first = _read_response(tls, buf)
        if not first.startswith(b"HTTP/1.1 200 ") or not first.endswith(b"\r\n\r\n" + expect):
            raise RuntimeError(f"unexpected response from port {port}: {first[:80]!r}")
        size = len(first)
        count = 1
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            tls.sendall(request)
            while len(buf) < size:
                chunk = tls.recv(65536)
                if not chunk:
                    raise ConnectionError("server closed the connection")
                buf += chunk
            if not buf.startswith(b"HTTP/1.1 200 "):
                raise RuntimeError(f"unexpected response from port {port}: {bytes(buf[:80])!r}")
            del buf[:size]
            count += 1
    return count


def wire_records(port: int, path: str, cipher: str) -> list[int]:
    """Fragment lengths of the application-data records of one response (a relay counts them)."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(30)
    records: list[int] = []

    def relay() -> None:
        try:
            forward()
        except OSError:
            pass  # the client hung up first: every record of the response was already counted

    def forward() -> None:
        client, _ = listener.accept()
        with client, socket.create_connection(("127.0.0.1", port), timeout=30) as upstream:

            def up() -> None:
                try:
                    while data := client.recv(65536):
                        upstream.sendall(data)
                    upstream.shutdown(socket.SHUT_WR)
                except OSError:
                    pass

            t = threading.Thread(target=up, daemon=True)
            t.start()
            buf = b""
            while data := upstream.recv(65536):
                client.sendall(data)
                buf += data
                while len(buf) >= 5 and len(buf) >= 5 + (n := int.from_bytes(buf[3:5], "big")):
                    if buf[0] == 23:  # application_data
                        records.append(n)
                    buf = buf[5 + n :]
            client.shutdown(socket.SHUT_WR)
            t.join(30)

    thread = threading.Thread(target=relay, daemon=True)
    thread.start()
    with listener:
        raw = socket.create_connection(("127.0.0.1", listener.getsockname()[1]), timeout=30)
        with client_context(cipher).wrap_socket(raw) as tls:
            tls.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
            _read_response(tls, bytearray())
        thread.join(30)
    return records


def _wire_and_warm(running: dict[str, tuple[int, int]], content: dict[int, bytes], cipher: str) -> dict[str, dict[int, list[int]]]:
    """Per server and size, the records of one response on the wire; each server is warmed up as it goes."""
    wire: dict[str, dict[int, list[int]]] = {s: {} for s in running}
    for name, (port, _) in running.items():
        for n in SMALL_SIZES:
            wire[name][n] = wire_records(port, f"/f{n}.bin", cipher)
            keepalive_client(port, f"/f{n}.bin", cipher, content[n], 0.2)  # warm-up
    return wire


def _small_rounds(running: dict[str, tuple[int, int]], content: dict[int, bytes], cipher: str,
                  args: argparse.Namespace, pool: multiprocessing.pool.Pool) -> dict[str, dict[int, list[tuple[float, float]]]]:
    """``--repeats`` rounds of ``--clients`` keep-alive loads per size and server: (req/s, server CPU us/req)."""
    results: dict[str, dict[int, list[tuple[float, float]]]] = {s: {n: [] for n in SMALL_SIZES} for s in running}
    order = list(running.items())
    for i in range(args.repeats):
        for n in SMALL_SIZES:
            # rotate the order each round: bursts of background load must not always hit the same server
            for name, (port, pid) in order[i % len(order) :] + order[: i % len(order)]:
                job = (port, f"/f{n}.bin", cipher, content[n], args.seconds)
                cpu_before = tree_cpu_seconds(pid)
                start = time.perf_counter()
                count = sum(pool.starmap(keepalive_client, [job] * args.clients))
                wall = time.perf_counter() - start
                cpu_after = tree_cpu_seconds(pid)
                if cpu_before is None or cpu_after is None:
                    raise RuntimeError("cannot read the server's CPU time from /proc (Linux only)")
                per_req_us = (cpu_after - cpu_before) / count * 1e6
                results[name][n].append((count / wall, per_req_us))
                print(f"  round {i + 1}: {n:5d} B {name:<15} {count / wall:8.0f} req/s  "
                      f"server CPU {per_req_us:6.1f} us/req  busy {(cpu_after - cpu_before) / wall:4.0%}",
                      flush=True)
    return results


def _summarise_small(results: dict[str, dict[int, list[tuple[float, float]]]], wire: dict[str, dict[int, list[int]]],
                     repeats: int) -> dict[str, dict[str, dict[str, object]]]:
    """Per size: every server's figures and ratios to nginx, and what coalescing the head gains; printed."""
    servers = list(results)
    summary: dict[str, dict[str, dict[str, object]]] = {}
    print(f"\nmedian (min–max, n) of {repeats} interleaved repeats (measured); ratios pair by pair, same round")
    for n in SMALL_SIZES:
        rate = {name: Repeated.of(r for r, _ in results[name][n]) for name in servers}
        cpu = {name: Repeated.of(c for _, c in results[name][n]) for name in servers}
        for name in servers:
            recs = wire[name][n]
            rate_x, cpu_x = rate[name].over(rate["nginx"]), cpu[name].over(cpu["nginx"])
            summary.setdefault(str(n), {})[name] = {
                "requests_per_s": rate[name].to_json(), "server_cpu_us_per_request": cpu[name].to_json(),
                "records": len(recs), "wire_bytes": sum(5 + r for r in recs),
                "rate_vs_nginx": rate_x.to_json(), "cpu_vs_nginx": cpu_x.to_json(),
            }  # fmt: skip
            print(f"{n:>5} B {name:<15} {rate[name].text('.0f')} req/s, CPU {cpu[name].text('.1f')} us/req, "
                  f"{len(recs)} records ({sum(5 + r for r in recs)} B); x nginx: req/s {rate_x.text()}, "
                  f"CPU {cpu_x.text()}")
        gain = rate["tls12"].over(rate["tls12-separate"])
        cpu_gain = cpu["tls12-separate"].over(cpu["tls12"])
        summary[str(n)]["coalescing"] = {"rate_ratio": gain.to_json(), "cpu_ratio": cpu_gain.to_json()}
        print(f"{n:>5} B coalescing: {gain.text()}x requests/s, {cpu_gain.text()}x less server CPU per request")
    return summary


def small(args: argparse.Namespace, tools: dict[str, str], suite_name: str, cipher: str) -> int:
    """``--small`` mode: keep-alive requests/s of small files on ours (coalesced, separate head) and nginx."""
    began = time.perf_counter()
    pool = multiprocessing.get_context("fork").Pool(args.clients)
    with tempfile.TemporaryDirectory(prefix="bench-https-small-") as tmp, pool:
        root, cert, key, prefix = _site(Path(tmp))
        content = {n: write_file(root / f"f{n}.bin", n) or b"" for n in SMALL_SIZES}
        print(f"keep-alive GETs over Python ssl, suite {suite_name}, {args.clients} clients x {args.seconds:g} s,"
              f" {args.repeats} interleaved repeats", flush=True)
        with ExitStack() as stack:
            running = {"tls12": stack.enter_context(ours(root, cert, key, suite_name)),
                       "tls12-separate": stack.enter_context(ours(root, cert, key, suite_name, "--no-coalesce"))}
            if "uvloop" in loops(args.loop):
                running["tls12-uvloop"] = stack.enter_context(ours(root, cert, key, suite_name, "--loop", "uvloop"))
            running["nginx"] = stack.enter_context(nginx(tools["nginx"], root, cert, key, cipher, prefix))
            wire = _wire_and_warm(running, content, cipher)
            results = _small_rounds(running, content, cipher, args, pool)

    summary = _summarise_small(results, wire, args.repeats)
    wall = time.perf_counter() - began
    print(f"records / wire B: application-data records and their bytes for one response (Connection: close); "
          f"wall time {wall:.0f} s")
    if args.json:
        write_json(args.json, {
            "mode": "small", "suite": suite_name, "clients": args.clients, "seconds": args.seconds,
            "by_size": summary,
        }, repeats=args.repeats, wall_s=wall)  # fmt: skip
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Exits with status 1 and one line when curl, nginx or the C extension is missing.",
    )  # fmt: skip
    parser.add_argument("--small", action="store_true", help="small-file keep-alive requests/s instead of throughput")
    parser.add_argument("--size", default="256M", help="file size for throughput, K/M/G suffixes (default %(default)s)")
    parser.add_argument(
        "--cipher",
        default="AES128-SHA",
        help=f"OpenSSL suite name, one of {', '.join(p.openssl_name for p in SUITES.values())} (default %(default)s)",
    )
    add_repeats_option(parser)
    parser.add_argument("--seconds", type=float, default=2.0, help="--small: seconds per measurement (default %(default)s)")
    parser.add_argument("--clients", type=int, default=2, help="--small: load processes at once (default %(default)s)")
    parser.add_argument("--loop", choices=("asyncio", "both"), default="both",
                        help="both: ours on uvloop too, if installed (default %(default)s); asyncio: only on asyncio's loop")
    parser.add_argument("--json", type=Path, help="also write the results as JSON to this file")
    args = parser.parse_args(argv)
    if not args.seconds > 0 or args.clients < 1:
        parser.error("--seconds and --clients must be positive")
    try:
        suite = suite_by_name(args.cipher)
    except ValueError as exc:
        parser.error(str(exc))
    tools = require_tools(BENCH, {"curl": "curl", "nginx": "nginx-light"})
    require_c_extension(BENCH)
    cipher = curl_cipher_arg(suite)  # adds @SECLEVEL=0 for NULL suites, for curl and nginx alike
    if args.small:
        return small(args, tools, SUITES[suite].openssl_name, cipher)
    return throughput(args, tools, SUITES[suite].openssl_name, cipher)


if __name__ == "__main__":
    sys.exit(main())
