"""End-to-end HTTPS throughput: curl downloading one large file from tls12.https_server vs nginx.

Both servers run on loopback in the same run, serve the same file with the
same certificate, and are restricted to the same TLS 1.2 cipher suite; curl
downloads the file to ``/dev/null`` ``--repeat`` times from each (alternating)
and the best and median throughputs are printed with the ratio
``ours / nginx``.  On loopback there is no network bottleneck: the figure
compares the CPU cost per byte of the two TLS record paths (our Python core
with its C record extension vs nginx's OpenSSL), plus curl's own decryption,
which is the same for both.

Because curl's own decryption is often the bottleneck on loopback (both
servers then reach the same wall-clock rate), the server-side CPU time per
download is measured too (Linux ``/proc``: user + system time of the server
process tree) and its ratio printed -- the figure that shows what our record
path costs compared with nginx's.

Usage::

    python benchmarks/bench_https.py                 # 256 MiB, AES128-SHA, 5 rounds
    python benchmarks/bench_https.py --size 64M --cipher ECDHE-RSA-AES128-SHA256 --repeat 5

Requires curl and nginx (``apt-get install curl nginx-light``); nginx is started
with a generated ``nginx.conf`` in a temporary prefix (``daemon off;``) and
killed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tls12.certs import generate_self_signed, write_credentials  # noqa: E402
from tls12.demo import curl_cipher_arg, parse_size  # noqa: E402
from tls12.suites import SUITES, suite_by_name  # noqa: E402

STARTUP_TIMEOUT = 30.0

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
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        ssl_protocols TLSv1.2;
        ssl_ciphers {ciphers};
        ssl_prefer_server_ciphers on;
        ssl_session_cache off;
        root {root};
    }}
}}
"""


def free_port() -> int:
    """A port that was free a moment ago on 127.0.0.1 (nginx cannot be told to pick one)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float = STARTUP_TIMEOUT) -> None:
    """Wait until something accepts TCP connections on ``port``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on port {port} after {timeout} s")


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)


@contextmanager
def ours(root: Path, cert: Path, key: Path, cipher: str) -> Iterator[tuple[int, int]]:
    """Run ``python -m tls12.https_server`` in its own process; yields ``(port, pid)``."""
    port = free_port()
    cmd = [
        sys.executable, "-m", "tls12.https_server", "--root", str(root), "--port", str(port),
        "--cert", str(cert), "--key", str(key), "--ciphers", cipher, "--quiet",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env=env, start_new_session=True)
    try:
        wait_for_port(port, proc)
        yield port, proc.pid
    finally:
        _kill(proc)


@contextmanager
def nginx(root: Path, cert: Path, key: Path, cipher: str, prefix: Path) -> Iterator[tuple[int, int]]:
    """Run nginx (foreground, own prefix) with the same certificate and suite; yields ``(port, pid)``."""
    exe = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if exe is None:
        raise FileNotFoundError("nginx is not installed (apt-get install nginx-light)")
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
        _kill(proc)


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        kids += [int(k) for k in task.read_text().split()]
    return kids


def tree_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of ``pid`` and its descendants (Linux ``/proc``), or None."""
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    total = 0
    todo = [pid]
    try:
        while todo:
            p = todo.pop()
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15 of stat)
            todo += _children(p)
    except (OSError, IndexError, ValueError):
        return None
    return total / ticks


def curl_download(port: int, name: str, cipher: str, size: int, timeout: float) -> float:
    """Download once to /dev/null; returns seconds (curl's own total time)."""
    cmd = [
        "curl", "--silent", "--show-error", "--insecure", "--ciphers", cipher, "--output", os.devnull,
        "--write-out", "%{size_download} %{time_total}", f"https://127.0.0.1:{port}/{name}",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"curl failed ({proc.returncode}): {proc.stderr.strip()}")
    got, seconds = proc.stdout.split()
    if int(got) != size:
        raise RuntimeError(f"curl downloaded {got} bytes, expected {size}")
    return float(seconds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="256M", help="file size, K/M/G suffixes (default %(default)s)")
    parser.add_argument(
        "--cipher",
        default="AES128-SHA",
        help=f"OpenSSL suite name, one of {', '.join(p.openssl_name for p in SUITES.values())} (default %(default)s)",
    )
    parser.add_argument("--repeat", type=int, default=5, help="downloads per server (default %(default)s)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON to this file")
    args = parser.parse_args(argv)
    size = parse_size(args.size)
    suite = suite_by_name(args.cipher)
    cipher = curl_cipher_arg(suite)  # adds @SECLEVEL=0 for NULL suites, for curl and nginx alike
    if shutil.which("curl") is None:
        print("error: curl is not installed", file=sys.stderr)
        return 2
    timeout = max(120.0, size / 5e6)

    with tempfile.TemporaryDirectory(prefix="bench-https-") as tmp:
        base = Path(tmp)
        base.chmod(0o755)  # nginx workers may run as an unprivileged user
        root = base / "www"
        root.mkdir(mode=0o755)
        name = f"file_{size}.bin"
        with (root / name).open("wb") as f:
            left = size
            while left:
                chunk = os.urandom(min(left, 1 << 20))
                f.write(chunk)
                left -= len(chunk)
        (root / name).chmod(0o644)
        cert, key = base / "cert.pem", base / "key.pem"
        write_credentials(generate_self_signed(), cert, key)
        prefix = base / "nginx"
        prefix.mkdir()

        times: dict[str, list[float]] = {"tls12": [], "nginx": []}
        cpu: dict[str, list[float]] = {"tls12": [], "nginx": []}
        print(f"{size} bytes ({size / 2**20:.0f} MiB), suite {SUITES[suite].openssl_name}, {args.repeat} rounds")
        with ours(root, cert, key, SUITES[suite].openssl_name) as (our_port, our_pid), nginx(
            root, cert, key, cipher, prefix
        ) as (nginx_port, nginx_pid):
            servers = (("tls12", our_port, our_pid), ("nginx", nginx_port, nginx_pid))
            for _, port, _ in servers:
                curl_download(port, name, cipher, size, timeout)  # warm-up: page cache, imports
            for i in range(args.repeat):
                for server, port, pid in servers:
                    cpu_before = tree_cpu_seconds(pid)
                    seconds = curl_download(port, name, cipher, size, timeout)
                    cpu_after = tree_cpu_seconds(pid)
                    times[server].append(seconds)
                    used = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
                    if used is not None:
                        cpu[server].append(used)
                    cpu_text = "" if used is None else f"  server CPU {used:6.3f} s"
                    print(f"  round {i + 1}: {server:<6} {seconds:7.3f} s  {size / seconds / 1e6:8.1f} MB/s{cpu_text}", flush=True)

    rates = {k: [size / t / 1e6 for t in v] for k, v in times.items()}
    best = {k: max(v) for k, v in rates.items()}
    median = {k: statistics.median(v) for k, v in rates.items()}
    cpu_median = {k: statistics.median(v) if v else None for k, v in cpu.items()}
    print(f"\n{'server':<8} {'best MB/s':>10} {'median MB/s':>12} {'server CPU s/GB':>16}")
    for k in ("tls12", "nginx"):
        c = cpu_median[k]
        per_gb = "n/a" if c is None else f"{c / size * 1e9:.2f}"
        print(f"{k:<8} {best[k]:>10.1f} {median[k]:>12.1f} {per_gb:>16}")
    ratio = median["tls12"] / median["nginx"]
    print(f"throughput ratio tls12 / nginx (median): {ratio:.2f}   (best: {best['tls12'] / best['nginx']:.2f})")
    cpu_ratio = None
    if cpu_median["tls12"] and cpu_median["nginx"]:
        cpu_ratio = cpu_median["tls12"] / cpu_median["nginx"]
        print(f"server CPU ratio tls12 / nginx (median): {cpu_ratio:.2f}  (> 1: we spend more CPU per byte)")
    print("MB = 10^6 bytes; loopback, curl to /dev/null, times from curl's time_total")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {
                    "size_bytes": size,
                    "suite": SUITES[suite].openssl_name,
                    "seconds": times,
                    "mb_per_s_best": best,
                    "mb_per_s_median": median,
                    "ratio_median": ratio,
                    "server_cpu_seconds": cpu,
                    "server_cpu_ratio_median": cpu_ratio,
                },
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
